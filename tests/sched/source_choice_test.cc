// Source choice: same datacenter, least loaded, complete over partial, reader limit.
#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

TEST(SourceChoiceTest, PrefersSameDatacenter) {
  Harness h(Config{5'000'000, 4, true});
  h.connect(1, "east");
  h.connect(2, "west");
  MemberId e = h.open(1, "pol", "e"), w = h.open(2, "pol", "w");
  ASSERT_EQ(h.publish(1, e, 1), Status::kOk);
  ASSERT_EQ(h.publish(2, w, 1), Status::kOk);
  h.connect(3, "west");
  MemberId r = h.open(3, "pol", "r");
  auto g = h.replicate_now(3, r, -1);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->source, w);
}

TEST(SourceChoiceTest, PrefersLeastLoaded) {
  Harness h(Config{5'000'000, 4, false});
  h.connect(1);
  MemberId a = h.open(1, "pol", "a"), b = h.open(1, "pol", "b");
  ASSERT_EQ(h.publish(1, a, 1), Status::kOk);
  ASSERT_EQ(h.publish(1, b, 1), Status::kOk);
  h.connect(3);
  MemberId r1 = h.open(3, "pol", "r1"), r2 = h.open(3, "pol", "r2");
  auto g1 = h.replicate_now(3, r1, 1);
  auto g2 = h.replicate_now(3, r2, 1);
  ASSERT_TRUE(g1 && g2);
  EXPECT_EQ(g1->source, a);  // tie: the oldest
  EXPECT_EQ(g2->source, b);
}

TEST(SourceChoiceTest, PipelineChainsOffPartialAndDefersWhenBusy) {
  Harness h;  // one reader per source, pipeline on
  h.connect(1);
  MemberId t = h.open(1, "pol", "t");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  h.connect(2);
  MemberId r1 = h.open(2, "pol", "r1"), r2 = h.open(2, "pol", "r2"), r3 = h.open(2, "pol", "r3");
  auto g1 = h.replicate_now(2, r1, 1);
  ASSERT_TRUE(g1);
  EXPECT_EQ(g1->source, t);
  EXPECT_FALSE(g1->source_partial);
  auto g2 = h.replicate_now(2, r2, 1);
  ASSERT_TRUE(g2);
  EXPECT_EQ(g2->source, r1);
  EXPECT_TRUE(g2->source_partial);
  EXPECT_EQ(g2->source_descriptor, "rdesc-" + std::to_string(r1));
  auto g3 = h.replicate_now(2, r3, 1);
  ASSERT_TRUE(g3);
  EXPECT_EQ(g3->source, r2);
  h.done(2, r1, g1->lease);  // t becomes idle: nobody is waiting, nothing happens
  EXPECT_TRUE(h.all<Reply>().size() == 1);
}

TEST(SourceChoiceTest, NoPipelineDefersUntilLeaseEnds) {
  Harness h(Config{5'000'000, 1, false});
  h.connect(1);
  MemberId t = h.open(1, "pol", "t");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  h.connect(2);
  MemberId r1 = h.open(2, "pol", "r1"), r2 = h.open(2, "pol", "r2");
  auto g1 = h.replicate_now(2, r1, 1);
  ASSERT_TRUE(g1);
  RequestId q2 = h.replicate(2, r2, -1);
  EXPECT_FALSE(h.reply_to(2, q2));  // deferred: t is busy, r1 is not a source yet
  h.done(2, r1, g1->lease);
  auto g2 = h.reply_to(2, q2);
  ASSERT_TRUE(g2);
  EXPECT_EQ(g2->status, Status::kOk);
  EXPECT_EQ(g2->source, t);  // tie between t and r1 (both idle): the oldest
}

// With failure_reports = 1 every report hides its source at once (the rule before failures
// were judged; source_failure_test.cc has the default's): no holder is left after two.
TEST(SourceChoiceTest, SourceFailedGivesNewSourceOrVersionLost) {
  Config cfg{5'000'000, 1, false};
  cfg.failure_reports = 1;
  Harness h(cfg);
  h.connect(1);
  h.connect(4);
  MemberId a = h.open(1, "pol", "a"), b = h.open(4, "pol", "b");
  ASSERT_EQ(h.publish(1, a, 1), Status::kOk);
  ASSERT_EQ(h.publish(4, b, 1), Status::kOk);
  h.connect(2);
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, 1);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->source, a);
  RequestId q = h.failed(2, r, g->lease, 10);
  auto g2 = h.reply_to(2, q);
  ASSERT_TRUE(g2 && g2->status == Status::kOk);
  EXPECT_EQ(g2->source, b);
  EXPECT_EQ(g2->version, 1);
  q = h.failed(2, r, g2->lease, 20);
  auto g3 = h.reply_to(2, q);
  ASSERT_TRUE(g3);
  EXPECT_EQ(g3->status, Status::kVersionLost);
}

}  // namespace
}  // namespace thub::sched::testing
