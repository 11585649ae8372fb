// One publisher and three replicators over real UCX, shared memory and TCP alone:
// every byte arrives, checked end to end (verify mode) and by content.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/multiproc/cluster.h"

namespace thub::test {
namespace {

// Yama's ptrace_scope >= 1 (or no Yama at all: allowed) decides whether a reader may use
// process_vm_readv on a sibling process of the same uid.
bool process_reads_allowed() {
  FILE* f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
  if (f == nullptr) return true;
  int v = 0;
  const bool read = std::fscanf(f, "%d", &v) == 1;
  std::fclose(f);
  return !read || v == 0;
}

class ReplicateTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::map<std::string, std::string> env() const {
    if (GetParam() == "tcp") return {{"UCX_TLS", "tcp"}};
    return {};
  }
};

TEST_P(ReplicateTest, OnePublisherThreeReplicatorsByteExact) {
  Cluster c(env());
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 11, 1));
  for (int i = 0; i < 3; ++i) c.add_rollout("rollout-" + std::to_string(i), kLayout);
  // Start all three at once; each replies when its replicate has finished.
  for (auto& r : c.rollouts) r->send("replicate latest");
  for (auto& r : c.rollouts) {
    std::string rep = r->reply();
    ASSERT_TRUE(ok(rep)) << rep;
    EXPECT_EQ(word(rep, 2), "1");
  }
  for (auto& r : c.rollouts) {
    std::string rep = r->cmd("check 11");
    EXPECT_TRUE(ok(rep)) << rep;
  }
}

TEST_P(ReplicateTest, ReplicaServesWhatItReplicated) {
  Cluster c(env());
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 5, 7));
  PeerProcess& first = c.add_rollout("first", kLayout);
  ASSERT_TRUE(ok(first.cmd("replicate 7")));
  // The trainer withdraws; only the first replica holds version 7 now.
  ASSERT_TRUE(ok(c.trainer->cmd("unpublish")));
  ASSERT_TRUE(ok(c.trainer->cmd("fill 99")));
  PeerProcess& second = c.add_rollout("second", kLayout);
  std::string rep = second.cmd("replicate 7");
  ASSERT_TRUE(ok(rep)) << rep;
  EXPECT_TRUE(ok(second.cmd("check 5")));
}

TEST_P(ReplicateTest, NonblockingReplicateCompletesThroughTestAndWait) {
  Cluster c(env());
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 3, 2));
  PeerProcess& r = c.add_rollout("nb", kLayout);
  ASSERT_TRUE(ok(r.cmd("ireplicate latest")));
  // A second operation on the same model while the request runs is refused.
  EXPECT_EQ(status_of(r.cmd("publish 9")), -2);
  std::string w = r.cmd("wait");
  ASSERT_TRUE(ok(w)) << w;
  EXPECT_EQ(word(w, 2), "2");
  EXPECT_TRUE(ok(r.cmd("check 3")));
}

// Every byte of a transfer is counted on the read path that carried it (THUB_Model_stat's
// bytes_<path>): on this host, process reads (and UCX's mapped segment for the packed tiny
// tensors, which UCX allocated), unless the kernel refuses them; with UCX_TLS=tcp the
// transport's own socket reads.
TEST_P(ReplicateTest, ReadPathOfEveryByteIsReported) {
  Cluster c(env());
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 21, 1));
  PeerProcess& r = c.add_rollout("paths", kLayout);
  ASSERT_TRUE(ok(r.cmd("replicate latest")));
  ASSERT_TRUE(ok(r.cmd("check 21")));
  const int64_t total = stat(r, "total_bytes");
  const int64_t pv = stat(r, "bytes_process_vm_readv"), mapped = stat(r, "bytes_ucx_mapped");
  const int64_t sock = stat(r, "bytes_socket"), ucx = stat(r, "bytes_ucx_get");
  ASSERT_GT(total, 0);
  EXPECT_EQ(pv + mapped + sock + ucx, total);
  if (GetParam() == "tcp") {
    EXPECT_EQ(sock, total);
  } else if (process_reads_allowed()) {
    EXPECT_GT(pv, 0);
    EXPECT_EQ(pv + mapped, total);
  } else {
    std::printf("process reads refused by the kernel here: %lld bytes over UCX\n", static_cast<long long>(ucx));
  }
}

// Issue 21 item 4: tensors back to back in one allocation (thub_peer's "flat") are served
// from one registration, tensors apart from one each; either side reads the other byte for
// byte (the segments of the two streams differ: the transfer cuts its reads at both).
TEST_P(ReplicateTest, FlatAndScatteredTensorsReadEachOther) {
  Cluster c(env());
  auto e = c.env;
  c.trainer = std::make_unique<PeerProcess>(e);
  std::string r = c.trainer->cmd("init");
  ASSERT_TRUE(ok(r)) << r;
  c.registry = word(r, 1);
  ASSERT_TRUE(ok(c.trainer->cmd("open policy trainer 0 1")));
  ASSERT_TRUE(ok(c.trainer->cmd(std::string("flat ") + kLayout)));
  ASSERT_TRUE(ok(c.trainer->cmd("fill 31")));
  ASSERT_TRUE(ok(c.trainer->cmd("publish 1")));
  const int64_t flat_regs = stat(*c.trainer, "registrations");
  PeerProcess& apart = c.add_rollout("apart", kLayout);  // separate allocations
  ASSERT_TRUE(ok(apart.cmd("replicate latest")));
  ASSERT_TRUE(ok(apart.cmd("check 31")));
  const int64_t apart_regs = stat(apart, "registrations");
  EXPECT_LE(flat_regs, 2) << "the packed tiny tensors' buffer and one span";
  EXPECT_GT(apart_regs, flat_regs) << "one registration per allocation";
  // The trainer withdraws: a flat replica reads the scattered one.
  ASSERT_TRUE(ok(c.trainer->cmd("unpublish")));
  e["TENSORHUB_REGISTRY"] = c.registry;
  c.rollouts.push_back(std::make_unique<PeerProcess>(e));
  PeerProcess& flat = *c.rollouts.back();
  ASSERT_TRUE(ok(flat.cmd("init")));
  ASSERT_TRUE(ok(flat.cmd("open policy flat 0 1")));
  ASSERT_TRUE(ok(flat.cmd(std::string("flat ") + kLayout)));
  r = flat.cmd("replicate 1");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_TRUE(ok(flat.cmd("check 31")));
  EXPECT_EQ(stat(flat, "registrations"), flat_regs);
}

INSTANTIATE_TEST_SUITE_P(Transports, ReplicateTest, ::testing::Values("shm", "tcp"));

// Issue 22 item 4: the path is chosen per source, by its datacenter. The trainer is in
// datacenter a; a reader in b reads it over wan_transport (default: the transport's own
// sockets), byte for byte (verify mode, then by content), and says so in source_across and
// wan_bytes; a reader in a, on the same host, keeps the path inside (process reads where the
// kernel allows them), and wan_transport=same or ucx give the path they name.
struct WanCase {
  const char* dc;
  const char* wan;  // "" = the default
};

TEST(PerPeerTransportTest, EachSourceIsReadOverThePathOfItsDatacenter) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 17, 1, "datacenter=a"));
  const WanCase cases[] = {{"b", ""}, {"a", ""}, {"b", "same"}, {"b", "ucx"}, {"b", "socket"}};
  int i = 0;
  for (const WanCase& w : cases) {
    SCOPED_TRACE(std::string("datacenter=") + w.dc + " wan_transport=" + (*w.wan ? w.wan : "(default)"));
    std::string init = std::string("datacenter=") + w.dc;
    if (*w.wan) init += std::string(" wan_transport=") + w.wan;
    PeerProcess& r = c.add_rollout("r" + std::to_string(i++), kLayout, "", init);
    EXPECT_EQ(stat(r, "source_across"), -1) << "before any transfer";
    const std::string rep = r.cmd("replicate 1");
    ASSERT_TRUE(ok(rep)) << rep;
    ASSERT_TRUE(ok(r.cmd("check 17")));
    const int64_t total = stat(r, "total_bytes");
    const int64_t pv = stat(r, "bytes_process_vm_readv"), mapped = stat(r, "bytes_ucx_mapped");
    const int64_t sock = stat(r, "bytes_socket"), ucx = stat(r, "bytes_ucx_get");
    ASSERT_GT(total, 0);
    EXPECT_EQ(pv + mapped + sock + ucx, total);
    const bool across = std::string(w.dc) != "a";
    EXPECT_EQ(stat(r, "source_across"), across ? 1 : 0);
    EXPECT_EQ(stat(r, "wan_bytes"), across ? total : 0);
    const std::string wan = *w.wan ? w.wan : "socket";
    if (across && wan == "socket") {
      EXPECT_EQ(sock, total) << "across datacenters: the transport's own sockets";
    } else if (across && wan == "ucx") {
      EXPECT_EQ(ucx, total) << "across datacenters: UCX gets";
    } else {
      EXPECT_EQ(sock, 0) << "inside (or wan_transport=same): the path of this host";
      if (process_reads_allowed()) {
        EXPECT_EQ(pv + mapped, total);
      }
    }
    // The trainer's source is one holder among several now: take this reader out again so
    // that the next one reads the trainer, not a replica of another datacenter.
    ASSERT_TRUE(ok(r.cmd("unpublish")));
  }
}

// The trainer moves to version v, its buffers filled with `seed`.
void trainer_moves_to(Cluster& c, int seed, int v) {
  ASSERT_TRUE(ok(c.trainer->cmd("unpublish")));
  ASSERT_TRUE(ok(c.trainer->cmd("fill " + std::to_string(seed))));
  ASSERT_TRUE(ok(c.trainer->cmd("publish " + std::to_string(v))));
}

// Issue 22 item 3, offload seeding, on one host with two datacenter labels: the rollout r of
// b (offload_seeding set) holds v1; the trainer of a moves to v2. r's update returns
// THUB_NOT_UPDATED at once while its seed buffer (replica "r~seed", host memory) fetches v2
// across; the next update, once the seed buffer holds v2, reads it inside b (nothing more
// crosses for r), byte for byte. A second rollout of b reads v2 inside too, and its own seed
// buffer seeds nothing (v2 is in b already).
TEST(OffloadSeedingProcessTest, TheRolloutKeepsServingWhileItsSeedBufferCrosses) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 21, 1, "datacenter=a"));
  PeerProcess& r = c.add_rollout("r", kLayout, "", "datacenter=b offload_seeding=64M");
  ASSERT_TRUE(ok(r.cmd("replicate 1")));
  ASSERT_TRUE(ok(r.cmd("check 21")));
  const int64_t total = stat(r, "total_bytes");
  EXPECT_EQ(stat(r, "wan_bytes"), total) << "v1 crossed once, into r";
  EXPECT_EQ(stat(r, "offload_seed_bytes"), 0) << "no seed buffer before a relative update";
  ASSERT_NO_FATAL_FAILURE(trainer_moves_to(c, 22, 2));
  std::string u = r.cmd("update latest");
  ASSERT_TRUE(ok(u)) << u;
  EXPECT_EQ(word(u, 1), "2") << "THUB_NOT_UPDATED while v2 crosses into the seed buffer: " << u;
  EXPECT_TRUE(ok(r.cmd("check 21"))) << "still serving v1";
  EXPECT_GE(stat(r, "offload_seed_bytes"), total);
  ASSERT_TRUE(wait_for_stat(r, "offload_seeds", [](int64_t n) { return n >= 1; }));
  EXPECT_EQ(stat(r, "offload_seed_version"), 2);
  // v3 is out before r takes v2: r still takes v2 from its seed buffer first (the buffer
  // does not move on to v3 before r holds what it holds).
  ASSERT_NO_FATAL_FAILURE(trainer_moves_to(c, 23, 3));
  u = r.cmd("update latest");
  ASSERT_TRUE(ok(u)) << u;
  EXPECT_EQ(word(u, 1), "0") << u;
  EXPECT_EQ(word(u, 2), "2") << u;
  ASSERT_TRUE(ok(r.cmd("check 22")));
  EXPECT_EQ(stat(r, "source_across"), 0) << "v2 read from the seed buffer, inside b";
  EXPECT_EQ(stat(r, "wan_bytes"), total) << "nothing more crossed for r";
  // Then the buffer seeds v3, and r keeps v2 meanwhile (THUB_NOT_UPDATED while v3 crosses).
  // On one host the crossing takes milliseconds: where it ended before r's own request was
  // decided (the seed buffer's goes first), v3 is whole in b and r takes it at once, from the
  // seed buffer. Either way nothing crosses for r.
  u = r.cmd("update latest");
  ASSERT_TRUE(ok(u)) << u;
  if (word(u, 1) == "2") {
    EXPECT_TRUE(ok(r.cmd("check 22"))) << "still serving v2";
    ASSERT_TRUE(wait_for_stat(r, "offload_seeds", [](int64_t n) { return n >= 2; }));
    u = r.cmd("update latest");
    ASSERT_TRUE(ok(u)) << u;
  }
  EXPECT_EQ(word(u, 1), "0") << u;
  EXPECT_EQ(word(u, 2), "3") << u;
  ASSERT_TRUE(ok(r.cmd("check 23")));
  EXPECT_EQ(stat(r, "source_across"), 0) << "v3 read from the seed buffer, inside b";
  EXPECT_EQ(stat(r, "offload_seed_version"), 3);
  EXPECT_EQ(stat(r, "wan_bytes"), total);
  PeerProcess& r2 = c.add_rollout("r2", kLayout, "", "datacenter=b offload_seeding=64M");
  ASSERT_TRUE(ok(r2.cmd("replicate latest")));
  ASSERT_TRUE(ok(r2.cmd("check 23")));
  EXPECT_EQ(stat(r2, "wan_bytes"), 0);
  u = r2.cmd("update latest");
  ASSERT_TRUE(ok(u)) << u;
  EXPECT_EQ(word(u, 1), "2") << "nothing newer: " << u;
  EXPECT_EQ(stat(r2, "offload_seeds"), 0) << "v3 is in b: nothing to seed";
  EXPECT_EQ(stat(r2, "offload_seed_version"), -1);
  ASSERT_TRUE(ok(r.cmd("close")));
  ASSERT_TRUE(ok(r2.cmd("close")));
}

// A shard larger than offload_seeding is not seeded (a warning says why): its update is the
// ordinary one.
TEST(OffloadSeedingProcessTest, AShardOverTheBoundIsNotSeeded) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 31, 1, "datacenter=a"));
  PeerProcess& r = c.add_rollout("r", kLayout, "", "datacenter=b offload_seeding=1M");
  ASSERT_TRUE(ok(r.cmd("replicate 1")));
  ASSERT_NO_FATAL_FAILURE(trainer_moves_to(c, 32, 2));
  const std::string u = r.cmd("update latest");
  ASSERT_TRUE(ok(u)) << u;
  EXPECT_EQ(word(u, 1), "0") << "updated the ordinary way: " << u;
  ASSERT_TRUE(ok(r.cmd("check 32")));
  EXPECT_EQ(stat(r, "offload_seed_bytes"), 0);
  EXPECT_EQ(stat(r, "offload_seeds"), 0);
}

// A label that does not fit the worker address is refused at THUB_Init, not sent.
TEST(PerPeerTransportTest, AnOverlongDatacenterLabelIsRefused) {
  PeerProcess p(std::map<std::string, std::string>{});
  const std::string r = p.cmd("init datacenter=" + std::string(300, 'x'));
  EXPECT_FALSE(ok(r)) << r;
}

}  // namespace
}  // namespace thub::test
