// A failed source is judged, not rumoured, across real processes: a reader that gives up on a
// healthy source (its own stall watchdog fired) stops using it, but the source keeps its
// other readers and completes its own transfer; a source that really died is hidden at once
// (its connection closed) and its readers resume elsewhere (docs/sched.md, "Failure").
#include <gtest/gtest.h>
#include <signal.h>

#include "tests/multiproc/cluster.h"

namespace thub::test {
namespace {

const std::string kLayout16 = "16777216,16777216";

struct Daemon {
  std::unique_ptr<PeerProcess> proc;
  std::string address;
  explicit Daemon(std::vector<std::string> args = {}) {
    args.insert(args.begin(), {"--listen", "127.0.0.1:0"});
    proc = std::make_unique<PeerProcess>(THUB_REGISTRY_PATH, args);
    std::string line = proc->reply(30);
    EXPECT_EQ(word(line, 0), "listening") << line;
    address = word(line, 1);
  }
};

// Over TCP only (a process stopped or killed in the middle of a shared-memory send can wedge
// its peer's receive queue: pipeline_test.cc).
std::unique_ptr<PeerProcess> peer(const Daemon& d, const std::string& name, const std::string& init_args = "") {
  auto p = std::make_unique<PeerProcess>(std::map<std::string, std::string>{
      {"TENSORHUB_REGISTRY", d.address}, {"UCX_TLS", "tcp"}, {"TENSORHUB_VERIFY", "1"}});
  std::string r = p->cmd("init " + init_args);
  EXPECT_TRUE(ok(r)) << r;
  r = p->cmd("open policy " + name + " 0 1");
  EXPECT_TRUE(ok(r)) << r;
  r = p->cmd("tensors " + kLayout16);
  EXPECT_TRUE(ok(r)) << r;
  return p;
}

// Chain t -> s -> r1: s receives slowly and patiently, r1 follows it as a partial source with
// a 300 ms stall watchdog. t is stopped: s waits (healthy, only starved), r1's watchdog fires
// and it reports s (r1 gave up; s did not fail). One reader's report: s stays a source for everybody else (r2 is granted
// it), r1 alone avoids it, and once t resumes everybody ends with v1, byte-exact: s too (under
// the old rule s was hidden at r1's report and its own transfer refused at the end).
TEST(SourceFailureTest, ReaderStallingOnAHealthySourceDoesNotHideItFromOthers) {
  Daemon d({"--heartbeat-timeout-ms", "30000"});  // t stops for a while: never dropped here
  ASSERT_FALSE(d.address.empty());
  auto t = peer(d, "t");
  ASSERT_TRUE(ok(t->cmd("fill 201")));
  ASSERT_TRUE(ok(t->cmd("publish 1")));
  auto s = peer(d, "s", "chunk_size=4096 max_inflight=1 stall_timeout_ms=120000");
  ASSERT_TRUE(ok(s->cmd("ireplicate latest")));
  ASSERT_TRUE(wait_for_stat(*s, "bytes_held", [](int64_t b) { return b > 0; })) << "s got no bytes";
  t->signal(SIGSTOP);  // s holds a prefix and waits for more
  ASSERT_LT(stat(*s, "bytes_held"), stat(*s, "total_bytes")) << "s finished before t was stopped";
  auto r1 = peer(d, "r1", "stall_timeout_ms=300");
  ASSERT_TRUE(ok(r1->cmd("ireplicate latest")));
  ASSERT_TRUE(wait_for_stat(*r1, "partial_sources", [](int64_t n) { return n >= 1; }))
      << "r1 was not sent to s (t serves one reader at a time)";
  ASSERT_TRUE(wait_for_stat(*r1, "source_failures", [](int64_t n) { return n >= 1; }))
      << "r1's stall watchdog never fired";
  auto r2 = peer(d, "r2");
  ASSERT_TRUE(ok(r2->cmd("ireplicate latest")));
  // Granted s at once (t is busy with s); under the old rule s was hidden and r2 waited.
  EXPECT_TRUE(wait_for_stat(*r2, "partial_sources", [](int64_t n) { return n >= 1; }, 30))
      << "r2 was not granted s, which only one reader had reported";
  t->signal(SIGCONT);
  std::string ws = s->cmd("wait");
  ASSERT_TRUE(ok(ws)) << "s's own transfer: " << ws;
  EXPECT_TRUE(ok(s->cmd("check 201")));
  std::string w2 = r2->cmd("wait");
  ASSERT_TRUE(ok(w2)) << w2;
  EXPECT_TRUE(ok(r2->cmd("check 201")));
  std::string w1 = r1->cmd("wait");
  ASSERT_TRUE(ok(w1)) << "r1 resumes at another source: " << w1;
  EXPECT_TRUE(ok(r1->cmd("check 201")));
  EXPECT_EQ(stat(*s, "source_failures"), 0);
}

// A source that really dies (SIGKILL): its connection closes, the registry removes it at once
// (no second report is needed), and its reader resumes from its checked bytes at t.
TEST(SourceFailureTest, KilledSourceIsHiddenAtOnceAndItsReaderResumesElsewhere) {
  Daemon d;
  ASSERT_FALSE(d.address.empty());
  auto t = peer(d, "t");
  ASSERT_TRUE(ok(t->cmd("fill 211")));
  ASSERT_TRUE(ok(t->cmd("publish 1")));
  auto s = peer(d, "s", "chunk_size=4096 max_inflight=1");
  ASSERT_TRUE(ok(s->cmd("ireplicate latest")));
  ASSERT_TRUE(wait_for_stat(*s, "bytes_held", [](int64_t b) { return b > 0; })) << "s got no bytes";
  t->signal(SIGSTOP);  // s cannot finish: r reads s's prefix and waits on it
  ASSERT_LT(stat(*s, "bytes_held"), stat(*s, "total_bytes")) << "s finished before t was stopped";
  auto r = peer(d, "r");
  ASSERT_TRUE(ok(r->cmd("ireplicate latest")));
  ASSERT_TRUE(wait_for_stat(*r, "bytes_held", [](int64_t b) { return b > 0; })) << "r got nothing from s";
  ASSERT_EQ(stat(*r, "partial_sources"), 1);
  s->kill_now();
  t->signal(SIGCONT);
  std::string w = r->cmd("wait");
  ASSERT_TRUE(ok(w)) << w;
  EXPECT_EQ(word(w, 2), "1");
  EXPECT_TRUE(ok(r->cmd("check 211")));
  EXPECT_GE(stat(*r, "source_failures"), 1);
  auto late = peer(d, "late");
  std::string l = late->cmd("replicate latest");
  ASSERT_TRUE(ok(l)) << l;
  EXPECT_TRUE(ok(late->cmd("check 211")));
}

}  // namespace
}  // namespace thub::test
