// THUB_Update across versions: moves to the newest, says NOT_UPDATED when nothing is newer.
#include <gtest/gtest.h>
#include <signal.h>

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

namespace thub::test {
namespace {

// Update is atomic for the replica's readers: a peer reading the old version from the
// updating replica finishes with the old bytes intact before they are overwritten.
TEST(UpdateTest, ReaderOfTheOldVersionIsDrainedBeforeTheOverwrite) {
  Cluster c({{"TENSORHUB_CHUNK_SIZE", "65536"}, {"TENSORHUB_MAX_INFLIGHT", "1"}});
  const std::string layout = "33554432,33554432";
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(layout, 91, 1));
  PeerProcess& mid = c.add_rollout("mid", layout);
  ASSERT_TRUE(ok(mid.cmd("replicate 1")));
  ASSERT_TRUE(ok(c.trainer->cmd("unpublish")));  // `mid` is now the only holder of 1
  PeerProcess& reader = c.add_rollout("reader", layout);
  ASSERT_TRUE(ok(reader.cmd("ireplicate 1")));
  ASSERT_TRUE(wait_for_stat(reader, "bytes_held", [](int64_t b) { return b > 0; }));
  reader.signal(SIGSTOP);
  ASSERT_TRUE(ok(c.trainer->cmd("fill 92")));
  ASSERT_TRUE(ok(c.trainer->cmd("publish 2")));
  mid.send("update latest");
  EXPECT_FALSE(mid.reply_ready(1500)) << "update overwrote while a reader was mid-transfer";
  reader.signal(SIGCONT);
  std::string r = mid.reply();
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(word(r, 2), "2");
  ASSERT_TRUE(ok(reader.cmd("wait")));
  EXPECT_TRUE(ok(reader.cmd("check 91")));
  EXPECT_TRUE(ok(mid.cmd("check 92")));
}

}  // namespace
}  // namespace thub::test
