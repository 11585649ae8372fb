// Lost versions: a version is lost when no holder is left that serves it or will complete it
// without anyone's help. Waiters for a lost version get kVersionLost at once; relative specs
// (latest, latest-k) resolve only among versions that are not lost, so a request for the
// latest moves on to the newest version that still has a holder; a partial holder whose
// chain no longer ends at a complete holder is never handed out as a source.
#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

// v0 on t0 (client 1), v1 on t1 (client 2); r1 (client 3) receives v1 from t1 (a partial
// holder, pipeline on); then t1's process dies (Disconnect). r1 has not noticed yet.
struct OrphanedPartial {
  Harness h;
  MemberId t0, t1, r1;
  Reply g1;
  explicit OrphanedPartial(Config cfg = {}) : h(cfg) {
    h.connect(1);
    h.connect(2);
    h.connect(3);
    h.connect(4);
    t0 = h.open(1, "pol", "t0");
    t1 = h.open(2, "pol", "t1");
    r1 = h.open(3, "pol", "r1");
    EXPECT_EQ(h.publish(1, t0, 0), Status::kOk);
    EXPECT_EQ(h.publish(2, t1, 1), Status::kOk);
    auto g = h.replicate_now(3, r1, -1);
    EXPECT_TRUE(g && g->status == Status::kOk && g->version == 1 && g->source == t1);
    if (g) g1 = *g;
    h.send(Disconnect{2});
  }
};

TEST(LostVersionTest, LatestSkipsAVersionWhosePartialHolderLostItsSource) {
  OrphanedPartial s;
  MemberId r2 = s.h.open(4, "pol", "r2");
  auto g = s.h.replicate_now(4, r2, -1);
  ASSERT_TRUE(g);
  ASSERT_EQ(g->status, Status::kOk);
  EXPECT_EQ(g->version, 0) << "v1 is lost: r1 holds a prefix that nobody can complete";
  EXPECT_EQ(g->source, s.t0);
}

TEST(LostVersionTest, LatestMinusKCountsOnlyVersionsThatAreNotLost) {
  OrphanedPartial s;
  MemberId r2 = s.h.open(4, "pol", "r2");
  auto g = s.h.replicate_now(4, r2, -2);  // latest-1: there is no second version left
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kNotFound);
}

TEST(LostVersionTest, AbsoluteRequestForALostVersionIsAnsweredAtOnce) {
  OrphanedPartial s;
  MemberId r2 = s.h.open(4, "pol", "r2");
  auto g = s.h.replicate_now(4, r2, 1);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kVersionLost) << "never granted the partial that cannot complete";
}

TEST(LostVersionTest, ReaderOfTheLostVersionGetsVersionLostAndItsPrefixDrains) {
  OrphanedPartial s;
  MemberId r2 = s.h.open(4, "pol", "r2");
  RequestId f = s.h.failed(3, s.r1, s.g1.lease, 5);
  auto a = s.h.reply_to(3, f);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, Status::kVersionLost);
  // Its buffers were emptied (nobody read them): it may ask again, and the latest is now v0.
  auto g = s.h.replicate_now(3, s.r1, -1);
  ASSERT_TRUE(g && g->status == Status::kOk);
  EXPECT_EQ(g->version, 0);
  auto g2 = s.h.replicate_now(4, r2, -1);
  ASSERT_TRUE(g2 && g2->status == Status::kOk);
  EXPECT_EQ(g2->version, 0);
}

// A latest request of a replica whose own host copy is the only holder of the newest version:
// a replica is never its own source, so it takes the newest version another replica serves.
// Before, it was answered VERSION_LOST while v0 stayed published (the faultless simulation,
// issue 18: seed 161, a rollout retained the version it had unpublished and asked again).
TEST(LostVersionTest, LatestSkipsANewestVersionHeldOnlyByTheRequestersOwnHostCopy) {
  Harness h;
  for (ClientId c = 1; c <= 3; ++c) h.connect(c);
  MemberId t0 = h.open(1, "pol", "t0", 0, 1, /*retain=*/2), t1 = h.open(3, "pol", "t1");
  MemberId r = h.open(2, "pol", "r");
  ASSERT_EQ(h.publish(1, t0, 0), Status::kOk);
  ASSERT_EQ(h.publish(3, t1, 1), Status::kOk);
  auto g = h.replicate_now(2, r, -1);
  ASSERT_TRUE(g && g->status == Status::kOk && g->version == 1 && g->source == t1);
  ASSERT_EQ(h.reply_to(2, h.done(2, r, g->lease))->status, Status::kOk);
  ASSERT_EQ(h.reply_to(3, h.unpublish(3, t1))->status, Status::kOk);  // r holds v1 still
  RequestId u = h.unpublish(2, r);  // the last holder of a retained version: a host copy first
  ASSERT_EQ(h.all<Offload>().size(), 1u);
  ASSERT_EQ(h.reply_to(2, h.offload_done(2, r, 1, "host-r"))->status, Status::kOk);
  ASSERT_EQ(h.reply_to(2, u)->status, Status::kOk);
  auto again = h.replicate_now(2, r, -1);
  ASSERT_TRUE(again);
  ASSERT_EQ(again->status, Status::kOk) << again->detail;
  EXPECT_EQ(again->version, 0);
  EXPECT_EQ(again->source, t0);
}

// A deferred request for the latest is resolved again whenever it is retried: when the
// version it would get is lost meanwhile, it moves on. (Without pipelining, so that the
// request waits: a partial holder would be a free source.)
TEST(LostVersionTest, WaitingLatestRequestMovesOnWhenItsVersionIsLost) {
  Harness h(Config{5'000'000, 1, false});
  h.connect(1);
  h.connect(2);
  h.connect(3);
  h.connect(4);
  MemberId t0 = h.open(1, "pol", "t0"), t1 = h.open(2, "pol", "t1");
  MemberId r1 = h.open(3, "pol", "r1"), r2 = h.open(4, "pol", "r2");
  ASSERT_EQ(h.publish(1, t0, 0), Status::kOk);
  ASSERT_EQ(h.publish(2, t1, 1), Status::kOk);
  auto g1 = h.replicate_now(3, r1, 1);
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  RequestId q = h.replicate(4, r2, -1);
  EXPECT_FALSE(h.reply_to(4, q)) << "v1's only source is busy: r2 waits";
  h.send(Disconnect{2});  // t1 dies: r1 can no longer complete v1
  auto g = h.reply_to(4, q);
  ASSERT_TRUE(g) << "the waiting latest request is resolved again";
  ASSERT_EQ(g->status, Status::kOk);
  EXPECT_EQ(g->version, 0);
  EXPECT_EQ(g->source, t0);
}

// The trainer unpublished v1 while r1 still reads it: its buffers stay intact until r1 is
// done, so r1 will complete v1, and a request for v1 waits for it instead of being told that
// v1 is lost. (Without pipelining, so that r1 is not yet a source.)
TEST(LostVersionTest, ReceiverOfADrainingHolderIsWorthWaitingFor) {
  Harness h(Config{5'000'000, 1, false});
  h.connect(1);
  h.connect(2);
  h.connect(3);
  MemberId t = h.open(1, "pol", "t");
  MemberId r1 = h.open(2, "pol", "r1"), r2 = h.open(3, "pol", "r2");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  auto g1 = h.replicate_now(2, r1, 1);
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  RequestId u = h.unpublish(1, t);
  EXPECT_FALSE(h.reply_to(1, u)) << "r1 still reads t";
  RequestId q = h.replicate(3, r2, 1);
  EXPECT_FALSE(h.reply_to(3, q)) << "r1 will complete v1 (t drains only after it): r2 waits";
  h.done(2, r1, g1->lease);
  ASSERT_TRUE(h.reply_to(1, u));
  auto g2 = h.reply_to(3, q);
  ASSERT_TRUE(g2 && g2->status == Status::kOk);
  EXPECT_EQ(g2->source, r1);
}

// The same with pipelining: a reader of the draining holder's receiver is a grounded chain.
TEST(LostVersionTest, ChainEndingAtADrainingHolderIsGrounded) {
  Harness h;
  h.connect(1);
  h.connect(2);
  h.connect(3);
  h.connect(4);
  MemberId t = h.open(1, "pol", "t");
  MemberId r1 = h.open(2, "pol", "r1"), r2 = h.open(3, "pol", "r2"), r3 = h.open(4, "pol", "r3");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  auto g1 = h.replicate_now(2, r1, -1);
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  RequestId u = h.unpublish(1, t);
  EXPECT_FALSE(h.reply_to(1, u));
  auto g2 = h.replicate_now(3, r2, -1);  // v1 is still available: r1 completes it
  ASSERT_TRUE(g2 && g2->status == Status::kOk);
  EXPECT_EQ(g2->version, 1);
  EXPECT_EQ(g2->source, r1);
  auto g3 = h.replicate_now(4, r3, -1);
  ASSERT_TRUE(g3 && g3->status == Status::kOk);
  EXPECT_EQ(g3->source, r2);
}

}  // namespace
}  // namespace thub::sched::testing
