// Retention: the last holder of a retained version offloads it to host memory before its
// unpublish returns, and keeps serving it from there.
#include <gtest/gtest.h>

#include "tests/multiproc/cluster.h"

namespace thub::test {
namespace {

TEST(RetentionTest, LastHolderOffloadsAndStillServes) {
  Cluster c;
  c.trainer = std::make_unique<PeerProcess>(c.env);
  std::string r = c.trainer->cmd("init");
  ASSERT_TRUE(ok(r));
  c.registry = word(r, 1);
  ASSERT_TRUE(ok(c.trainer->cmd("open policy trainer 0 1 retain=1")));
  ASSERT_TRUE(ok(c.trainer->cmd(std::string("tensors ") + kLayout)));
  ASSERT_TRUE(ok(c.trainer->cmd("fill 71")));
  ASSERT_TRUE(ok(c.trainer->cmd("publish 1")));
  // The trainer is the only holder of the newest version: unpublishing offloads it.
  ASSERT_TRUE(ok(c.trainer->cmd("unpublish")));
  r = c.trainer->cmd("stat offloads");
  EXPECT_EQ(word(r, 1), "1") << r;
  ASSERT_TRUE(ok(c.trainer->cmd("fill 72")));  // the user's buffers are free again
  PeerProcess& late = c.add_rollout("late", kLayout);
  r = late.cmd("replicate latest");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(word(r, 2), "1");
  EXPECT_TRUE(ok(late.cmd("check 71")));  // served from the host copy, not the new bytes
}

TEST(RetentionTest, WithoutRetainTheVersionIsGone) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 81, 1));
  ASSERT_TRUE(ok(c.trainer->cmd("unpublish")));
  std::string r = c.trainer->cmd("stat offloads");
  EXPECT_EQ(word(r, 1), "0");
  PeerProcess& late = c.add_rollout("late", kLayout);
  r = late.cmd("replicate 1");
  EXPECT_LT(status_of(r), 0) << r;
}

}  // namespace
}  // namespace thub::test
