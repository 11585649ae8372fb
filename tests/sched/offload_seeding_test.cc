// Offload seeding (issue 22 item 3): a seed buffer's replicates are seed-only
// (Replicate::seed_only). It takes the newest version only as its datacenter's seeder, so
// that the datacenter's rollouts keep serving (their updates answered THUB_NOT_UPDATED by
// smart skipping) while it crosses, and then read it inside; everywhere else it is answered
// THUB_NOT_UPDATED with the reason, and takes nothing.
#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

// The trainer (client 1, member t) in "a" publishes v1, then v2 from a second trainer
// member (client 2); the rollout r of "b" (client 10) holds v1 already; s is its seed
// buffer (client 10 too, replica "r~seed").
struct Offload {
  explicit Offload(Config cfg = Config{5'000'000, 4, true}) : h(cfg) {
    h.connect(1, "a");
    t = h.open(1, "pol", "t");
    EXPECT_EQ(h.publish(1, t, 1), Status::kOk);
    h.connect(10, "b");
    r = h.open(10, "pol", "r");
    EXPECT_EQ(h.publish(10, r, 1), Status::kOk);
    s = h.open(10, "pol", "r~seed");
    h.connect(2, "a");
    t2 = h.open(2, "pol", "t2");
    EXPECT_EQ(h.publish(2, t2, 2), Status::kOk);
  }
  RequestId ask_seed(MemberId m, Version newer_than = -1, ClientId c = 10) {
    RequestId q = h.next_req();
    Replicate e{c, q, m, -1, newer_than, 7, "rdesc-" + std::to_string(m)};
    e.seed_only = true;
    h.send(e);
    return q;
  }
  std::optional<Reply> seed(MemberId m, Version newer_than = -1, ClientId c = 10) {
    RequestId q = ask_seed(m, newer_than, c);
    return h.reply_to(c, q);
  }
  Harness h;
  MemberId t = 0, t2 = 0, r = 0, s = 0;
};

TEST(OffloadSeedingTest, TheSeedBufferCrossesAndTheRolloutKeepsServingUntilItIsInside) {
  Offload w;
  auto g = w.seed(w.s);
  ASSERT_TRUE(g);
  ASSERT_EQ(g->status, Status::kOk);
  EXPECT_EQ(g->version, 2);
  EXPECT_EQ(g->source, w.t2);  // the seeder of v2 for b
  // The rollout's update right after: v2 is on its way into b, so it keeps v1 (no stall).
  auto u = w.h.replicate_now(10, w.r, -1, /*newer_than=*/1);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->status, Status::kNotUpdated);
  // Another rollout of b asks its own seed buffer: nothing to seed, v2 is on its way.
  w.h.connect(11, "b");
  MemberId s2 = w.h.open(11, "pol", "r2~seed");
  auto g2 = w.seed(s2, -1, 11);
  ASSERT_TRUE(g2);
  EXPECT_EQ(g2->status, Status::kNotUpdated);
  EXPECT_NE(g2->detail.find("nothing to seed"), std::string::npos) << g2->detail;
  // Once the seed buffer holds v2, the rollout updates from it, inside b.
  w.h.done(10, w.s, g->lease);
  auto u2 = w.h.replicate_now(10, w.r, -1, 1);
  ASSERT_TRUE(u2);
  ASSERT_EQ(u2->status, Status::kOk);
  EXPECT_EQ(u2->version, 2);
  EXPECT_EQ(u2->source, w.s);
}

TEST(OffloadSeedingTest, NothingToSeedWhereTheDatacenterHoldsTheVersion) {
  Offload w;
  w.h.connect(11, "b");
  MemberId r2 = w.h.open(11, "pol", "r2");
  auto g = w.h.replicate_now(11, r2, 2);  // b's seeder of v2, the ordinary way
  ASSERT_TRUE(g);
  ASSERT_EQ(g->source, w.t2);
  auto sg = w.seed(w.s);
  ASSERT_TRUE(sg);
  EXPECT_EQ(sg->status, Status::kNotUpdated);  // on its way
  w.h.done(11, r2, g->lease);
  sg = w.seed(w.s);
  ASSERT_TRUE(sg);
  EXPECT_EQ(sg->status, Status::kNotUpdated);  // whole in b: the rollout reads r2
  auto u = w.h.replicate_now(10, w.r, -1, 1);
  ASSERT_TRUE(u);
  ASSERT_EQ(u->status, Status::kOk);
  EXPECT_EQ(u->source, r2);
}

TEST(OffloadSeedingTest, NothingToSeedInTheTrainersDatacenter) {
  Offload w;
  w.h.connect(20, "a");
  MemberId sa = w.h.open(20, "pol", "ra~seed");
  auto g = w.seed(sa, -1, 20);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kNotUpdated);
  EXPECT_NE(g->detail.find("datacenter a"), std::string::npos) << g->detail;
}

TEST(OffloadSeedingTest, NothingSeededWithoutSmartSkipping) {
  Config c{5'000'000, 4, true};
  c.skipping = false;
  Offload w(c);
  auto g = w.seed(w.s);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kNotUpdated);
  EXPECT_NE(g->detail.find("smart_skipping"), std::string::npos) << g->detail;
}

// A seed buffer that holds v1 and moves to v2 in place drains v1 first (a reader of b
// reads it); from its decision on, b waits for it: the rollout's update is answered not
// updated at once instead of crossing itself (it would wait for its own drain, then cross).
TEST(OffloadSeedingTest, ASeedWhoseOldVersionDrainsKeepsItsDatacenterWaiting) {
  Offload w(Config{5'000'000, 1, true});  // one reader per source
  Harness& h = w.h;
  h.connect(11, "b");
  h.connect(12, "b");
  MemberId r2 = h.open(11, "pol", "r2"), r3 = h.open(12, "pol", "r3");
  auto g2 = h.replicate_now(11, r2, 1);  // r's one slot
  ASSERT_TRUE(g2);
  ASSERT_EQ(g2->source, w.r);
  ASSERT_EQ(h.publish(10, w.s, 1), Status::kOk);  // the seed buffer holds v1 (seeded before)
  auto g3 = h.replicate_now(12, r3, 1);
  ASSERT_TRUE(g3);
  ASSERT_EQ(g3->source, w.s);  // s's one slot: s must drain before it moves on
  RequestId qs = w.ask_seed(w.s, /*newer_than=*/1);
  EXPECT_FALSE(h.reply_to(10, qs)) << "deferred while v1 drains";
  auto u = h.replicate_now(10, w.r, -1, /*newer_than=*/1);
  ASSERT_TRUE(u) << "the rollout's update waits for nothing";
  EXPECT_EQ(u->status, Status::kNotUpdated) << u->detail;
  h.done(12, r3, g3->lease);  // v1 drained from s: it crosses for v2
  auto gs = h.reply_to(10, qs);
  ASSERT_TRUE(gs);
  ASSERT_EQ(gs->status, Status::kOk);
  EXPECT_EQ(gs->version, 2);
  EXPECT_EQ(gs->source, w.t2);
}

}  // namespace
}  // namespace thub::sched::testing
