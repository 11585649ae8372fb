// Transactions keyed by round (Replicate::round, the user's n-th replicate of the model
// handle): a round's answer is never handed to another round's request, and a shard that
// asks a round alone, or never asks one, leaves no transaction waiting for the others (the
// stale-transaction finding of docs/sched.md, seeds 30, 44, 107, 2605, 2875, 4504 there).
#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

// Trainer t (2 shards) publishes; rollouts r and x (2 shards each) replicate by round.
struct Rounds {
  Harness h{Config{5'000'000, 1, false}};  // one reader per source, no pipelining
  MemberId t0, t1, r0, r1, x0, x1;
  Rounds() {
    h.connect(1);
    t0 = h.open(1, "pol", "t", 0, 2);
    t1 = h.open(1, "pol", "t", 1, 2);
    h.connect(2);
    r0 = h.open(2, "pol", "r", 0, 2);
    r1 = h.open(2, "pol", "r", 1, 2);
    h.connect(3);
    x0 = h.open(3, "pol", "x", 0, 2);
    x1 = h.open(3, "pol", "x", 1, 2);
  }
  void publish(Version v) {
    EXPECT_EQ(h.publish(1, t0, v), Status::kOk);
    EXPECT_EQ(h.publish(1, t1, v), Status::kOk);
  }
  RequestId ask(ClientId c, MemberId m, Version spec, uint64_t round) {
    RequestId q = h.next_req();
    h.send(Replicate{c, q, m, spec, -1, 7, "d" + std::to_string(m), round});
    return q;
  }
  std::optional<Reply> ask_now(ClientId c, MemberId m, Version spec, uint64_t round) {
    return h.reply_to(c, ask(c, m, spec, round));
  }
  void finish(ClientId c, MemberId m, const std::optional<Reply>& g) {
    ASSERT_TRUE(g && g->status == Status::kOk);
    h.done(c, m, g->lease);
    ASSERT_EQ(h.reply_to(c, h.unpublish(c, m))->status, Status::kOk);
  }
};

// Shard 1 asks round 1 alone (its answer lost with a registry that restarted, while shard 0
// got its round-1 answer there): shard 0's round 2 gets round 2's answer (the latest now),
// not round 1's (seed 30: an absolute spec answered another version; 44: versions differ).
TEST(RoundTest, NextRoundDoesNotJoinARoundAskedAlone) {
  Rounds s;
  s.publish(1);
  auto alone = s.ask_now(2, s.r1, -1, 1);
  ASSERT_TRUE(alone && alone->status == Status::kOk);
  EXPECT_EQ(alone->version, 1);
  s.finish(2, s.r1, alone);
  ASSERT_EQ(s.h.reply_to(1, s.h.unpublish(1, s.t0))->status, Status::kOk);  // t moves to v2
  ASSERT_EQ(s.h.reply_to(1, s.h.unpublish(1, s.t1))->status, Status::kOk);
  s.publish(2);
  auto g0 = s.ask_now(2, s.r0, 2, 2);  // round 2 by number: version 2, not round 1's v1
  ASSERT_TRUE(g0 && g0->status == Status::kOk);
  EXPECT_EQ(g0->version, 2);
  auto g1 = s.ask_now(2, s.r1, 2, 2);
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  EXPECT_EQ(g1->version, 2);
  EXPECT_EQ(g1->source, s.t1);
}

// A shard canceled at the registry before any shard opened the round: the round that the
// other shard opens does not wait for it, and its next round opens its own transaction
// (seed 4504: several shards canceled left marks a later round took for its own).
TEST(RoundTest, CanceledShardIsNotWaitedForAndItsNextRoundIsItsOwn) {
  Rounds s;
  s.publish(1);
  auto gx = s.ask_now(3, s.x0, 1, 1);  // x reads t0: r's shard 0 must wait
  ASSERT_TRUE(gx && gx->status == Status::kOk);
  RequestId q0 = s.ask(2, s.r0, -1, 1);
  ASSERT_FALSE(s.h.reply_to(2, q0));
  RequestId c = s.h.next_req();
  s.h.send(Cancel{2, c, s.r0});
  ASSERT_EQ(s.h.reply_to(2, c)->status, Status::kOk);
  ASSERT_EQ(s.h.reply_to(2, q0)->status, Status::kCanceled);
  auto gx1 = s.ask_now(3, s.x1, 1, 1);
  s.finish(3, s.x0, gx);
  s.finish(3, s.x1, gx1);
  auto g1 = s.ask_now(2, s.r1, -1, 1);  // round 1 of shard 1 alone: nobody else will ask it
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  s.finish(2, s.r1, g1);
  // Round 1 is over for both shards: both sources are free for x's next round.
  auto x0 = s.ask_now(3, s.x0, 1, 2);
  auto x1 = s.ask_now(3, s.x1, 1, 2);
  ASSERT_TRUE(x0 && x0->status == Status::kOk);
  ASSERT_TRUE(x1 && x1->status == Status::kOk);
}

// A transaction opened by one shard's round keeps a source slot for the other; when that
// other shard asks a later round it is done with the earlier one: the slot is freed at once
// for another replica (seeds 2605, 4897: reserved slots held up other replicas; 107: the
// lone shard's next request was never answered).
TEST(RoundTest, LaterRoundFreesTheSlotAnEarlierRoundKeptForIt) {
  Rounds s;
  s.publish(1);
  auto g1 = s.ask_now(2, s.r1, -1, 4);  // round 4 of shard 1 alone: a slot on t0 kept for r0
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  s.finish(2, s.r1, g1);
  RequestId qx = s.ask(3, s.x0, 1, 1);
  ASSERT_FALSE(s.h.reply_to(3, qx));  // t0's one slot is r0's
  // r0 never asked round 4 and asks round 5 now (a version never published): it is not
  // handed round 4's v1, and round 4 stops keeping t0's slot for it.
  auto nf = s.ask_now(2, s.r0, 9, 5);
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, Status::kNotFound);
  auto x = s.h.reply_to(3, qx);
  ASSERT_TRUE(x && x->status == Status::kOk);
  EXPECT_EQ(x->source, s.t0);
}

// Shard 1 asks round 3 alone, then round 4 comes with both shards: shard 0, which never
// asked round 3, is not handed round 3's answer, and its round-4 request does not wait for
// round 3 to end (seed 2875: a shard resuming at a new registry got another version).
TEST(RoundTest, RoundAskedByOneShardDoesNotAnswerAnother) {
  Rounds s;
  s.publish(1);
  auto g1 = s.ask_now(2, s.r1, -1, 3);
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  EXPECT_EQ(g1->version, 1);
  s.finish(2, s.r1, g1);
  auto nf = s.ask_now(2, s.r0, 5, 4);  // round 4 asks version 5: never published
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, Status::kNotFound);
  nf = s.ask_now(2, s.r1, 5, 4);
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, Status::kNotFound);
}

// Requests without a round (0) share one transaction as before.
TEST(RoundTest, RequestsWithoutARoundJoinTheOpenTransaction) {
  Rounds s;
  s.publish(1);
  auto g0 = s.ask_now(2, s.r0, -1, 0);
  ASSERT_TRUE(g0 && g0->status == Status::kOk);
  ASSERT_EQ(s.h.reply_to(1, s.h.unpublish(1, s.t0)), std::nullopt);  // drains for r0
  auto g1 = s.ask_now(2, s.r1, -1, 0);
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  EXPECT_EQ(g1->version, 1);
  EXPECT_EQ(g1->source, s.t1);
}

// A CANCEL with a round and nothing to cancel: the shard will not ask that round here (its
// operation was canceled before it was asked, or an earlier registry answered it), so the
// transaction another shard opens of it keeps no slot for it (seed 782: kept for ever).
TEST(RoundTest, CancelOfARoundNotAskedIsNotWaitedFor) {
  Rounds s;
  s.publish(1);
  RequestId c = s.h.next_req();
  s.h.send(Cancel{2, c, s.r0, 1});
  EXPECT_EQ(s.h.reply_to(2, c)->status, Status::kState);  // nothing waited
  auto g1 = s.ask_now(2, s.r1, -1, 1);
  s.finish(2, s.r1, g1);
  auto x = s.ask_now(3, s.x0, 1, 1);  // t0 is free: no slot kept for r0
  ASSERT_TRUE(x && x->status == Status::kOk);
  EXPECT_EQ(x->source, s.t0);
}

// A shard resuming at a new registry the version the old one granted it, in its round,
// while another shard asked the round afresh here and got a newer version: it is answered
// for its own version, not handed the other (seed 2875: THUB_ERR_INTERNAL "the registry
// granted another version").
TEST(RoundTest, ResumeOfAnotherVersionIsAnsweredForItsOwn) {
  Rounds s;
  s.publish(1);
  EXPECT_EQ(s.h.publish(3, s.x1, 0), Status::kOk);  // v0, still held by x1
  auto g0 = s.ask_now(2, s.r0, -1, 2);  // afresh: v1, the latest
  ASSERT_TRUE(g0 && g0->status == Status::kOk);
  ASSERT_EQ(g0->version, 1);
  auto resumed = s.ask_now(2, s.r1, 0, 2);
  ASSERT_TRUE(resumed && resumed->status == Status::kOk);
  EXPECT_EQ(resumed->version, 0);
  EXPECT_EQ(resumed->source, s.x1);
}

// A shard that asks its round again after it had its answer (given up, or lost with its
// session) gets the round's answer at once, not a wait for the other shards.
TEST(RoundTest, RoundAskedAgainGetsTheRoundsAnswer) {
  Rounds s;
  s.publish(1);
  auto g0 = s.ask_now(2, s.r0, -1, 1);
  ASSERT_TRUE(g0 && g0->status == Status::kOk);
  ASSERT_EQ(s.h.reply_to(2, s.h.unpublish(2, s.r0))->status, Status::kOk);  // gave it up
  EXPECT_EQ(s.h.publish(3, s.x0, 2), Status::kOk);  // a newer version appears
  EXPECT_EQ(s.h.publish(3, s.x1, 2), Status::kOk);
  auto again = s.ask_now(2, s.r0, -1, 1);
  ASSERT_TRUE(again && again->status == Status::kOk);
  EXPECT_EQ(again->version, 1);  // round 1's answer, which r1 gets too
  auto g1 = s.ask_now(2, s.r1, -1, 1);
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  EXPECT_EQ(g1->version, 1);
}

// After a failover: r1 was granted v1 in round 3 by the registry before and tells this one
// (a CANCEL with the round and the version, at its re-open); r0, whose answer was lost with
// the old registry, asks round 3 afresh here and gets v1 too, not the newer v2 (seeds 8987
// "versions 20 and 19", 16165 with THUB_SIM_STRICT=1).
TEST(RoundTest, RoundToldWithItsVersionGivesItToAShardAskingAfresh) {
  Rounds s;
  s.publish(1);
  EXPECT_EQ(s.h.publish(3, s.x0, 2), Status::kOk);
  EXPECT_EQ(s.h.publish(3, s.x1, 2), Status::kOk);
  RequestId c = s.h.next_req();
  s.h.send(Cancel{2, c, s.r1, 3, 1});
  EXPECT_EQ(s.h.reply_to(2, c)->status, Status::kState);
  auto g0 = s.ask_now(2, s.r0, -1, 3);
  ASSERT_TRUE(g0 && g0->status == Status::kOk);
  EXPECT_EQ(g0->version, 1);
  EXPECT_EQ(g0->source, s.t0);
  auto g1 = s.ask_now(2, s.r0, -1, 4);  // its next round is its own: the latest
  ASSERT_TRUE(g1);
  EXPECT_EQ(g1->status, Status::kState);  // (r0 is receiving v1)
}

}  // namespace
}  // namespace thub::sched::testing
