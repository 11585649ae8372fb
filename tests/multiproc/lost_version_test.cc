// Lost versions across real processes: when the only holder of a version dies (SIGKILL, or
// silence until the registry drops it), requests for the latest move on to the newest
// version that still has a holder and end holding it byte for byte, while requests for that
// version by number get THUB_ERR_VERSION_LOST (docs/sched.md, "Lost versions").
#include <gtest/gtest.h>
#include <signal.h>

#include "tests/multiproc/cluster.h"

namespace thub::test {
namespace {

// 2 x 16 MiB; readers that must still be reading when the holder dies take 4 KiB gets, one
// at a time (thousands of round trips).
const std::string kLayout16 = "16777216,16777216";
const std::string kSlowReader = "chunk_size=4096 max_inflight=1";
constexpr int kVersionLost = -11, kErrState = -2;

// A registry of its own (the trainers may die, so none of them may host it).
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

// Peers over TCP only: a process killed in the middle of a shared-memory send can leave its
// peer's receive queue wedged (UCX 1.13 has no peer failure handling there; pipeline_test.cc).
std::map<std::string, std::string> env_for(const Daemon& d) {
  return {{"TENSORHUB_REGISTRY", d.address}, {"UCX_TLS", "tcp"}, {"TENSORHUB_VERIFY", "1"}};
}

// Starts a peer, opens replica `name` of model "policy" and registers the layout.
std::unique_ptr<PeerProcess> peer(const Daemon& d, const std::string& name, const std::string& init_args = "") {
  auto p = std::make_unique<PeerProcess>(env_for(d));
  std::string r = p->cmd("init " + init_args);
  EXPECT_TRUE(ok(r)) << r;
  r = p->cmd("open policy " + name + " 0 1");
  EXPECT_TRUE(ok(r)) << r;
  r = p->cmd("tensors " + kLayout16);
  EXPECT_TRUE(ok(r)) << r;
  return p;
}

// The version named in a "replicate"/"wait" reply ("ok STATUS VERSION").
std::string version_of(const std::string& reply) { return word(reply, 2); }

// t1 holds v1 alone; `a` replicates the latest (v1) slowly from it, `b` follows `a` (a
// partial source: t1 serves one reader at a time) and `c` asks for v1 by number (it follows
// b). t1 is stopped mid-transfer, t2 publishes v2 from another process, then t1 is killed:
// a and b end holding v2, byte-exact; c gets VERSION_LOST, and so does a later request for 1.
TEST(LostVersionTest, LatestMovesOnToTheNewestVersionLeftWhenItsOnlyHolderIsKilled) {
  Daemon d;
  ASSERT_FALSE(d.address.empty());
  auto t1 = peer(d, "t1");
  auto t2 = peer(d, "t2");
  ASSERT_TRUE(ok(t1->cmd("fill 101")));
  ASSERT_TRUE(ok(t1->cmd("publish 1")));
  ASSERT_TRUE(ok(t2->cmd("fill 102")));
  auto a = peer(d, "a", kSlowReader);
  ASSERT_TRUE(ok(a->cmd("ireplicate latest")));
  ASSERT_TRUE(wait_for_stat(*a, "bytes_held", [](int64_t b) { return b > 0; })) << "a got no bytes";
  t1->signal(SIGSTOP);  // a cannot finish v1 now
  int64_t total = stat(*a, "total_bytes");
  auto b = peer(d, "b");
  ASSERT_TRUE(ok(b->cmd("ireplicate latest")));
  ASSERT_TRUE(wait_for_stat(*b, "bytes_held", [](int64_t x) { return x > 0; })) << "b got nothing from a";
  auto c = peer(d, "c");
  ASSERT_TRUE(ok(c->cmd("ireplicate 1")));
  ASSERT_TRUE(ok(t2->cmd("publish 2")));
  ASSERT_LT(stat(*a, "bytes_held"), total) << "a finished v1 before its source was stopped";
  t1->kill_now();

  std::string wa = a->cmd("wait");
  ASSERT_TRUE(ok(wa)) << "the latest request of a: " << wa;
  EXPECT_EQ(version_of(wa), "2") << wa;
  EXPECT_TRUE(ok(a->cmd("check 102")));
  EXPECT_GE(stat(*a, "source_failures"), 1);
  std::string wb = b->cmd("wait");
  ASSERT_TRUE(ok(wb)) << "the latest request of b (it followed a): " << wb;
  EXPECT_EQ(version_of(wb), "2") << wb;
  EXPECT_TRUE(ok(b->cmd("check 102")));
  std::string wc = c->cmd("wait");
  EXPECT_EQ(status_of(wc), kVersionLost) << "the request for version 1 by number: " << wc;
  std::string r = c->cmd("replicate 1");
  EXPECT_EQ(status_of(r), kVersionLost) << r;
  r = c->cmd("replicate latest");  // the newest version left
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(version_of(r), "2");
  EXPECT_TRUE(ok(c->cmd("check 102")));
}

// The holder stops (SIGSTOP) and stays silent until the registry drops it: the reader's
// stall watchdog reports it, v1 is lost, and the request for the latest ends holding v2.
TEST(LostVersionTest, LatestMovesOnWhenItsOnlyHolderIsDroppedForSilence) {
  Daemon d({"--heartbeat-timeout-ms", "1000"});
  ASSERT_FALSE(d.address.empty());
  auto t1 = peer(d, "t1", "heartbeat_ms=100");
  auto t2 = peer(d, "t2", "heartbeat_ms=100");
  ASSERT_TRUE(ok(t1->cmd("fill 101")));
  ASSERT_TRUE(ok(t1->cmd("publish 1")));
  ASSERT_TRUE(ok(t2->cmd("fill 102")));
  auto a = peer(d, "a", kSlowReader + " heartbeat_ms=100 stall_timeout_ms=2000");
  ASSERT_TRUE(ok(a->cmd("ireplicate latest")));
  ASSERT_TRUE(wait_for_stat(*a, "bytes_held", [](int64_t b) { return b > 0; })) << "a got no bytes";
  t1->signal(SIGSTOP);
  ASSERT_LT(stat(*a, "bytes_held"), stat(*a, "total_bytes")) << "a finished before t1 was stopped";
  ASSERT_TRUE(ok(t2->cmd("publish 2")));
  std::string wa = a->cmd("wait");
  ASSERT_TRUE(ok(wa)) << wa;
  EXPECT_EQ(version_of(wa), "2") << wa;
  EXPECT_TRUE(ok(a->cmd("check 102")));
  auto c = peer(d, "c");
  std::string r = c->cmd("replicate 1");
  EXPECT_EQ(status_of(r), kVersionLost) << r;
  t1->kill_now();
}

// A stopped trainer's replacement (its launcher restarted it) opens the same shard while the
// registry still holds the stopped one's session: the Open waits until the registry drops it
// for silence (heartbeat timeout 1 s), then succeeds, and the new process publishes and is
// read byte for byte. A third, live process that claims the same shard is refused
// (THUB_ERR_STATE) once the wait is over, and the holder keeps its shard.
TEST(LostVersionTest, ReplacementOpensTheShardOnceTheStoppedSessionIsDropped) {
  Daemon d({"--heartbeat-timeout-ms", "1000"});
  ASSERT_FALSE(d.address.empty());
  auto t1 = peer(d, "t1", "heartbeat_ms=100");
  ASSERT_TRUE(ok(t1->cmd("fill 101")));
  ASSERT_TRUE(ok(t1->cmd("publish 1")));
  t1->signal(SIGSTOP);
  auto t1b = peer(d, "t1", "heartbeat_ms=100");  // peer() expects its open to succeed
  ASSERT_TRUE(ok(t1b->cmd("fill 102")));
  ASSERT_TRUE(ok(t1b->cmd("publish 2")));
  auto dup = std::make_unique<PeerProcess>(env_for(d));
  ASSERT_TRUE(ok(dup->cmd("init heartbeat_ms=100")));
  std::string r = dup->cmd("open policy t1 0 1");
  EXPECT_EQ(status_of(r), kErrState) << r;
  EXPECT_NE(r.find("already open"), std::string::npos) << r;
  auto a = peer(d, "a");
  r = a->cmd("replicate latest");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(version_of(r), "2") << r;
  EXPECT_TRUE(ok(a->cmd("check 102")));
  t1->kill_now();
}

}  // namespace
}  // namespace thub::test
