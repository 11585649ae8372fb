// Replica-level transactions: all shards of a replica get the same version and source.
#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

struct TwoShard {
  Harness h;
  MemberId t0, t1, u0, u1, r0, r1;
  explicit TwoShard(Config cfg = {}) : h(cfg) {
    h.connect(1);
    t0 = h.open(1, "pol", "t", 0, 2);
    t1 = h.open(1, "pol", "t", 1, 2);
    h.connect(2);
    u0 = h.open(2, "pol", "u", 0, 2);
    u1 = h.open(2, "pol", "u", 1, 2);
    h.connect(3);
    r0 = h.open(3, "pol", "r", 0, 2);
    r1 = h.open(3, "pol", "r", 1, 2);
  }
};

TEST(TransactionTest, OpenChecksShards) {
  TwoShard s;
  auto r = s.h.open_raw(Open{3, 50, "pol", "r", 0, 2});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, Status::kState);  // already open
  r = s.h.open_raw(Open{3, 51, "pol", "z", 2, 2});
  EXPECT_EQ(r->status, Status::kArg);
  r = s.h.open_raw(Open{3, 52, "pol", "r", 0, 3});
  EXPECT_EQ(r->status, Status::kState);  // differs from the replica's num_shards
  r = s.h.open_raw(Open{3, 53, "", "r", 0, 1});
  EXPECT_EQ(r->status, Status::kArg);
}

TEST(TransactionTest, ShardsGetSameVersionAndSourceDespiteNewerPublish) {
  TwoShard s;
  Harness& h = s.h;
  ASSERT_EQ(h.publish(1, s.t0, 1), Status::kOk);
  ASSERT_EQ(h.publish(1, s.t1, 1), Status::kOk);
  auto g0 = h.replicate_now(3, s.r0, -1);
  ASSERT_TRUE(g0 && g0->status == Status::kOk);
  EXPECT_EQ(g0->version, 1);
  EXPECT_EQ(g0->source, s.t0);
  // a newer version appears in between
  ASSERT_EQ(h.publish(2, s.u0, 2), Status::kOk);
  ASSERT_EQ(h.publish(2, s.u1, 2), Status::kOk);
  auto g1 = h.replicate_now(3, s.r1, -1);
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  EXPECT_EQ(g1->version, 1);
  EXPECT_EQ(g1->source, s.t1);
}

TEST(TransactionTest, SourceSlotIsReservedForOtherShards) {
  TwoShard s;
  Harness& h = s.h;
  ASSERT_EQ(h.publish(1, s.t0, 1), Status::kOk);
  ASSERT_EQ(h.publish(1, s.t1, 1), Status::kOk);
  auto g0 = h.replicate_now(3, s.r0, 1);
  ASSERT_TRUE(g0 && g0->status == Status::kOk);
  // u asks too: t's shard 1 is reserved for r1 and t's shard 0 is busy -> u waits
  RequestId q = h.replicate(2, s.u0, 1);
  EXPECT_FALSE(h.reply_to(2, q));
  auto g1 = h.replicate_now(3, s.r1, 1);
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  EXPECT_EQ(g1->source, s.t1);
}

TEST(TransactionTest, ShardAskingAgainWaitsForTheOthers) {
  TwoShard s(Config{5'000'000, 2, true});
  Harness& h = s.h;
  ASSERT_EQ(h.publish(1, s.t0, 1), Status::kOk);
  ASSERT_EQ(h.publish(1, s.t1, 1), Status::kOk);
  auto g0 = h.replicate_now(3, s.r0, 1);
  ASSERT_TRUE(g0 && g0->status == Status::kOk);
  h.done(3, s.r0, g0->lease);
  h.unpublish(3, s.r0);
  RequestId again = h.replicate(3, s.r0, 1);
  EXPECT_FALSE(h.reply_to(3, again));  // queued: r1 has not joined
  RequestId q1 = h.replicate(3, s.r1, 1);
  auto g1 = h.reply_to(3, q1);
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  auto g0b = h.reply_to(3, again);  // the transaction ended: a new one starts at once
  ASSERT_TRUE(g0b);
  EXPECT_EQ(g0b->status, Status::kOk);
}

TEST(TransactionTest, ReservedSourceGoneGivesAnotherSource) {
  TwoShard s;
  Harness& h = s.h;
  for (MemberId m : {s.t0, s.t1}) ASSERT_EQ(h.publish(1, m, 1), Status::kOk);
  for (MemberId m : {s.u0, s.u1}) ASSERT_EQ(h.publish(2, m, 1), Status::kOk);
  auto g0 = h.replicate_now(3, s.r0, 1);
  ASSERT_TRUE(g0 && g0->status == Status::kOk);
  MemberId expected = g0->source == s.t0 ? s.u1 : s.t1;
  ClientId src_client = g0->source == s.t0 ? 1 : 2;
  h.send(Disconnect{src_client});
  auto g1 = h.replicate_now(3, s.r1, 1);
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  EXPECT_EQ(g1->version, 1);
  EXPECT_EQ(g1->source, expected);
}

// A shard refused (its buffers busy) before its replica's transaction existed already has
// its answer for the round: the transaction another shard opens next must not wait for it,
// or that shard's next request would join the stale transaction (an old version).
TEST(TransactionTest, ShardRefusedBeforeTheTransactionIsNotWaitedFor) {
  TwoShard s;
  Harness& h = s.h;
  for (MemberId m : {s.t0, s.t1}) ASSERT_EQ(h.publish(1, m, 1), Status::kOk);
  ASSERT_EQ(h.publish(3, s.r0, 1), Status::kOk);  // r0's buffers are busy
  auto refused = h.replicate_now(3, s.r0, -1);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, Status::kState);
  auto g1 = h.replicate_now(3, s.r1, -1);  // opens the replica's transaction: v1
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  EXPECT_EQ(g1->version, 1);
  h.done(3, s.r1, g1->lease);
  ASSERT_EQ(h.reply_to(3, h.unpublish(3, s.r0))->status, Status::kOk);
  for (MemberId m : {s.u0, s.u1}) ASSERT_EQ(h.publish(2, m, 2), Status::kOk);
  auto g0 = h.replicate_now(3, s.r0, -1);  // a new round: the latest, v2
  ASSERT_TRUE(g0 && g0->status == Status::kOk);
  EXPECT_EQ(g0->version, 2);
}

}  // namespace
}  // namespace thub::sched::testing
