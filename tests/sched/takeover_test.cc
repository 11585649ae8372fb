// Issue 19, failover that completes: a registry taking over (Config::takeover_grace) learns
// the job's holdings only as their clients come back and publish again. A reader that comes
// back first is not told "not found": its request waits for a holder, within the grace; once
// the grace is over, what is not there is answered at once again.
#include <gtest/gtest.h>

#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

constexpr Time kGrace = 3'000'000;

Config grace() {
  Config c;
  c.takeover_grace = kGrace;
  return c;
}

TEST(TakeoverTest, AReaderBackBeforeItsTrainerIsServedWhenTheTrainerPublishes) {
  Harness h(grace());
  h.connect(2);
  MemberId r = h.open(2, "m", "reader");
  RequestId latest = h.replicate(2, r, -1);
  EXPECT_FALSE(h.reply_to(2, latest)) << "answered before the trainer could come back";
  h.advance(1'000'000);
  h.connect(1);
  MemberId t = h.open(1, "m", "trainer");
  ASSERT_EQ(h.publish(1, t, 4), Status::kOk);
  auto g = h.reply_to(2, latest);
  ASSERT_TRUE(g) << "the trainer published, the reader still waits";
  EXPECT_EQ(g->status, Status::kOk);
  EXPECT_EQ(g->version, 4);
  EXPECT_EQ(g->source, t);
}

TEST(TakeoverTest, AnAbsoluteVersionResumedHereWaitsForItsHolderToo) {
  Harness h(grace());
  h.connect(2);
  MemberId r = h.open(2, "m", "reader");
  RequestId resume = h.replicate(2, r, 7);
  EXPECT_FALSE(h.reply_to(2, resume));
  h.connect(1);
  MemberId t = h.open(1, "m", "trainer");
  ASSERT_EQ(h.publish(1, t, 7), Status::kOk);
  auto g = h.reply_to(2, resume);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kOk);
  EXPECT_EQ(g->version, 7);
}

TEST(TakeoverTest, NothingCameBackByTheEndOfTheGraceIsAnsweredThen) {
  Harness h(grace());
  h.connect(2);
  MemberId r = h.open(2, "m", "reader");
  RequestId latest = h.replicate(2, r, -1);
  h.advance(kGrace - 1);
  h.send(Heartbeat{2});
  EXPECT_FALSE(h.reply_to(2, latest));
  h.advance(1);
  h.send(Tick{});
  auto g = h.reply_to(2, latest);
  ASSERT_TRUE(g) << "still waiting after the grace";
  EXPECT_EQ(g->status, Status::kNotFound);
  // After it, at once.
  auto again = h.replicate_now(2, r, -1);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, Status::kNotFound);
}

TEST(TakeoverTest, WithoutAGraceNotFoundIsAnsweredAtOnce) {
  Harness h;
  h.connect(2);
  MemberId r = h.open(2, "m", "reader");
  auto g = h.replicate_now(2, r, -1);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kNotFound);
}

}  // namespace
}  // namespace thub::sched::testing
