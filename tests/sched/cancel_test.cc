// THUB_Cancel at the registry: a Replicate still deferred (nothing granted, nothing
// overwritten) is answered kCanceled and forgotten; anything else is not canceled (kState),
// and a client cannot cancel another's member.
#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

struct Busy {  // t holds v1 and serves x: without pipelining, a third reader waits
  Harness h{Config{5'000'000, 1, false}};
  MemberId t = 0, x = 0;
  LeaseId lx = 0;
  Busy() {
    h.connect(1);
    t = h.open(1, "pol", "t");
    EXPECT_EQ(h.publish(1, t, 1), Status::kOk);
    h.connect(2);
    x = h.open(2, "pol", "x");
    auto g = h.replicate_now(2, x, 1);
    EXPECT_TRUE(g && g->status == Status::kOk);
    lx = g ? g->lease : 0;
  }
  Status cancel(ClientId c, MemberId m, RequestId* q = nullptr) {
    RequestId r = h.next_req();
    if (q) *q = r;
    h.send(Cancel{c, r, m});
    auto rep = h.reply_to(c, r);
    EXPECT_TRUE(rep);
    return rep ? rep->status : Status::kInternal;
  }
};

TEST(CancelTest, DeferredReplicateIsAnsweredCanceledAndForgotten) {
  Busy b;
  b.h.connect(3);
  MemberId r = b.h.open(3, "pol", "r");
  RequestId q = b.h.replicate(3, r, 1);
  ASSERT_FALSE(b.h.reply_to(3, q));  // deferred: t is busy
  EXPECT_EQ(b.cancel(3, r), Status::kOk);
  auto canceled = b.h.reply_to(3, q);
  ASSERT_TRUE(canceled);
  EXPECT_EQ(canceled->status, Status::kCanceled);
  EXPECT_EQ(canceled->lease, 0u);
  // t becomes free: nothing is granted to the canceled request.
  b.h.done(2, b.x, b.lx);
  EXPECT_FALSE(b.h.reply_to(3, q));
  // A retry of the canceled request repeats its answer; a new one is granted.
  b.h.send(Replicate{3, q, r, 1, -1, 7, "rdesc"});
  ASSERT_TRUE(b.h.reply_to(3, q));
  EXPECT_EQ(b.h.reply_to(3, q)->status, Status::kCanceled);
  auto g = b.h.replicate_now(3, r, 1);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kOk);
}

TEST(CancelTest, NothingWaitingIsAStateError) {
  Busy b;
  // x was granted already: its read goes on.
  EXPECT_EQ(b.cancel(2, b.x), Status::kState);
  RequestId d = b.h.done(2, b.x, b.lx);
  ASSERT_TRUE(b.h.reply_to(2, d));
  EXPECT_EQ(b.h.reply_to(2, d)->status, Status::kOk);
  EXPECT_EQ(b.cancel(1, b.t), Status::kState);  // a holder asks nothing
}

TEST(CancelTest, AnotherClientsMemberIsNotCanceled) {
  Busy b;
  b.h.connect(3);
  MemberId r = b.h.open(3, "pol", "r");
  RequestId q = b.h.replicate(3, r, 1);
  ASSERT_FALSE(b.h.reply_to(3, q));
  EXPECT_NE(b.cancel(2, r), Status::kOk);
  EXPECT_FALSE(b.h.reply_to(3, q));
  b.h.done(2, b.x, b.lx);  // still waiting: granted once t is free
  auto g = b.h.reply_to(3, q);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kOk);
}

TEST(CancelTest, UpdateInPlaceIsNotCanceled) {
  Busy b;
  b.h.done(2, b.x, b.lx);
  RequestId ut = b.h.unpublish(1, b.t);  // x alone holds v1
  ASSERT_TRUE(b.h.reply_to(1, ut));
  ASSERT_EQ(b.h.reply_to(1, ut)->status, Status::kOk);
  b.h.connect(3);
  MemberId y = b.h.open(3, "pol", "y");
  auto gy = b.h.replicate_now(3, y, 1);  // y reads x
  ASSERT_TRUE(gy && gy->source == b.x);
  b.h.connect(4);
  MemberId t2 = b.h.open(4, "pol", "t2");
  ASSERT_EQ(b.h.publish(4, t2, 2), Status::kOk);
  RequestId up = b.h.replicate(2, b.x, -1, /*newer_than=*/1);
  ASSERT_FALSE(b.h.reply_to(2, up));  // waits for y to finish reading x
  EXPECT_EQ(b.cancel(2, b.x), Status::kState);
  b.h.done(3, y, gy->lease);
  auto g = b.h.reply_to(2, up);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kOk);
  EXPECT_EQ(g->version, 2);
}

}  // namespace
}  // namespace thub::sched::testing
