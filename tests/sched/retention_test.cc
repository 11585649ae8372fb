// Retention: the last non-spot holder of a retained version offloads before unpublishing.
#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

TEST(RetentionTest, LastNonSpotHolderOffloads) {
  Harness h;
  h.connect(1);
  MemberId t = h.open(1, "pol", "t", 0, 1, /*retain=*/2);
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  RequestId u = h.unpublish(1, t);
  EXPECT_FALSE(h.reply_to(1, u));
  auto off = h.all<Offload>();
  ASSERT_EQ(off.size(), 1u);
  EXPECT_EQ(off[0].member, t);
  EXPECT_EQ(off[0].version, 1);
  RequestId od = h.offload_done(1, t, 1, "host-1");
  EXPECT_EQ(h.reply_to(1, od)->status, Status::kOk);
  EXPECT_EQ(h.reply_to(1, u)->status, Status::kOk);
  // keeps serving v1 from host memory
  h.connect(2);
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, 1);
  ASSERT_TRUE(g && g->status == Status::kOk);
  EXPECT_EQ(g->source, t);
  EXPECT_EQ(g->source_descriptor, "host-1");
  h.done(2, r, g->lease);
}

TEST(RetentionTest, SpotDoesNotCountAndDoesNotOffload) {
  Harness h;
  h.connect(1);
  MemberId t = h.open(1, "pol", "t", 0, 1, 1);
  MemberId s = h.open(1, "pol", "s", 0, 1, 1, /*spot=*/true);
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  ASSERT_EQ(h.publish(1, s, 1), Status::kOk);
  RequestId u = h.unpublish(1, t);  // the spot copy does not count: offload
  EXPECT_EQ(h.all<Offload>().size(), 1u);
  EXPECT_FALSE(h.reply_to(1, u));
  RequestId us = h.unpublish(1, s);  // a spot member never offloads
  EXPECT_EQ(h.reply_to(1, us)->status, Status::kOk);
}

TEST(RetentionTest, OtherNonSpotHolderMeansNoOffload) {
  Harness h;
  h.connect(1);
  MemberId a = h.open(1, "pol", "a", 0, 1, 1), b = h.open(1, "pol", "b", 0, 1, 1);
  ASSERT_EQ(h.publish(1, a, 1), Status::kOk);
  ASSERT_EQ(h.publish(1, b, 1), Status::kOk);
  RequestId u = h.unpublish(1, a);
  EXPECT_EQ(h.reply_to(1, u)->status, Status::kOk);
  EXPECT_TRUE(h.all<Offload>().empty());
}

TEST(RetentionTest, OffloadedCopyDroppedWhenOutOfWindow) {
  Harness h;
  h.connect(1);
  MemberId t = h.open(1, "pol", "t", 0, 1, 1);
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  h.unpublish(1, t);
  h.offload_done(1, t, 1, "host-1");
  ASSERT_EQ(h.publish(1, t, 2), Status::kOk);  // v1 falls out of the latest 1
  auto d = h.all<Discard>();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].version, 1);
  h.connect(2);
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, 1);
  EXPECT_EQ(g->status, Status::kVersionLost);
}

}  // namespace
}  // namespace thub::sched::testing
