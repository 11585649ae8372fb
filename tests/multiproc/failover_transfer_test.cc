// Registry failover while a transfer is under way (issue 18, item 5): the first of two
// registries is killed while a reader is certainly in the middle of replicating, and the reader
// must complete byte-exact (not "exact or an error") when a holder of the version is left: its
// own source (the transfer goes on reading it), or another holder at the new registry when the
// source gave its buffers up or died meanwhile (docs/sched.md, "Restart").
//
// "Certainly in the middle": the reader reads 4 KiB at a time from a source that is then
// stopped (SIGSTOP), so that it holds a prefix and cannot finish while the test kills the
// registry. Where the order matters, the test waits for events, not delays: a stop taking effect
// in every thread, a peer's counter (THUB_Model_stat), the new registry counting the reader
// among its members (tensorhub-info --registry); a registry "with no answer" is the second
// one stopped (it accepts connections and answers nothing).
//
// Over TCP only: a process stopped or killed in the middle of a shared-memory send can wedge
// its peer's receive queue (pipeline_test.cc).
#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "tests/multiproc/cluster.h"

#ifndef THUB_INFO_PATH
#error "THUB_INFO_PATH must name the tensorhub-info executable"
#endif

namespace thub::test {
namespace {

// 2 x 16 MiB plus two tensors packed together: 8k gets of 4 KiB for the slow reader.
const std::string kShard = "16777216,16777216,0,4096";
// The stopped sources stay registered at both registries for the whole test.
const std::vector<std::string> kPatient = {"--heartbeat-timeout-ms", "600000"};
// The second registry takes over as a backup does: for 30 s after its first open a request it
// would answer "not found" or "version lost" waits for a holder to come back and re-publish
// (Config::takeover_grace), so that the order in which the fleet re-opens there does not
// decide a reader's outcome.
const std::vector<std::string> kBackup = {"--heartbeat-timeout-ms", "600000", "--takeover-grace-ms", "30000"};
// The reader: slow (one 4 KiB get at a time), in the trainer's datacenter (the chooser then
// prefers the trainer over the other holder), and patient with a stopped source.
const std::string kReader = "datacenter=a chunk_size=4096 max_inflight=1 stall_timeout_ms=120000";

struct Daemon {
  std::unique_ptr<PeerProcess> proc;
  std::string address;
  explicit Daemon(std::vector<std::string> args) {
    args.insert(args.begin(), {"--listen", "127.0.0.1:0"});
    proc = std::make_unique<PeerProcess>(THUB_REGISTRY_PATH, args);
    std::string line = proc->reply(30);
    EXPECT_EQ(word(line, 0), "listening") << line;
    address = word(line, 1);
  }
};

// Two registries, the first one the clients' registry until it is killed.
struct Registries {
  Daemon first{kPatient}, second{kBackup};
  std::string list() const { return first.address + "," + second.address; }
};

std::unique_ptr<PeerProcess> peer(const Registries& regs, const std::string& replica, int shard, int num_shards,
                                  const std::string& init_args) {
  auto p = std::make_unique<PeerProcess>(std::map<std::string, std::string>{
      {"TENSORHUB_REGISTRY", regs.list()},
      {"UCX_TLS", "tcp"},
      {"TENSORHUB_VERIFY", "1"},
      {"TENSORHUB_RECONNECT_MS", "120000"}});  // a stopped second registry is waited for
  std::string r = p->cmd("init " + init_args);
  EXPECT_TRUE(ok(r)) << r;
  r = p->cmd("open policy " + replica + " " + std::to_string(shard) + " " + std::to_string(num_shards));
  EXPECT_TRUE(ok(r)) << r;
  r = p->cmd("tensors " + kShard);
  EXPECT_TRUE(ok(r)) << r;
  return p;
}

// Stopped peers are continued when the test ends early, so that they quit at once.
struct ContinueAtExit {
  std::vector<PeerProcess*> peers;
  ~ContinueAtExit() {
    for (PeerProcess* p : peers) {
      if (p->pid() > 0) p->signal(SIGCONT);  // not a killed one: kill(-1) signals everybody
    }
  }
};

// The members the registry at `address` counts for model "policy" (tensorhub-info's text:
// "model policy: ..., N members", the whole of it in `text`); -1 when it knows no such model
// or cannot be read.
int policy_members(const std::string& address, std::string* text) {
  std::string cmd = "timeout -s KILL 60 " + std::string(THUB_INFO_PATH) + " --registry " + address + " 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return -1;
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  ::pclose(f);
  *text = out;
  size_t at = out.find("\nmodel policy: ");
  if (at == std::string::npos) return -1;
  std::string line = out.substr(at + 1, out.find('\n', at + 1) - at - 1);
  size_t comma = line.rfind(", ");
  if (comma == std::string::npos) return -1;
  return std::atoi(line.c_str() + comma + 2);
}

// Polls the registry until it counts `n` members of "policy" (a state condition; gives up
// after 60 s so that a broken build fails instead of hanging, saying what it saw last).
::testing::AssertionResult wait_for_members(const std::string& address, int n) {
  int seen = -1;
  std::string text;
  for (int i = 0; i < 1200; ++i) {
    if ((seen = policy_members(address, &text)) == n) return ::testing::AssertionSuccess();
    ::poll(nullptr, 0, 50);
  }
  return ::testing::AssertionFailure() << "the registry counts " << seen << " members of policy, not " << n
                                       << "; tensorhub-info says:\n"
                                       << text;
}

// SIGSTOP, and wait until it took effect: kill() returns before every thread of the target has
// stopped (one thread takes the signal and then stops the others), and a thread not yet stopped
// may still answer (a registry a HELLO, a peer its re-open): seen under AddressSanitizer.
void stop(PeerProcess& p, ContinueAtExit& guard) {
  p.signal(SIGSTOP);  // returns once every thread stopped (PeerProcess::signal)
  guard.peers.push_back(&p);
  EXPECT_TRUE(PeerProcess::all_threads_stopped(p.pid())) << "pid " << p.pid() << " did not stop";
}

// Waits until the replicate `reader` has under way holds some bytes, then stops its source: the
// reader then holds a prefix (`*held`) and cannot finish.
void stop_in_the_middle(PeerProcess& reader, PeerProcess& source, ContinueAtExit& guard, int64_t* held) {
  ASSERT_TRUE(wait_for_stat(reader, "bytes_held", [](int64_t b) { return b > 0; })) << "the reader got no bytes";
  stop(source, guard);
  *held = stat(reader, "bytes_held");
  ASSERT_LT(*held, stat(reader, "total_bytes")) << "the reader finished before its source stopped";
}

// The reader's replicate ends with version 1 and every byte of `seed`.
void expect_byte_exact(PeerProcess& reader, int seed, const std::string& what) {
  std::string w = reader.cmd("wait");
  ASSERT_TRUE(ok(w)) << what << ": " << w;
  EXPECT_EQ(word(w, 1), "0") << what << ": " << w;
  EXPECT_EQ(word(w, 2), "1") << what << ": " << w;
  std::string c = reader.cmd("check " + std::to_string(seed));
  EXPECT_TRUE(ok(c)) << what << ": " << c;
  EXPECT_EQ(stat(reader, "held_version"), 1) << what;
}

// The reader changed source once and read only what it lacked: its last transfer (the resumed
// one) started at or after the `held` bytes it had checked when its first source stopped.
void expect_resumed(PeerProcess& reader, int64_t held, const std::string& what) {
  EXPECT_EQ(stat(reader, "source_failures"), 1) << what;
  EXPECT_LE(stat(reader, "bytes_socket"), stat(reader, "total_bytes") - held) << what << " resumed from 0";
}

// The trainer t (datacenter a) publishes version 1 filled with `seed`; with `other_holder`, h
// (datacenter b) replicates it; then the slow reader r (datacenter a, so granted t) starts
// replicating it.
struct Scene {
  Registries regs;
  std::unique_ptr<PeerProcess> t, h, r;
  void start(int seed, bool other_holder) {
    ASSERT_FALSE(regs.first.address.empty());
    ASSERT_FALSE(regs.second.address.empty());
    t = peer(regs, "t", 0, 1, "datacenter=a");
    ASSERT_TRUE(ok(t->cmd("fill " + std::to_string(seed))));
    ASSERT_TRUE(ok(t->cmd("publish 1")));
    if (other_holder) {
      h = peer(regs, "h", 0, 1, "datacenter=b");
      std::string hr = h->cmd("replicate 1");
      ASSERT_TRUE(ok(hr)) << hr;
      ASSERT_TRUE(ok(h->cmd("check " + std::to_string(seed))));
    }
    r = peer(regs, "r", 0, 1, kReader);
    ASSERT_TRUE(ok(r->cmd("ireplicate 1")));
  }
  // A reader that starts after the failover gets version 1 from the second registry.
  void late_reader_gets(int seed) {
    auto late = peer(regs, "late", 0, 1, "");
    std::string l = late->cmd("replicate 1");
    ASSERT_TRUE(ok(l)) << l;
    EXPECT_TRUE(ok(late->cmd("check " + std::to_string(seed))));
  }
};

// The registry dies while the reader's transfer is stuck on a stopped source; the reader
// re-opens at the second registry, still mid-transfer; then the source goes on. The transfer
// goes on reading the same source (no source failure), completes byte-exact, and its holding is
// published at the new registry, which serves it to a late reader.
TEST(FailoverTransferTest, RegistryDiesMidTransferAndTheReaderGoesOnReadingItsSource) {
  Scene c;
  ASSERT_NO_FATAL_FAILURE(c.start(501, false));
  ContinueAtExit guard;
  int64_t held = 0;
  ASSERT_NO_FATAL_FAILURE(stop_in_the_middle(*c.r, *c.t, guard, &held));

  c.regs.first.proc->kill_now();
  // t is stopped: the one member the second registry counts is the reader.
  ASSERT_TRUE(wait_for_members(c.regs.second.address, 1)) << "the reader did not re-open at the second registry";
  ASSERT_LT(stat(*c.r, "bytes_held"), stat(*c.r, "total_bytes")) << "the reader finished with its source stopped";
  c.t->signal(SIGCONT);

  ASSERT_NO_FATAL_FAILURE(expect_byte_exact(*c.r, 501, "the reader"));
  EXPECT_EQ(stat(*c.r, "source_failures"), 0) << "the transfer should have gone on reading its source";
  EXPECT_EQ(stat(*c.r, "republished"), 1) << "the new holding should be published at the second registry";
  ASSERT_TRUE(wait_for_stat(*c.t, "republished", [](int64_t n) { return n >= 1; }));
  ASSERT_NO_FATAL_FAILURE(c.late_reader_gets(501));
}

// The registry dies mid-transfer and the second one is stopped (it accepts connections but
// answers nothing): the transfer ends while the reader has no registry. The replicate succeeds
// byte-exact all the same (every byte was checked against the source's counter); once the
// second registry answers, the reader publishes its holding there.
TEST(FailoverTransferTest, TransferEndsWhileTheReaderHasNoRegistry) {
  Scene c;
  ASSERT_NO_FATAL_FAILURE(c.start(503, false));
  ContinueAtExit guard;
  int64_t held = 0;
  ASSERT_NO_FATAL_FAILURE(stop_in_the_middle(*c.r, *c.t, guard, &held));

  stop(*c.regs.second.proc, guard);
  c.regs.first.proc->kill_now();
  c.t->signal(SIGCONT);
  ASSERT_NO_FATAL_FAILURE(expect_byte_exact(*c.r, 503, "the reader, with no registry"));
  EXPECT_EQ(stat(*c.r, "source_failures"), 0) << "the transfer should have gone on reading its source";
  EXPECT_EQ(stat(*c.r, "republished"), 0) << "published at a registry that answers nothing";

  c.regs.second.proc->signal(SIGCONT);
  ASSERT_TRUE(wait_for_stat(*c.r, "republished", [](int64_t n) { return n >= 1; }));
  ASSERT_NO_FATAL_FAILURE(c.late_reader_gets(503));
}

// The registry dies mid-transfer, the reader re-opens at the second registry, and then its
// source dies (SIGKILL). The other holder h (in another datacenter, so the reader was not sent
// there first) re-published at the new registry: the reader resumes there from its checked
// bytes and completes byte-exact.
TEST(FailoverTransferTest, SourceDiesAfterTheFailoverAndTheReaderResumesFromAnotherHolder) {
  Scene c;
  ASSERT_NO_FATAL_FAILURE(c.start(511, true));
  ContinueAtExit guard;
  int64_t held = 0;
  ASSERT_NO_FATAL_FAILURE(stop_in_the_middle(*c.r, *c.t, guard, &held));

  c.regs.first.proc->kill_now();
  ASSERT_TRUE(wait_for_stat(*c.h, "republished", [](int64_t n) { return n >= 1; }));
  ASSERT_TRUE(wait_for_members(c.regs.second.address, 2)) << "the reader did not re-open at the second registry";
  ASSERT_LT(stat(*c.r, "bytes_held"), stat(*c.r, "total_bytes")) << "the reader finished with its source stopped";
  c.t->kill_now();

  ASSERT_NO_FATAL_FAILURE(expect_byte_exact(*c.r, 511, "the reader"));
  expect_resumed(*c.r, held, "the reader");
}

// The source dies while the reader has no registry (the second one is stopped): the reader
// knows its source failed and waits. The reader is stopped while the other holder h re-publishes
// at the second registry; then the reader asks it for the same version and resumes from its
// checked bytes at h.
TEST(FailoverTransferTest, SourceDiesWhileTheReaderHasNoRegistryAndTheReaderResumesAtTheNextOne) {
  Scene c;
  ASSERT_NO_FATAL_FAILURE(c.start(513, true));
  ContinueAtExit guard;
  int64_t held = 0;
  ASSERT_NO_FATAL_FAILURE(stop_in_the_middle(*c.r, *c.t, guard, &held));

  stop(*c.regs.second.proc, guard);
  c.regs.first.proc->kill_now();
  c.t->kill_now();
  ASSERT_TRUE(wait_for_stat(*c.r, "source_failures", [](int64_t n) { return n >= 1; }))
      << "the reader did not notice that its source died";
  std::string early = c.r->cmd("test");
  ASSERT_TRUE(ok(early)) << early;
  ASSERT_EQ(word(early, 1), "0") << "the replicate ended with no registry: " << early;
  stop(*c.r, guard);
  c.regs.second.proc->signal(SIGCONT);
  ASSERT_TRUE(wait_for_stat(*c.h, "republished", [](int64_t n) { return n >= 1; }));
  c.r->signal(SIGCONT);

  ASSERT_NO_FATAL_FAILURE(expect_byte_exact(*c.r, 513, "the reader"));
  expect_resumed(*c.r, held, "the reader");
}

// As above, in the other order: the reader re-opens at the second registry and asks it for the
// version before the other holder h has re-published there (h is stopped meanwhile; a fleet that
// fails over at once gives either order). h is left and comes back: the reader must complete
// from it, not fail because the new registry has not heard of the version yet.
// Asked before the other holder re-published there, the version is unknown to the new
// registry or has no holder yet: the second registry's takeover grace holds the resume until h
// comes back (without it, the resume was refused although a holder was coming back).
TEST(FailoverTransferTest, ReaderAsksTheNextRegistryBeforeTheOtherHolderRepublishedThere) {
  Scene c;
  ASSERT_NO_FATAL_FAILURE(c.start(517, true));
  ContinueAtExit guard;
  int64_t held = 0;
  ASSERT_NO_FATAL_FAILURE(stop_in_the_middle(*c.r, *c.t, guard, &held));

  stop(*c.h, guard);  // before the failover: it cannot have re-opened anywhere
  stop(*c.regs.second.proc, guard);
  c.regs.first.proc->kill_now();
  c.t->kill_now();
  ASSERT_TRUE(wait_for_stat(*c.r, "source_failures", [](int64_t n) { return n >= 1; }))
      << "the reader did not notice that its source died";
  c.regs.second.proc->signal(SIGCONT);
  ASSERT_TRUE(wait_for_members(c.regs.second.address, 1)) << "the reader did not re-open at the second registry";
  c.h->signal(SIGCONT);

  ASSERT_NO_FATAL_FAILURE(expect_byte_exact(*c.r, 517, "the reader"));
  expect_resumed(*c.r, held, "the reader");
}

// The registry dies mid-transfer while the reader is stopped too; the source then re-publishes
// at the second registry, unpublishes there (which knows no lease on it, so it returns at once)
// and overwrites its buffers, as a trainer's next step does. The reader, continued, finds the
// registry gone and its source's counter changed at once: it must keep no byte of the new
// contents, and resumes at the new registry from the other holder.
TEST(FailoverTransferTest, SourceUnpublishesAfterTheFailoverAndTheReaderResumesFromAnotherHolder) {
  Scene c;
  ASSERT_NO_FATAL_FAILURE(c.start(521, true));
  ContinueAtExit guard;
  int64_t held = 0;
  ASSERT_NO_FATAL_FAILURE(stop_in_the_middle(*c.r, *c.t, guard, &held));
  stop(*c.r, guard);  // stuck on t, so still in the middle

  c.regs.first.proc->kill_now();
  c.t->signal(SIGCONT);
  ASSERT_TRUE(wait_for_stat(*c.t, "republished", [](int64_t n) { return n >= 1; }));
  ASSERT_TRUE(wait_for_stat(*c.h, "republished", [](int64_t n) { return n >= 1; }));
  std::string u = c.t->cmd("unpublish");
  ASSERT_TRUE(ok(u)) << u;
  ASSERT_TRUE(ok(c.t->cmd("fill 522")));
  c.r->signal(SIGCONT);

  ASSERT_NO_FATAL_FAILURE(expect_byte_exact(*c.r, 521, "the reader"));
  expect_resumed(*c.r, held, "the reader");
}

// A 2-shard reader replica, each shard stuck on its own shard of the trainer when the registry
// dies; after both re-opened at the second registry, shard 0's source dies and shard 1's goes
// on. Shard 0 resumes from the other holder's shard 0, shard 1 finishes from its source; both
// end with version 1, byte-exact.
TEST(FailoverTransferTest, TwoShardsCompleteWithTheSameVersionWhenOneSourceDiesAfterTheFailover) {
  Registries regs;
  ASSERT_FALSE(regs.first.address.empty());
  ASSERT_FALSE(regs.second.address.empty());
  std::unique_ptr<PeerProcess> t[2], h[2], r[2];
  for (int s = 0; s < 2; ++s) {
    t[s] = peer(regs, "t", s, 2, "datacenter=a");
    ASSERT_TRUE(ok(t[s]->cmd("fill " + std::to_string(531 + s))));
    ASSERT_TRUE(ok(t[s]->cmd("publish 1")));
  }
  for (int s = 0; s < 2; ++s) h[s] = peer(regs, "h", s, 2, "datacenter=b");
  for (int s = 0; s < 2; ++s) h[s]->send("replicate 1");
  for (int s = 0; s < 2; ++s) {
    std::string hr = h[s]->reply();
    ASSERT_TRUE(ok(hr)) << "h shard " << s << ": " << hr;
  }
  for (int s = 0; s < 2; ++s) r[s] = peer(regs, "r", s, 2, kReader);
  for (int s = 0; s < 2; ++s) ASSERT_TRUE(ok(r[s]->cmd("ireplicate 1")));
  ContinueAtExit guard;
  int64_t held[2] = {0, 0};
  for (int s = 0; s < 2; ++s) ASSERT_NO_FATAL_FAILURE(stop_in_the_middle(*r[s], *t[s], guard, &held[s]));

  regs.first.proc->kill_now();
  for (int s = 0; s < 2; ++s) ASSERT_TRUE(wait_for_stat(*h[s], "republished", [](int64_t n) { return n >= 1; }));
  ASSERT_TRUE(wait_for_members(regs.second.address, 4)) << "the reader's shards did not re-open at the second registry";
  for (int s = 0; s < 2; ++s) {
    ASSERT_LT(stat(*r[s], "bytes_held"), stat(*r[s], "total_bytes")) << "shard " << s << " finished too soon";
  }
  t[0]->kill_now();
  t[1]->signal(SIGCONT);

  for (int s = 0; s < 2; ++s) {
    ASSERT_NO_FATAL_FAILURE(expect_byte_exact(*r[s], 531 + s, "shard " + std::to_string(s)));
  }
  expect_resumed(*r[0], held[0], "shard 0");
  EXPECT_EQ(stat(*r[1], "source_failures"), 0) << "shard 1's transfer should have gone on reading its source";
}

// The 2-shard case of ReaderAsksTheNextRegistryBeforeTheOtherHolderRepublishedThere: shard 0's
// source dies while the reader has no registry and shard 0 asks the second registry before the
// other holder h re-published there; shard 1's source goes on. Both shards must end with version
// 1, byte-exact (the same outcome on every shard, issue 18).
// Asked before the other holder re-published there, the version is unknown to the new
// registry or has no holder yet: the second registry's takeover grace holds the resume until h
// comes back (without it, the resume was refused although a holder was coming back).
TEST(FailoverTransferTest, TwoShardsCompleteWhenOneAsksTheNextRegistryBeforeTheOtherHolderRepublished) {
  Registries regs;
  ASSERT_FALSE(regs.first.address.empty());
  ASSERT_FALSE(regs.second.address.empty());
  std::unique_ptr<PeerProcess> t[2], h[2], r[2];
  for (int s = 0; s < 2; ++s) {
    t[s] = peer(regs, "t", s, 2, "datacenter=a");
    ASSERT_TRUE(ok(t[s]->cmd("fill " + std::to_string(541 + s))));
    ASSERT_TRUE(ok(t[s]->cmd("publish 1")));
  }
  for (int s = 0; s < 2; ++s) h[s] = peer(regs, "h", s, 2, "datacenter=b");
  for (int s = 0; s < 2; ++s) h[s]->send("replicate 1");
  for (int s = 0; s < 2; ++s) {
    std::string hr = h[s]->reply();
    ASSERT_TRUE(ok(hr)) << "h shard " << s << ": " << hr;
  }
  for (int s = 0; s < 2; ++s) r[s] = peer(regs, "r", s, 2, kReader);
  for (int s = 0; s < 2; ++s) ASSERT_TRUE(ok(r[s]->cmd("ireplicate 1")));
  ContinueAtExit guard;
  int64_t held[2] = {0, 0};
  for (int s = 0; s < 2; ++s) ASSERT_NO_FATAL_FAILURE(stop_in_the_middle(*r[s], *t[s], guard, &held[s]));

  for (int s = 0; s < 2; ++s) stop(*h[s], guard);  // before the failover: they cannot have re-opened
  stop(*regs.second.proc, guard);
  regs.first.proc->kill_now();
  t[0]->kill_now();
  ASSERT_TRUE(wait_for_stat(*r[0], "source_failures", [](int64_t n) { return n >= 1; }))
      << "shard 0 did not notice that its source died";
  regs.second.proc->signal(SIGCONT);
  ASSERT_TRUE(wait_for_members(regs.second.address, 2)) << "the reader's shards did not re-open at the second registry";
  for (int s = 0; s < 2; ++s) h[s]->signal(SIGCONT);
  t[1]->signal(SIGCONT);

  std::string outcome[2];
  for (int s = 0; s < 2; ++s) outcome[s] = r[s]->cmd("wait");
  EXPECT_EQ(word(outcome[0], 2), word(outcome[1], 2))
      << "the shards disagree: shard 0 " << outcome[0] << "; shard 1 " << outcome[1];
  for (int s = 0; s < 2; ++s) {
    ASSERT_TRUE(ok(outcome[s])) << "shard " << s << ": " << outcome[s];
    EXPECT_EQ(word(outcome[s], 2), "1") << "shard " << s << ": " << outcome[s];
    EXPECT_TRUE(ok(r[s]->cmd("check " + std::to_string(541 + s)))) << "shard " << s;
  }
  expect_resumed(*r[0], held[0], "shard 0");
  EXPECT_EQ(stat(*r[1], "source_failures"), 0) << "shard 1's transfer should have gone on reading its source";
}

}  // namespace
}  // namespace thub::test
