// Seeding (Config::seeding, issue 22): a version's shard crosses into a datacenter once. The
// first replica of a datacenter to ask reads from the other datacenter (the seeder); every
// other replica there reads inside it, behind the seeder, even while a holder elsewhere is
// free. Sources have room for 4 readers here, so that "free elsewhere" is always true and
// only seeding keeps a request inside its datacenter.
#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

Config roomy(bool pipeline, bool seeding = true) {
  Config c{5'000'000, 4, pipeline};
  c.seeding = seeding;
  return c;
}

// The trainer (client 1, member t) in "a" publishes v1; rollouts of "b" are clients 10, 11, ...
struct TwoDcs {
  explicit TwoDcs(Config cfg) : h(cfg) {
    h.connect(1, "a");
    t = h.open(1, "pol", "t");
    EXPECT_EQ(h.publish(1, t, 1), Status::kOk);
  }
  MemberId rollout(ClientId c, const std::string& dc = "b") {
    h.connect(c, dc);
    return h.open(c, "pol", "r" + std::to_string(c));
  }
  Harness h;
  MemberId t = 0;
};

TEST(SeedingTest, WithoutPipeliningTheOthersWaitForTheSeederNotForTheOtherDatacenter) {
  TwoDcs w(roomy(/*pipeline=*/false));
  MemberId r1 = w.rollout(10), r2 = w.rollout(11), r3 = w.rollout(12);
  auto g1 = w.h.replicate_now(10, r1, 1);
  ASSERT_TRUE(g1);
  EXPECT_EQ(g1->source, w.t);  // the seeder
  RequestId q2 = w.h.replicate(11, r2, 1);
  EXPECT_FALSE(w.h.reply_to(11, q2));  // t has 3 free slots, but b receives v1 already
  RequestId q3 = w.h.replicate(12, r3, -1);
  EXPECT_FALSE(w.h.reply_to(12, q3));
  w.h.done(10, r1, g1->lease);
  auto g2 = w.h.reply_to(11, q2), g3 = w.h.reply_to(12, q3);
  ASSERT_TRUE(g2 && g3);
  EXPECT_EQ(g2->status, Status::kOk);
  EXPECT_EQ(g2->source, r1);
  EXPECT_EQ(g3->version, 1);
  EXPECT_EQ(g3->source, r1);
}

TEST(SeedingTest, SwitchedOffEveryReplicaReadsTheNearestFreeHolder) {
  TwoDcs w(roomy(/*pipeline=*/false, /*seeding=*/false));
  MemberId r1 = w.rollout(10), r2 = w.rollout(11);
  auto g1 = w.h.replicate_now(10, r1, 1);
  auto g2 = w.h.replicate_now(11, r2, 1);
  ASSERT_TRUE(g1 && g2);
  EXPECT_EQ(g1->source, w.t);
  EXPECT_EQ(g2->source, w.t);  // crosses a second time
}

TEST(SeedingTest, WithPipeliningTheOthersReadBehindTheSeeder) {
  TwoDcs w(roomy(/*pipeline=*/true));
  MemberId r[4];
  for (int i = 0; i < 4; ++i) r[i] = w.rollout(10 + i);
  std::optional<Reply> g[4];
  for (int i = 0; i < 4; ++i) {
    g[i] = w.h.replicate_now(10 + i, r[i], -1);
    ASSERT_TRUE(g[i]);
    ASSERT_EQ(g[i]->status, Status::kOk);
  }
  EXPECT_EQ(g[0]->source, w.t);
  for (int i = 1; i < 4; ++i) {
    EXPECT_NE(g[i]->source, w.t) << "rollout " << i << " crossed too";
    EXPECT_TRUE(g[i]->source_partial);
  }
  // The trainer's own datacenter is not seeded from b: a rollout of a reads the trainer.
  MemberId ra = w.rollout(20, "a");
  auto ga = w.h.replicate_now(20, ra, 1);
  ASSERT_TRUE(ga);
  EXPECT_EQ(ga->source, w.t);
}

// seed_takes_slot=false: a seed holds no reader slot of its source: with one reader per
// source, the trainer's own datacenter does not wait while b's seeder reads at the WAN's
// pace, and a second reader of a still waits for the trainer's one slot.
TEST(SeedingTest, ASeedTakesNoReaderSlotOfItsSourceWhenSoConfigured) {
  Config c{5'000'000, 1, true};
  c.seed_takes_slot = false;
  TwoDcs w(c);
  MemberId rb = w.rollout(10), ra = w.rollout(20, "a"), ra2 = w.rollout(21, "a");
  auto gb = w.h.replicate_now(10, rb, 1);
  ASSERT_TRUE(gb);
  EXPECT_EQ(gb->source, w.t);
  auto ga = w.h.replicate_now(20, ra, 1);
  ASSERT_TRUE(ga);
  EXPECT_EQ(ga->source, w.t);
  auto ga2 = w.h.replicate_now(21, ra2, 1);
  ASSERT_TRUE(ga2);
  EXPECT_EQ(ga2->source, ra);  // the trainer's slot is ra's: behind ra, in a
}

TEST(SeedingTest, ASeedTakesAReaderSlotByDefault) {
  TwoDcs w(Config{5'000'000, 1, true});
  MemberId rb = w.rollout(10), ra = w.rollout(20, "a");
  auto gb = w.h.replicate_now(10, rb, 1);
  ASSERT_TRUE(gb);
  EXPECT_EQ(gb->source, w.t);
  RequestId qa = w.h.replicate(20, ra, 1);
  EXPECT_FALSE(w.h.reply_to(20, qa));  // the trainer's one slot is the seed's; a has no other holder
  w.h.done(10, rb, gb->lease);
  auto ga = w.h.reply_to(20, qa);
  ASSERT_TRUE(ga);
  EXPECT_EQ(ga->source, w.t);
}

// A seeder that dies mid-seed: its reader resumes from the seeder's own source (the splice),
// so it is the datacenter's seeder now, and the next reader of b reads behind it.
TEST(SeedingTest, ADeadSeedersReaderTakesItsPlace) {
  TwoDcs w(roomy(/*pipeline=*/true));
  MemberId r1 = w.rollout(10), r2 = w.rollout(11), r3 = w.rollout(12);
  auto g1 = w.h.replicate_now(10, r1, 1);
  auto g2 = w.h.replicate_now(11, r2, 1);
  ASSERT_TRUE(g1 && g2);
  ASSERT_EQ(g2->source, r1);
  w.h.send(Disconnect{10});
  RequestId f = w.h.failed(11, r2, g2->lease, /*chunks=*/5);
  auto rg = w.h.reply_to(11, f);
  ASSERT_TRUE(rg);
  ASSERT_EQ(rg->status, Status::kOk);
  EXPECT_EQ(rg->source, w.t);  // the new seeder, from what it holds
  auto g3 = w.h.replicate_now(12, r3, 1);
  ASSERT_TRUE(g3);
  EXPECT_EQ(g3->source, r2);
}

// seed_takes_slot=false: a dead seeder's read across held no slot of its source, so none is
// handed to the reader behind it (the splice). It used to be: the trainer, whose one slot a
// reader of a had taken meanwhile, then counted two readers (the simulation's invariant
// check found it, seed 1823 of the soak with seed buffers). The reader's regrant is a seed
// across again.
TEST(SeedingTest, ADeadSeedWithoutASlotHandsNoSlotOn) {
  Config c{5'000'000, 1, true};
  c.seed_takes_slot = false;
  TwoDcs w(c);
  MemberId r1 = w.rollout(10), r2 = w.rollout(11), ra = w.rollout(20, "a");
  auto g1 = w.h.replicate_now(10, r1, 1);
  ASSERT_TRUE(g1);
  ASSERT_EQ(g1->source, w.t);  // the seed: no slot of t
  auto ga = w.h.replicate_now(20, ra, 1);
  ASSERT_TRUE(ga);
  ASSERT_EQ(ga->source, w.t);  // t's one slot
  auto g2 = w.h.replicate_now(11, r2, 1);
  ASSERT_TRUE(g2);
  ASSERT_EQ(g2->source, r1);
  w.h.send(Disconnect{10});  // (Harness::send checks the registry's invariants: load <= max)
  RequestId f = w.h.failed(11, r2, g2->lease, /*chunks=*/5);
  auto rg = w.h.reply_to(11, f);
  ASSERT_TRUE(rg);
  EXPECT_EQ(rg->status, Status::kOk) << rg->detail;
  EXPECT_EQ(rg->source, ra) << "t's one slot is ra's: ra, in a and free, is the nearest holder";
}

// A seeder that stalls: the reader behind it reports it, and that reader (which may not read
// it again in this transfer) crosses itself; the stalled one no longer keeps b waiting for it.
TEST(SeedingTest, AReaderThatReportedTheSeederCrossesItself) {
  TwoDcs w(roomy(/*pipeline=*/true));
  MemberId r1 = w.rollout(10), r2 = w.rollout(11);
  auto g1 = w.h.replicate_now(10, r1, 1);
  auto g2 = w.h.replicate_now(11, r2, 1);
  ASSERT_TRUE(g1 && g2);
  ASSERT_EQ(g2->source, r1);
  RequestId f = w.h.failed(11, r2, g2->lease, 3);
  auto rg = w.h.reply_to(11, f);
  ASSERT_TRUE(rg);
  ASSERT_EQ(rg->status, Status::kOk);
  EXPECT_EQ(rg->source, w.t);
}

// A seeder whose own source fails while another replica of b reads behind it: the only
// holder of b reads from it (its chain leads back to the seeder), so the seeder is not held
// waiting for it and crosses again, to another holder.
TEST(SeedingTest, ASeederIsNotHeldByAReaderBehindIt) {
  TwoDcs w(roomy(/*pipeline=*/true));
  w.h.connect(2, "a");
  MemberId t2 = w.h.open(2, "pol", "t2");
  ASSERT_EQ(w.h.publish(2, t2, 1), Status::kOk);
  MemberId r1 = w.rollout(10), r2 = w.rollout(11);
  auto g1 = w.h.replicate_now(10, r1, 1);
  auto g2 = w.h.replicate_now(11, r2, 1);
  ASSERT_TRUE(g1 && g2);
  ASSERT_EQ(g1->source, w.t);
  ASSERT_EQ(g2->source, r1);
  RequestId f = w.h.failed(10, r1, g1->lease, 2);
  auto rg = w.h.reply_to(10, f);
  ASSERT_TRUE(rg);
  ASSERT_EQ(rg->status, Status::kOk);
  EXPECT_EQ(rg->source, t2);
}

// Replicas of two shards: a round reads every shard from one replica. The second replica of
// b asks while the first one's round has read one shard and kept a slot for the other: it
// waits (the trainer has free slots), and reads both shards from the first once both read.
TEST(SeedingTest, ARoundWaitsForTheSeedingRoundOfItsDatacenter) {
  Harness h(roomy(/*pipeline=*/true));
  h.connect(1, "a");
  MemberId t0 = h.open(1, "pol", "t", 0, 2), t1 = h.open(1, "pol", "t", 1, 2);
  ASSERT_EQ(h.publish(1, t0, 1), Status::kOk);
  ASSERT_EQ(h.publish(1, t1, 1), Status::kOk);
  h.connect(10, "b");
  h.connect(11, "b");
  MemberId a0 = h.open(10, "pol", "ra", 0, 2), a1 = h.open(10, "pol", "ra", 1, 2);
  MemberId b0 = h.open(11, "pol", "rb", 0, 2), b1 = h.open(11, "pol", "rb", 1, 2);
  auto ga0 = h.replicate_now(10, a0, 1);
  ASSERT_TRUE(ga0);
  EXPECT_EQ(ga0->source, t0);
  RequestId qb0 = h.replicate(11, b0, 1);
  EXPECT_FALSE(h.reply_to(11, qb0));  // ra's shard 1 has not asked, but its round keeps a slot
  auto ga1 = h.replicate_now(10, a1, 1);
  ASSERT_TRUE(ga1);
  EXPECT_EQ(ga1->source, t1);
  auto gb0 = h.reply_to(11, qb0);  // ra now reads both shards: rb reads behind it
  ASSERT_TRUE(gb0);
  EXPECT_EQ(gb0->source, a0);
  auto gb1 = h.replicate_now(11, b1, 1);
  ASSERT_TRUE(gb1);
  EXPECT_EQ(gb1->source, a1);
}

// ---- smart skipping ------------------------------------------------------------------

// The trainer of a (client 1) holds v1 and a second trainer member (client 2) v2; r1 of b
// seeds v1 (granted, reading); the others ask now.
struct Overtaken : TwoDcs {
  explicit Overtaken(Config cfg) : TwoDcs(cfg) {
    r1 = rollout(10);
    auto g = h.replicate_now(10, r1, 1);
    EXPECT_TRUE(g && g->source == t);
    seed_lease = g ? g->lease : 0;
    h.connect(2, "a");
    t2 = h.open(2, "pol", "t2");
    EXPECT_EQ(h.publish(2, t2, 2), Status::kOk);
  }
  MemberId r1 = 0, t2 = 0;
  LeaseId seed_lease = 0;
};

TEST(SmartSkippingTest, ALatestReplicateTakesTheVersionItsDatacenterReceives) {
  Overtaken w(roomy(/*pipeline=*/true));
  MemberId r2 = w.rollout(11), r3 = w.rollout(12), ra = w.rollout(20, "a");
  auto g2 = w.h.replicate_now(11, r2, -1);
  ASSERT_TRUE(g2);
  EXPECT_EQ(g2->version, 1);  // not v2 across: v1 is on its way into b
  EXPECT_EQ(g2->source, w.r1);
  auto g3 = w.h.replicate_now(12, r3, 2);  // an absolute version is what was asked
  ASSERT_TRUE(g3);
  EXPECT_EQ(g3->version, 2);
  EXPECT_EQ(g3->source, w.t2);
  auto ga = w.h.replicate_now(20, ra, -1);  // a has v2: nothing to skip there
  ASSERT_TRUE(ga);
  EXPECT_EQ(ga->version, 2);
}

TEST(SmartSkippingTest, SwitchedOffALatestReplicateCrossesForTheNewest) {
  Config c = roomy(/*pipeline=*/true);
  c.skipping = false;
  Overtaken w(c);
  MemberId r2 = w.rollout(11);
  auto g2 = w.h.replicate_now(11, r2, -1);
  ASSERT_TRUE(g2);
  EXPECT_EQ(g2->version, 2);
  EXPECT_EQ(g2->source, w.t2);
}

// An update in place: THUB_NOT_UPDATED while v1 is on its way into b and b holds nothing
// newer than the updater; v1 once b holds it whole; then, with nothing on its way, the
// updater crosses for v2 itself (the seeder of v2), and the next updater takes v1 (whole in
// b) instead of waiting for v2 at the WAN's pace, then keeps v1 until v2 is whole in b.
TEST(SmartSkippingTest, AnUpdateWaitsForItsDatacenterAndThenSeedsTheNext) {
  Overtaken w(roomy(/*pipeline=*/true));
  MemberId r2 = w.rollout(11), r3 = w.rollout(12);
  ASSERT_EQ(w.h.publish(11, r2, 0), Status::kOk);  // both hold v0
  ASSERT_EQ(w.h.publish(12, r3, 0), Status::kOk);
  auto u = w.h.replicate_now(11, r2, -1, /*newer_than=*/0);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->status, Status::kNotUpdated);
  w.h.done(10, w.r1, w.seed_lease);  // v1 is whole in b
  auto u1 = w.h.replicate_now(11, r2, -1, 0);
  ASSERT_TRUE(u1);
  ASSERT_EQ(u1->status, Status::kOk);
  EXPECT_EQ(u1->version, 1);
  EXPECT_EQ(u1->source, w.r1);
  w.h.done(11, r2, u1->lease);
  auto u2 = w.h.replicate_now(11, r2, -1, /*newer_than=*/1);
  ASSERT_TRUE(u2);
  ASSERT_EQ(u2->status, Status::kOk);
  EXPECT_EQ(u2->version, 2);
  EXPECT_EQ(u2->source, w.t2);  // the seeder of v2
  auto u3 = w.h.replicate_now(12, r3, -1, /*newer_than=*/0);
  ASSERT_TRUE(u3);
  ASSERT_EQ(u3->status, Status::kOk);
  EXPECT_EQ(u3->version, 1);  // v2 is on its way into b: not at the WAN's pace, v1 is whole in b
  EXPECT_EQ(u3->source, w.r1);
  w.h.done(12, r3, u3->lease);
  auto u4 = w.h.replicate_now(12, r3, -1, /*newer_than=*/1);
  ASSERT_TRUE(u4);
  EXPECT_EQ(u4->status, Status::kNotUpdated);  // nothing newer whole in b, v2 on its way
  // A replicate (nothing held) does read behind the seeder.
  MemberId r4 = w.rollout(13);
  auto g4 = w.h.replicate_now(13, r4, -1);
  ASSERT_TRUE(g4);
  EXPECT_EQ(g4->version, 2);
  EXPECT_EQ(g4->source, r2);
}

// The trainer's datacenter: ra's update in place fixes v1 while the seed of b holds the
// trainer's one slot; the trainer moves on (t2 publishes v2, t unpublishes v1 and drains behind
// the seed), so that a serves v1 no more. ra takes v2 from t2 inside rather than v1 back across
// the WAN from the rollout of b (which could not update in place until that read ended).
TEST(SmartSkippingTest, AnUpdateWhoseVersionLeftItsDatacenterTakesTheNewerOneThere) {
  for (bool skipping : {true, false}) {
    SCOPED_TRACE(skipping ? "smart skipping" : "without smart skipping");
    Config c{5'000'000, 1, true};
    c.skipping = skipping;
    TwoDcs w(c);
    MemberId rb = w.rollout(10), ra = w.rollout(20, "a");
    auto gb = w.h.replicate_now(10, rb, 1);
    ASSERT_TRUE(gb);
    EXPECT_EQ(gb->source, w.t);  // the seed of b, in the trainer's one slot
    ASSERT_EQ(w.h.publish(20, ra, 0), Status::kOk);
    RequestId qa = w.h.replicate(20, ra, -1, /*newer_than=*/0);
    EXPECT_FALSE(w.h.reply_to(20, qa));  // v1 fixed; waits for the trainer's slot
    w.h.connect(2, "a");
    MemberId t2 = w.h.open(2, "pol", "t2");
    ASSERT_EQ(w.h.publish(2, t2, 2), Status::kOk);
    RequestId qu = w.h.unpublish(1, w.t);
    EXPECT_FALSE(w.h.reply_to(1, qu));  // drains: the seed reads v1
    // At once: v1 is no longer served in a.
    auto ga = w.h.reply_to(20, qa);
    ASSERT_TRUE(ga);
    ASSERT_EQ(ga->status, Status::kOk);
    if (skipping) {  // v2 is, and t2 is free
      EXPECT_EQ(ga->version, 2);
      EXPECT_EQ(ga->source, t2);
    } else {  // the version stays fixed: read back across, behind the seed
      EXPECT_EQ(ga->version, 1);
      EXPECT_EQ(ga->source, rb);
    }
    w.h.done(10, rb, gb->lease);
    EXPECT_TRUE(w.h.reply_to(1, qu));
  }
}

}  // namespace
}  // namespace thub::sched::testing
