// One publisher and three replicators over real UCX, shared memory and TCP alone:
// every byte arrives, checked end to end (verify mode) and by content.
#include <gtest/gtest.h>

#include "tests/multiproc/cluster.h"

namespace thub::test {
namespace {

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

INSTANTIATE_TEST_SUITE_P(Transports, ReplicateTest, ::testing::Values("shm", "tcp"));

}  // namespace
}  // namespace thub::test
