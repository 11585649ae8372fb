// Tiny-tensor compaction and the transfer modes, byte-exact with verify=true: every layout
// (0-byte tensors, one tensor, all tiny, none tiny, tiny between large ones) in every mode,
// with and without compaction, through a chain (a replica serves what it received).
#include <gtest/gtest.h>

#include <csignal>
#include <tuple>

#include "tests/multiproc/cluster.h"

namespace thub::test {
namespace {

struct Mode {
  const char* name;
  const char* transfer_mode;
  const char* threshold;  // compaction_threshold
};

const Mode kModes[] = {
    {"Direct", "direct", "2M"}, {"DirectNoCompaction", "direct", "0"}, {"Copy", "copy", "2M"},
    {"CopyNoCompaction", "copy", "0"}, {"Tcp", "tcp", "2M"},         {"Auto", "auto", "2M"},
};

struct Layout {
  const char* name;
  const char* sizes;
  int tiny;  // tensors below 2 MiB (and above 0 bytes)
};

const Layout kLayouts[] = {
    {"ZeroByteTensors", "0,100,0,0", 1},
    {"OneTinyTensor", "100", 1},
    {"OneLargeTensor", "5000000", 0},
    {"AllTiny", "1,2,100,4096,2097151,65536,0,7", 7},
    {"NoneTiny", "4194304,3000000,2097152", 0},
    {"TinyBetweenLarge", "4194304,0,100,1,9000000,65536,3000001", 3},
};

class CompactionTest : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  const Mode& mode() const { return kModes[std::get<0>(GetParam())]; }
  const Layout& layout() const { return kLayouts[std::get<1>(GetParam())]; }
  std::map<std::string, std::string> env() const {
    return {{"TENSORHUB_TRANSFER_MODE", mode().transfer_mode},
            {"TENSORHUB_COMPACTION_THRESHOLD", mode().threshold},
            {"TENSORHUB_CHUNK_SIZE", "1M"}};
  }
};

TEST_P(CompactionTest, ChainIsByteExact) {
  Cluster c(env());
  const std::string sizes = layout().sizes;
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(sizes, 21, 1));
  PeerProcess& first = c.add_rollout("first", sizes);
  std::string r = first.cmd("replicate latest");
  ASSERT_TRUE(ok(r)) << r;
  ASSERT_TRUE(ok(first.cmd("check 21")));
  const bool compacting = std::string(mode().threshold) != "0";
  EXPECT_EQ(stat(first, "compacted_tensors"), compacting ? layout().tiny : 0);
  EXPECT_EQ(stat(first, "copy_mode"), std::string(mode().transfer_mode) == "copy" ? 1 : 0);
  EXPECT_EQ(stat(first, "copy_mode_reason"), std::string(mode().transfer_mode) == "copy" ? 1 : 0);
  // Only the first replica holds version 1 now: the second reads the compacted stream from it.
  ASSERT_TRUE(ok(c.trainer->cmd("unpublish")));
  ASSERT_TRUE(ok(c.trainer->cmd("fill 99")));
  PeerProcess& second = c.add_rollout("second", sizes);
  r = second.cmd("replicate 1");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_TRUE(ok(second.cmd("check 21")));
  EXPECT_EQ(stat(second, "bytes_held"), stat(second, "total_bytes"));
}

TEST_P(CompactionTest, UpdateFollowsVersions) {
  Cluster c(env());
  const std::string sizes = layout().sizes;
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(sizes, 300, 1));
  PeerProcess& r = c.add_rollout("rollout", sizes);
  ASSERT_TRUE(ok(r.cmd("update latest")));
  ASSERT_TRUE(ok(r.cmd("check 300")));
  for (int v = 2; v <= 3; ++v) {
    ASSERT_TRUE(ok(c.trainer->cmd("unpublish")));
    ASSERT_TRUE(ok(c.trainer->cmd("fill " + std::to_string(300 + v))));
    ASSERT_TRUE(ok(c.trainer->cmd("publish " + std::to_string(v))));
    std::string rep = r.cmd("update latest");
    ASSERT_TRUE(ok(rep)) << rep;
    EXPECT_EQ(word(rep, 2), std::to_string(v));
    ASSERT_TRUE(ok(r.cmd("check " + std::to_string(300 + v))));
  }
}

std::string name(const ::testing::TestParamInfo<std::tuple<int, int>>& i) {
  return std::string(kModes[std::get<0>(i.param)].name) + kLayouts[std::get<1>(i.param)].name;
}

INSTANTIATE_TEST_SUITE_P(ModesAndLayouts, CompactionTest,
                         ::testing::Combine(::testing::Range(0, 6), ::testing::Range(0, 6)), name);

// A copy-mode publisher and a direct-mode replica (and back) exchange the same stream.
TEST(TransferModeTest, CopyAndDirectReplicasInteroperate) {
  Cluster c(std::map<std::string, std::string>{{"TENSORHUB_TRANSFER_MODE", "copy"}});
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 61, 4));
  PeerProcess& direct = c.add_rollout("direct", kLayout, "", "transfer_mode=direct");
  ASSERT_TRUE(ok(direct.cmd("replicate 4")));
  ASSERT_TRUE(ok(direct.cmd("check 61")));
  ASSERT_TRUE(ok(c.trainer->cmd("unpublish")));
  PeerProcess& copy = c.add_rollout("copy", kLayout, "", "transfer_mode=copy");
  ASSERT_TRUE(ok(copy.cmd("replicate 4")));
  EXPECT_TRUE(ok(copy.cmd("check 61")));
}

// Without checksums, a copy-mode publisher stages on a thread after publish returns and
// readers follow its counter; the content is still exact.
TEST(TransferModeTest, CopyModeStagingRunsBehindPublish) {
  Cluster c({{"TENSORHUB_TRANSFER_MODE", "copy"}, {"TENSORHUB_VERIFY", "0"}});
  const std::string big = "100,33554432,7,33554432,4096";
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(big, 71, 1));
  for (int i = 0; i < 2; ++i) c.add_rollout("r" + std::to_string(i), big);
  for (auto& r : c.rollouts) r->send("replicate latest");
  for (auto& r : c.rollouts) {
    std::string rep = r->reply();
    ASSERT_TRUE(ok(rep)) << rep;
  }
  for (auto& r : c.rollouts) EXPECT_TRUE(ok(r->cmd("check 71")));
  // Publish again after new content: the staging restarts from the new bytes.
  ASSERT_TRUE(ok(c.trainer->cmd("unpublish")));
  ASSERT_TRUE(ok(c.trainer->cmd("fill 72")));
  ASSERT_TRUE(ok(c.trainer->cmd("publish 2")));
  std::string rep = c.rollouts[0]->cmd("update latest");
  ASSERT_TRUE(ok(rep)) << rep;
  EXPECT_TRUE(ok(c.rollouts[0]->cmd("check 72")));
}

// Replicas with different thresholds cannot share a stream: the registry refuses the
// replicate with a clear layout error naming the threshold (before any grant).
TEST(TransferModeTest, DifferentCompactionThresholdsAreALayoutError) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 81, 1));
  PeerProcess& r = c.add_rollout("other", kLayout, "", "compaction_threshold=0");
  std::string rep = r.cmd("replicate latest");
  EXPECT_EQ(status_of(rep), -4) << rep;
  EXPECT_NE(rep.find("compaction_threshold=0"), std::string::npos) << rep;
}

TEST(TransferModeTest, UnknownTransferModeIsAnArgumentError) {
  PeerProcess p;
  EXPECT_EQ(status_of(p.cmd("init transfer_mode=rdma")), -1);
}

// Copy mode as the paper has it (issue 21 item 3): every tensor of the trainer and of the
// rollout is allocated anew at every version (the old memory freed at once), re-pointed with
// THUB_Register; every version arrives byte-exact, nothing is registered again. The trainer
// re-points while it still serves v1 (its staging first ends): the rollout gets v1's bytes
// from the staging buffer, not the new memory's. The rollout retains 2 versions: the host copy
// of v3 it makes when it updates to v4 (the trainer has unpublished v3) is taken from its
// staging buffer, since its tensors had moved to new memory before.
TEST(TransferModeTest, CopyModeTensorsRePointedAtEveryVersion) {
  Cluster c(std::map<std::string, std::string>{{"TENSORHUB_TRANSFER_MODE", "copy"}});
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 401, 1));
  const int64_t regs = stat(*c.trainer, "registrations");
  std::string r = c.trainer->cmd("repoint");
  ASSERT_TRUE(ok(r)) << r;  // v1 is published: served from the staging buffer
  PeerProcess& ro = c.add_rollout("rollout", kLayout, "retain=2");
  r = ro.cmd("update latest");
  ASSERT_TRUE(ok(r)) << r;
  ASSERT_TRUE(ok(ro.cmd("check 401")));
  const int64_t ro_regs = stat(ro, "registrations");
  for (int v = 2; v <= 4; ++v) {
    ASSERT_TRUE(ok(c.trainer->cmd("unpublish")));
    if (v > 2) {
      ASSERT_TRUE(ok(c.trainer->cmd("repoint")));
    }
    ASSERT_TRUE(ok(c.trainer->cmd("fill " + std::to_string(400 + v))));
    ASSERT_TRUE(ok(c.trainer->cmd("publish " + std::to_string(v))));
    r = ro.cmd("repoint");  // while it holds v-1 (whole in its staging buffer)
    ASSERT_TRUE(ok(r)) << r;
    r = ro.cmd("update latest");
    ASSERT_TRUE(ok(r)) << r;
    EXPECT_EQ(word(r, 2), std::to_string(v));
    ASSERT_TRUE(ok(ro.cmd("check " + std::to_string(400 + v)))) << "version " << v;
  }
  const int tensors = 7;
  EXPECT_EQ(stat(*c.trainer, "repoints"), 3 * tensors);
  EXPECT_EQ(stat(ro, "repoints"), 3 * tensors);
  EXPECT_EQ(stat(*c.trainer, "registrations"), regs);
  EXPECT_EQ(stat(ro, "registrations"), ro_regs);
  EXPECT_EQ(stat(ro, "offloads"), 3);  // v1, v2, v3, each as it updated past it
  PeerProcess& late = c.add_rollout("late", kLayout);
  r = late.cmd("replicate 3");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_TRUE(ok(late.cmd("check 403")));
}

// Re-pointing is refused where it cannot be honoured, and changes nothing then: outside copy
// mode (THUB_ERR_STATE: the tensors are served in place), another size (THUB_ERR_ARG), while
// a request of the model is in flight (THUB_ERR_STATE).
TEST(TransferModeTest, RePointingIsRefusedWhereItCannotBeHonoured) {
  Cluster c(std::map<std::string, std::string>{{"TENSORHUB_TRANSFER_MODE", "direct"}});
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 411, 1));
  ASSERT_TRUE(ok(c.trainer->cmd("unpublish")));
  std::string r = c.trainer->cmd("repoint");
  EXPECT_EQ(status_of(r), -2) << r;
  EXPECT_NE(r.find("copy mode"), std::string::npos) << r;
  PeerProcess& ro = c.add_rollout("copy", kLayout, "", "transfer_mode=copy");
  r = ro.cmd("repoint +1");  // nothing published or replicated yet: a name registered twice
  EXPECT_EQ(status_of(r), -1) << r;
  ASSERT_TRUE(ok(c.trainer->cmd("publish 1")));
  ASSERT_TRUE(ok(ro.cmd("replicate latest")));
  r = ro.cmd("repoint +1");
  EXPECT_EQ(status_of(r), -1) << r;
  EXPECT_NE(r.find("bytes"), std::string::npos) << r;
  ASSERT_TRUE(ok(ro.cmd("unpublish")));
  c.trainer->signal(SIGSTOP);  // the registry (embedded in the trainer) answers nothing
  ASSERT_TRUE(ok(ro.cmd("ireplicate latest")));
  r = ro.cmd("repoint");
  c.trainer->signal(SIGCONT);
  EXPECT_EQ(status_of(r), -2) << r;
  EXPECT_NE(r.find("in progress"), std::string::npos) << r;
  r = ro.cmd("wait");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_TRUE(ok(ro.cmd("check 411")));  // into the memory it had
  EXPECT_EQ(stat(ro, "repoints"), 0);
}

}  // namespace
}  // namespace thub::test
