// The splice: when a member in the middle of a chain (reading from P, read by R) goes away,
// P's freed reader slot is held for R's regrant, so that R continues from P, which is ahead
// of it, and a newcomer holding nothing cannot take the slot first (docs/scale.md, finding
// 4). The slot counts in load(P) until R's SourceFailed takes it, or R's read ends another
// way, or R or P goes. check_invariants() (run after every step by the harness) checks that
// load() counts exactly the leases, reserved slots and held slots.
#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

// t (client 1) holds v1; m (client 2) reads t; r (client 3) reads m; j (client 4) is a
// newcomer; x (client 5) spare. max_readers_per_source = 1, pipelining: one chain.
struct Chain {
  Harness h;
  MemberId t, m, r, j, x;
  LeaseId m_lease = 0, r_lease = 0;
  explicit Chain(Config cfg = Config{}) : h(cfg) {
    for (ClientId c = 1; c <= 5; ++c) h.connect(c);
    t = h.open(1, "pol", "t");
    m = h.open(2, "pol", "m");
    r = h.open(3, "pol", "r");
    j = h.open(4, "pol", "j");
    x = h.open(5, "pol", "x");
    EXPECT_EQ(h.publish(1, t, 1), Status::kOk);
    auto gm = h.replicate_now(2, m, 1);
    EXPECT_TRUE(gm && gm->source == t);
    auto gr = h.replicate_now(3, r, 1);
    EXPECT_TRUE(gr && gr->source == m && gr->source_partial);
    m_lease = gm ? gm->lease : 0;
    r_lease = gr ? gr->lease : 0;
  }
  // j asks for v1 while t's slot is held: deferred (t is busy, nobody else serves).
  RequestId newcomer_waits() {
    RequestId q = h.replicate(4, j, 1);
    EXPECT_FALSE(h.reply_to(4, q)) << "t's slot is held for r: the newcomer may not take it";
    return q;
  }
};

TEST(SpliceTest, ReaderOfAGoneMemberContinuesFromItsSource) {
  Chain c;
  Harness& h = c.h;
  h.send(Disconnect{2});  // the registry hears of m's death before r reports it
  RequestId qj = c.newcomer_waits();
  auto g = h.reply_to(3, h.failed(3, c.r, c.r_lease, 4096));
  ASSERT_TRUE(g && g->status == Status::kOk);
  EXPECT_EQ(g->source, c.t) << "r continues from t, ahead of it, not from the newcomer";
  EXPECT_FALSE(g->source_partial);
  auto gj = h.reply_to(4, qj);  // the same step: t is r's now, r is the tail
  ASSERT_TRUE(gj && gj->status == Status::kOk);
  EXPECT_EQ(gj->source, c.r);
}

TEST(SpliceTest, HeldSlotIsReleasedWhenTheReaderFinishes) {
  Chain c;
  Harness& h = c.h;
  h.send(Disconnect{2});
  RequestId qj = c.newcomer_waits();
  RequestId d = h.done(3, c.r, c.r_lease);  // r had all it needed: its read ends
  ASSERT_TRUE(h.reply_to(3, d));
  auto gj = h.reply_to(4, qj);
  ASSERT_TRUE(gj && gj->status == Status::kOk);
  EXPECT_EQ(gj->source, c.t) << "the slot went back to t with r's read";
}

TEST(SpliceTest, HeldSlotIsReleasedWhenTheReaderLeaves) {
  Chain c;
  Harness& h = c.h;
  h.send(Disconnect{2});
  RequestId qj = c.newcomer_waits();
  h.close(3, c.r);
  auto gj = h.reply_to(4, qj);
  ASSERT_TRUE(gj && gj->status == Status::kOk);
  EXPECT_EQ(gj->source, c.t);
}

TEST(SpliceTest, HeldSlotIsReleasedWhenTheReaderUnpublishes) {
  Chain c;
  Harness& h = c.h;
  h.send(Disconnect{2});
  RequestId qj = c.newcomer_waits();
  h.unpublish(3, c.r);
  auto gj = h.reply_to(4, qj);
  ASSERT_TRUE(gj && gj->status == Status::kOk);
  EXPECT_EQ(gj->source, c.t);
}

TEST(SpliceTest, HeldSlotIsReleasedWhenTheReaderIsDroppedForSilence) {
  Chain c;
  Harness& h = c.h;
  h.send(Disconnect{2});
  RequestId qj = c.newcomer_waits();
  // Everyone but r's client keeps talking; r's is dropped past the heartbeat timeout.
  for (int i = 0; i < 5; ++i) {
    h.advance(1'000'000);
    for (ClientId cl : {1, 4, 5}) h.send(Heartbeat{cl});
  }
  h.advance(1'000'000);
  h.send(Heartbeat{4});  // 6 s: client 3 (silent since 0) is dropped in this step
  ASSERT_FALSE(h.all<Drop>().empty());
  auto gj = h.reply_to(4, qj);
  ASSERT_TRUE(gj && gj->status == Status::kOk);
  EXPECT_EQ(gj->source, c.t);
}

TEST(SpliceTest, NoSpliceWhenTheReaderReportedFirst) {
  Chain c;
  Harness& h = c.h;
  RequestId q = h.failed(3, c.r, c.r_lease, 4096);  // r saw m die before the registry did
  EXPECT_FALSE(h.reply_to(3, q)) << "t is busy with m, and r does not take m again";
  h.send(Disconnect{2});  // t's slot is free: r's deferred regrant takes it in this step
  auto g = h.reply_to(3, q);
  ASSERT_TRUE(g && g->status == Status::kOk);
  EXPECT_EQ(g->source, c.t);
}

// t -> m -> r -> x: r goes (m's slot held for x), then m goes too before x reports: the
// slot x holds moves up to t, m's source.
TEST(SpliceTest, HeldSlotMovesUpWhenTheSourceGoesToo) {
  Chain c;
  Harness& h = c.h;
  auto gx = h.replicate_now(5, c.x, 1);
  ASSERT_TRUE(gx && gx->source == c.r);
  h.send(Disconnect{3});
  h.send(Disconnect{2});
  RequestId qj = c.newcomer_waits();
  auto g = h.reply_to(5, h.failed(5, c.x, gx->lease, 100));
  ASSERT_TRUE(g && g->status == Status::kOk);
  EXPECT_EQ(g->source, c.t);
  auto gj = h.reply_to(4, qj);
  ASSERT_TRUE(gj && gj->status == Status::kOk);
  EXPECT_EQ(gj->source, c.x);
}

TEST(SpliceTest, HeldSlotIsReleasedWhenTheSourceGoes) {
  Chain c;
  Harness& h = c.h;
  MemberId t2 = h.open(4, "pol", "t2");  // a second complete holder, on the newcomer's client
  ASSERT_EQ(h.publish(4, t2, 1), Status::kOk);
  h.send(Disconnect{2});  // t's slot held for r
  h.send(Disconnect{1});  // t goes too: nothing above it to move to
  auto g = h.reply_to(3, h.failed(3, c.r, c.r_lease, 4096));
  ASSERT_TRUE(g && g->status == Status::kOk);
  EXPECT_EQ(g->source, t2);
}

// With two readers per source only one slot is freed: it is held for the oldest reader,
// and the other slot stays free for whoever comes first. (The source choice ranks by load,
// so a member gets a second reader only once every candidate has one: here m's readers are
// a and d because the members in between are busy reading from each other.)
TEST(SpliceTest, OneSlotForTheOldestReaderWithTwoReadersPerSource) {
  Config cfg;
  cfg.max_readers_per_source = 2;
  Harness h(cfg);
  for (ClientId c = 1; c <= 6; ++c) h.connect(c);
  MemberId t = h.open(1, "pol", "t"), m = h.open(2, "pol", "m"), a = h.open(3, "pol", "a");
  MemberId d = h.open(4, "pol", "d"), j = h.open(5, "pol", "j"), k = h.open(6, "pol", "k");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  auto gm = h.replicate_now(2, m, 1);
  ASSERT_TRUE(gm && gm->source == t);
  auto ga = h.replicate_now(3, a, 1);  // m (load 0) before t (load 1)
  ASSERT_TRUE(ga && ga->source == m);
  auto gd = h.replicate_now(4, d, 1);  // a (load 0) first
  ASSERT_TRUE(gd && gd->source == a);
  h.send(Disconnect{2});  // t: one slot held for a, one free
  auto gj = h.replicate_now(5, j, 1);
  ASSERT_TRUE(gj && gj->status == Status::kOk);
  EXPECT_EQ(gj->source, t) << "the slot not held is free";
  auto gk = h.replicate_now(6, k, 1);
  ASSERT_TRUE(gk && gk->status == Status::kOk);
  EXPECT_NE(gk->source, t) << "t's other slot is held for a";
  auto ra = h.reply_to(3, h.failed(3, a, ga->lease, 10));
  ASSERT_TRUE(ra && ra->status == Status::kOk);
  EXPECT_EQ(ra->source, t) << "a's held slot: t serves j and a";
}

}  // namespace
}  // namespace thub::sched::testing
