// Versions: publish rules, absolute/relative specs, newer_than, not-found vs lost, layout.
#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

TEST(VersionsTest, PublishRules) {
  Harness h;
  h.connect(1);
  MemberId m = h.open(1, "pol", "t0");
  EXPECT_EQ(h.publish(1, m, -1), Status::kArg);
  EXPECT_EQ(h.publish(1, m, 3), Status::kOk);
  EXPECT_EQ(h.publish(1, m, 4), Status::kState);  // publish twice
  EXPECT_EQ(h.publish(1, 999, 4), Status::kArg);  // not its member
  h.connect(2);
  MemberId o = h.open(2, "pol", "t1");
  EXPECT_EQ(h.publish(2, o, 3, /*layout=*/8), Status::kLayout);
  EXPECT_EQ(h.publish(2, o, 3), Status::kOk);
}

TEST(VersionsTest, UnknownClientGetsState) {
  Harness h;
  h.send(Publish{5, 1, 1, 0, 7, ""});
  auto r = h.reply_to(5, 1);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, Status::kState);
}

TEST(VersionsTest, LatestAndLatestMinusK) {
  Harness h;
  h.connect(1);
  MemberId a = h.open(1, "pol", "a"), b = h.open(1, "pol", "b"), c = h.open(1, "pol", "c");
  ASSERT_EQ(h.publish(1, a, 5), Status::kOk);
  ASSERT_EQ(h.publish(1, b, 9), Status::kOk);
  ASSERT_EQ(h.publish(1, c, 7), Status::kOk);
  h.connect(2);
  MemberId r1 = h.open(2, "pol", "r1"), r2 = h.open(2, "pol", "r2"), r3 = h.open(2, "pol", "r3"),
           r4 = h.open(2, "pol", "r4");
  auto g = h.replicate_now(2, r1, -1);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->version, 9);
  EXPECT_EQ(g->source, b);
  EXPECT_EQ(g->source_descriptor, "desc-" + std::to_string(b) + "-v9");
  g = h.replicate_now(2, r2, -2);  // latest minus 1 among {5,7,9} (9 also partial at r1)
  ASSERT_TRUE(g);
  EXPECT_EQ(g->version, 7);
  g = h.replicate_now(2, r3, -3);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->version, 5);
  g = h.replicate_now(2, r4, -4);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kNotFound);
}

TEST(VersionsTest, NeverPublishedIsNotFoundGoneIsLost) {
  Harness h;
  h.connect(1);
  MemberId a = h.open(1, "pol", "a");
  h.connect(2);
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, -1);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kNotFound);
  g = h.replicate_now(2, r, 4);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kNotFound);
  EXPECT_EQ(g->detail, "version 4 of model pol was never published");
  ASSERT_EQ(h.publish(1, a, 4), Status::kOk);
  h.unpublish(1, a);
  g = h.replicate_now(2, r, 4);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kVersionLost);
}

TEST(VersionsTest, NewerThan) {
  Harness h;
  h.connect(1);
  MemberId a = h.open(1, "pol", "a");
  ASSERT_EQ(h.publish(1, a, 4), Status::kOk);
  h.connect(2);
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, -1, /*newer_than=*/4);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kNotUpdated);
  g = h.replicate_now(2, r, -1, 3);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kOk);
  EXPECT_EQ(g->version, 4);
  h.done(2, r, g->lease);
  // a holder probing for something newer learns "not updated" without unpublishing
  g = h.replicate_now(2, r, -1, 4);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kNotUpdated);
  g = h.replicate_now(2, r, -1);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kState);
}

TEST(VersionsTest, LayoutMismatchOnReplicate) {
  Harness h;
  h.connect(1);
  MemberId a = h.open(1, "pol", "a");
  ASSERT_EQ(h.publish(1, a, 1, 7), Status::kOk);
  h.connect(2);
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, -1, -1, /*layout=*/99);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kLayout);
}

TEST(VersionsTest, ReceiverRepublishesAfterRestart) {
  Harness h;
  h.connect(1);
  MemberId a = h.open(1, "pol", "a");
  ASSERT_EQ(h.publish(1, a, 2), Status::kOk);
  h.connect(2);
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, 2);
  ASSERT_TRUE(g && g->status == Status::kOk);
  h.done(2, r, g->lease);
  // the registry restarts: a new, empty object; the receiver reconnects and re-publishes
  Harness h2;
  h2.connect(2);
  MemberId r2 = h2.open(2, "pol", "r");
  EXPECT_EQ(h2.publish(2, r2, 2), Status::kOk);
  h2.connect(3);
  MemberId x = h2.open(3, "pol", "x");
  g = h2.replicate_now(3, x, -1);
  ASSERT_TRUE(g && g->status == Status::kOk);
  EXPECT_EQ(g->source, r2);
}

TEST(VersionsTest, DuplicateRequestGetsSameReply) {
  Harness h;
  h.connect(1);
  MemberId a = h.open(1, "pol", "a");
  h.send(Publish{1, 100, a, 3, 7, "d"});
  h.send(Publish{1, 100, a, 3, 7, "d"});
  auto r = h.reply_to(1, 100);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, Status::kOk);  // not "publish twice"
}

}  // namespace
}  // namespace thub::sched::testing
