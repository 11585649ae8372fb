// Drain: unpublish is acknowledged only when no lease reads the member.
#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

TEST(DrainTest, UnpublishWaitsForReaders) {
  Harness h;
  h.connect(1);
  MemberId t = h.open(1, "pol", "t");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  h.connect(2);
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, 1);
  ASSERT_TRUE(g);
  RequestId u = h.unpublish(1, t);
  EXPECT_FALSE(h.reply_to(1, u));
  // hidden from new choices: a new requester chains off r instead
  h.connect(3);
  MemberId x = h.open(3, "pol", "x");
  auto gx = h.replicate_now(3, x, 1);
  ASSERT_TRUE(gx);
  EXPECT_EQ(gx->source, r);
  RequestId d = h.done(2, r, g->lease);
  ASSERT_TRUE(h.reply_to(2, d));
  auto ack = h.reply_to(1, u);
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->status, Status::kOk);
}

TEST(DrainTest, UnpublishIdleIsImmediateAndTwiceIsState) {
  Harness h;
  h.connect(1);
  MemberId t = h.open(1, "pol", "t");
  RequestId u = h.unpublish(1, t);
  EXPECT_EQ(h.reply_to(1, u)->status, Status::kState);
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  u = h.unpublish(1, t);
  EXPECT_EQ(h.reply_to(1, u)->status, Status::kOk);
  EXPECT_EQ(h.publish(1, t, 2), Status::kOk);
}

TEST(DrainTest, UnpublishWhileReceivingCancelsTheLease) {
  Harness h;
  h.connect(1);
  MemberId t = h.open(1, "pol", "t");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  h.connect(2);
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, 1);
  RequestId u = h.unpublish(2, r);
  EXPECT_EQ(h.reply_to(2, u)->status, Status::kOk);
  RequestId d = h.done(2, r, g->lease);
  EXPECT_EQ(h.reply_to(2, d)->status, Status::kState);
  RequestId u2 = h.unpublish(1, t);  // t has no reader left
  EXPECT_EQ(h.reply_to(1, u2)->status, Status::kOk);
}

TEST(DrainTest, CloseRepliesAtOnceAndReaderReportsFailure) {
  Harness h;
  h.connect(1);
  MemberId t = h.open(1, "pol", "t");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  h.connect(2);
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, 1);
  RequestId c = h.close(1, t);
  EXPECT_EQ(h.reply_to(1, c)->status, Status::kOk);
  RequestId f = h.failed(2, r, g->lease);
  EXPECT_EQ(h.reply_to(2, f)->status, Status::kVersionLost);
}

// Seed 528 of the simulation with the real client: a receiving member that its own reader
// reported failed is emptied while its own transfer goes on; that transfer then fails on its
// side (not the source's), and the client gives up with Unpublish. Its read must end there:
// otherwise its source never drains and the source's unpublish waits for ever.
TEST(DrainTest, UnpublishOfAMemberReportedFailedEndsItsOwnRead) {
  Harness h;
  h.connect(1);
  MemberId t = h.open(1, "pol", "t");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  h.connect(2);
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, 1);
  ASSERT_TRUE(g && g->source == t);
  h.connect(3);
  MemberId x = h.open(3, "pol", "x");
  auto gx = h.replicate_now(3, x, 1);
  ASSERT_TRUE(gx && gx->source == r && gx->source_partial);
  h.failed(3, x, gx->lease);  // r is hidden and, unread, emptied; its own read goes on
  RequestId u = h.unpublish(1, t);
  EXPECT_FALSE(h.reply_to(1, u)) << "r still reads t";
  h.unpublish(2, r);  // r's transfer failed on its side: it stopped reading t
  auto ack = h.reply_to(1, u);
  ASSERT_TRUE(ack) << "t's drain waits for a read that has stopped";
  EXPECT_EQ(ack->status, Status::kOk);
}

}  // namespace
}  // namespace thub::sched::testing
