// THUB_Update across versions: moves to the newest, says NOT_UPDATED when nothing is newer.
#include <gtest/gtest.h>

#include "tests/multiproc/cluster.h"

namespace thub::test {
namespace {

TEST(UpdateTest, FollowsThreeVersions) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 100, 1));
  PeerProcess& r = c.add_rollout("rollout", kLayout);
  std::string rep = r.cmd("update latest");  // holds nothing yet: a plain replicate
  ASSERT_TRUE(ok(rep)) << rep;
  EXPECT_EQ(word(rep, 2), "1");
  ASSERT_TRUE(ok(r.cmd("check 100")));
  for (int v = 2; v <= 3; ++v) {
    rep = r.cmd("update latest");
    EXPECT_EQ(status_of(rep), 0) << rep;
    EXPECT_EQ(word(rep, 1), "2") << "expected THUB_NOT_UPDATED: " << rep;
    EXPECT_EQ(word(rep, 2), std::to_string(v - 1));
    ASSERT_TRUE(ok(c.trainer->cmd("unpublish")));
    ASSERT_TRUE(ok(c.trainer->cmd("fill " + std::to_string(100 + v))));
    ASSERT_TRUE(ok(c.trainer->cmd("publish " + std::to_string(v))));
    rep = r.cmd("update latest");
    ASSERT_TRUE(ok(rep)) << rep;
    EXPECT_EQ(word(rep, 1), "0") << rep;
    EXPECT_EQ(word(rep, 2), std::to_string(v));
    ASSERT_TRUE(ok(r.cmd("check " + std::to_string(100 + v))));
    rep = r.cmd("stat held_version");
    EXPECT_EQ(word(rep, 1), std::to_string(v));
  }
}

}  // namespace
}  // namespace thub::test
