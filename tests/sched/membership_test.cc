// Membership: heartbeats, deadlines, disconnect, and what a removed client leaves behind.
#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

TEST(MembershipTest, MissedHeartbeatDropsClient) {
  Harness h(Config{1000, 1, true});
  h.connect(1);
  h.connect(2);
  MemberId t = h.open(1, "pol", "t");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  MemberId r = h.open(2, "pol", "r");
  h.advance(600);
  h.send(Heartbeat{2});
  h.advance(600);
  h.send(Tick{});
  auto drops = h.all<Drop>();
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].client, 1u);
  EXPECT_EQ(h.replicate_now(2, r, 1)->status, Status::kVersionLost);
}

// A reader removed for silence may still be reading: the source drains only after one more
// heartbeat_timeout (a Disconnect would end the read at once).
TEST(MembershipTest, SilentReaderKeepsSourceUndrainedForOneTimeout) {
  Harness h(Config{1000, 1, true});
  h.connect(1);
  h.connect(2);
  MemberId t = h.open(1, "pol", "t");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, 1);
  ASSERT_TRUE(g && g->status == Status::kOk);
  RequestId u = h.unpublish(1, t);
  EXPECT_FALSE(h.reply_to(1, u));
  h.advance(600);
  h.send(Heartbeat{1});
  h.advance(600);
  h.send(Heartbeat{1});  // client 2 is silent: dropped now
  ASSERT_EQ(h.all<Drop>().size(), 1u);
  EXPECT_FALSE(h.reply_to(1, u));  // its read may still be going on
  h.advance(600);
  h.send(Heartbeat{1});
  EXPECT_FALSE(h.reply_to(1, u));
  h.advance(600);
  h.send(Heartbeat{1});  // the grace has passed
  ASSERT_TRUE(h.reply_to(1, u));
  EXPECT_EQ(h.reply_to(1, u)->status, Status::kOk);
}

// A chain t -> r1 -> r2 whose middle stops (SIGSTOP): r2 reports r1 failed and waits for
// the trainer's one reader slot, which r1's lease holds. At r1's Drop that read becomes an
// orphan: it still holds off the trainer's drain for one more timeout, but no longer the
// slot, so r2 is granted the trainer at once instead of one timeout later.
TEST(MembershipTest, SilentReadersSlotIsFreedAtTheDropButNotTheDrain) {
  Harness h(Config{1000, 1, true});
  h.connect(1);
  h.connect(2);
  h.connect(3);
  MemberId t = h.open(1, "pol", "t");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  MemberId r1 = h.open(2, "pol", "r1");
  MemberId r2 = h.open(3, "pol", "r2");
  auto g1 = h.replicate_now(2, r1, 1);
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  EXPECT_EQ(g1->source, t);
  auto g2 = h.replicate_now(3, r2, 1);
  ASSERT_TRUE(g2 && g2->status == Status::kOk);
  ASSERT_EQ(g2->source, r1) << "pipeline: r2 chains off the receiving r1";
  h.advance(500);
  h.send(Heartbeat{1});
  RequestId q = h.failed(3, r2, g2->lease);  // r1 stalled
  EXPECT_FALSE(h.reply_to(3, q)) << "the trainer's one reader slot is r1's";
  h.advance(600);
  h.send(Heartbeat{3});  // client 2 (r1) is silent: dropped in this step
  ASSERT_EQ(h.all<Drop>().size(), 1u);
  auto r = h.reply_to(3, q);
  ASSERT_TRUE(r) << "r2 still waits for a slot that only an orphaned read holds";
  EXPECT_EQ(r->status, Status::kOk);
  EXPECT_EQ(r->source, t);
  h.send(TransferDone{3, h.next_req(), r2, r->lease});
  RequestId u = h.unpublish(1, t);  // r2 is done; the orphan may still read
  EXPECT_FALSE(h.reply_to(1, u)) << "the orphaned read must still hold off the trainer's drain";
  h.advance(600);
  h.send(Heartbeat{1});
  h.send(Heartbeat{3});
  EXPECT_FALSE(h.reply_to(1, u));
  h.advance(500);
  h.send(Heartbeat{1});  // the grace has passed: the drain ends
  ASSERT_TRUE(h.reply_to(1, u));
  EXPECT_EQ(h.reply_to(1, u)->status, Status::kOk);
}

TEST(MembershipTest, WaiterGetsVersionLostWhenLastHolderVanishes) {
  Harness h(Config{5'000'000, 1, false});
  h.connect(1);
  MemberId t = h.open(1, "pol", "t");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  h.connect(2);
  MemberId r1 = h.open(2, "pol", "r1");
  h.connect(3);
  MemberId r2 = h.open(3, "pol", "r2");
  auto g = h.replicate_now(2, r1, 1);
  RequestId q = h.replicate(3, r2, 1);
  EXPECT_FALSE(h.reply_to(3, q));
  h.send(Disconnect{1});
  // r1 is still receiving, but from a gone source: it cannot complete, so r2 stops waiting
  EXPECT_EQ(h.reply_to(3, q)->status, Status::kVersionLost);
  RequestId f = h.failed(2, r1, g->lease);
  EXPECT_EQ(h.reply_to(2, f)->status, Status::kVersionLost);
}

TEST(MembershipTest, RequestForOtherClientsMemberIsArg) {
  Harness h;
  h.connect(1);
  h.connect(2);
  MemberId t = h.open(1, "pol", "t");
  EXPECT_EQ(h.publish(2, t, 1), Status::kArg);
}

TEST(MembershipTest, DisconnectReleasesReaderLeases) {
  Harness h;
  h.connect(1);
  MemberId t = h.open(1, "pol", "t");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  h.connect(2);
  MemberId r = h.open(2, "pol", "r");
  h.replicate_now(2, r, 1);
  RequestId u = h.unpublish(1, t);
  EXPECT_FALSE(h.reply_to(1, u));
  h.send(Disconnect{2});
  EXPECT_EQ(h.reply_to(1, u)->status, Status::kOk);
}

// A process that reconnected (client 2, as client 1 before) opens its shards again before the
// registry dropped its old session: the Open waits for that session to go (silent past
// heartbeat_timeout here) and then succeeds, with the same shard.
TEST(MembershipTest, OpenWaitsForTheOldSessionToGo) {
  Harness h(Config{1000, 1, true});
  h.connect(1);
  h.open(1, "pol", "r", 0, 2);
  h.advance(400);
  h.connect(2);
  auto r = h.open_raw(Open{2, 50, "pol", "r", 0, 2});
  EXPECT_FALSE(r);  // waits: client 1 was heard 400 us ago
  h.send(Open{2, 50, "pol", "r", 0, 2});  // asked again by the connection: still one request
  EXPECT_FALSE(h.reply_to(2, 50));
  h.advance(400);
  h.send(Heartbeat{2});
  EXPECT_FALSE(h.reply_to(2, 50));
  h.advance(300);  // client 1 silent for 1,100 us: dropped, and the Open goes on
  h.send(Heartbeat{2});
  ASSERT_EQ(h.all<Drop>().size(), 1u);
  r = h.reply_to(2, 50);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, Status::kOk);
  EXPECT_NE(r->member, 0u);
  // ... and the replica is whole again when its other shard opens (at once: nobody holds it).
  EXPECT_NE(h.open(2, "pol", "r", 1, 2), 0u);
}

// The old session's socket closes (Disconnect) while the Open waits: it goes on at once.
TEST(MembershipTest, OpenGoesOnWhenTheOldSessionDisconnects) {
  Harness h(Config{1000, 1, true});
  h.connect(1);
  h.open(1, "pol", "r");
  h.connect(2);
  EXPECT_FALSE(h.open_raw(Open{2, 50, "pol", "r", 0, 1}));
  h.advance(10);
  h.send(Disconnect{1});
  auto r = h.reply_to(2, 50);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, Status::kOk);
}

// Two live processes claim one shard: the second is refused once the wait (heartbeat_timeout)
// has passed, not before, and the holder keeps its shard.
TEST(MembershipTest, OpenOfALiveSessionsShardIsRefusedAfterTheWait) {
  Harness h(Config{1000, 1, true});
  h.connect(1);
  MemberId held = h.open(1, "pol", "r");
  ASSERT_EQ(h.publish(1, held, 3), Status::kOk);
  h.connect(2);
  EXPECT_FALSE(h.open_raw(Open{2, 50, "pol", "r", 0, 1}));
  for (int i = 0; i < 9; ++i) {
    h.advance(100);
    h.send(Heartbeat{1});
    ASSERT_FALSE(h.reply_to(2, 50)) << "answered after " << (i + 1) * 100 << " us";
  }
  h.advance(100);
  h.send(Heartbeat{1});
  auto r = h.reply_to(2, 50);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, Status::kState);
  EXPECT_NE(r->detail.find("already open"), std::string::npos) << r->detail;
  RequestId u = h.unpublish(1, held);  // still the holder's: it unpublishes, publishes again
  ASSERT_TRUE(h.reply_to(1, u));
  EXPECT_EQ(h.reply_to(1, u)->status, Status::kOk);
  EXPECT_EQ(h.publish(1, held, 4), Status::kOk);
}

// The waiting process goes away: its Open is forgotten (nobody is owed an answer) and the
// shard stays with its holder.
TEST(MembershipTest, WaitingOpenOfAClientThatWentIsForgotten) {
  Harness h(Config{1000, 1, true});
  h.connect(1);
  MemberId held = h.open(1, "pol", "r");
  h.connect(2);
  EXPECT_FALSE(h.open_raw(Open{2, 50, "pol", "r", 0, 1}));
  h.send(Disconnect{2});
  h.advance(2000);
  h.send(Heartbeat{1});
  EXPECT_FALSE(h.reply_to(2, 50));
  EXPECT_EQ(h.publish(1, held, 1), Status::kOk);
}

// Every request is idempotent by (client, req): a retry of a member's request gets the same
// reply from the cache, also after its 15 sibling shards of the same process were answered
// 100 times meanwhile (the cache is kept per member, not just the client's last 64).
TEST(MembershipTest, RetryIsAnsweredFromTheCacheWhateverTheSiblingsDid) {
  Harness h;
  h.connect(1);
  std::vector<MemberId> m;
  for (int s = 0; s < 16; ++s) m.push_back(h.open(1, "pol", "t", s, 16));
  auto first = h.open_raw(Open{1, 500, "pol", "t2", 0, 1});  // a request of no member
  ASSERT_TRUE(first && first->status == Status::kOk);
  h.send(Publish{1, 501, m[0], 1, 7, "d0"});
  ASSERT_TRUE(h.reply_to(1, 501));
  ASSERT_EQ(h.reply_to(1, 501)->status, Status::kOk);
  RequestId q = 1000;
  for (int i = 0; i < 100; ++i)
    for (int s = 1; s < 16; ++s) {
      h.send(Publish{1, ++q, m[s], i, 7, "d"});
      ASSERT_TRUE(h.reply_to(1, q));
      h.send(Unpublish{1, ++q, m[s]});
      ASSERT_TRUE(h.reply_to(1, q));
    }
  // The retry: answered as before (a new Publish would be refused: already holding v1).
  h.send(Publish{1, 501, m[0], 1, 7, "d0"});
  auto again = h.reply_to(1, 501);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, Status::kOk) << again->detail;
  // Past kRecentPerMember of its own answers, an old one is gone: it is a new request then.
  for (int i = 0; i < 16; ++i) {
    Cancel c{};
    c.client = 1;
    c.req = ++q;
    c.member = m[0];
    h.send(c);
  }
  h.send(Publish{1, 501, m[0], 1, 7, "d0"});
  again = h.reply_to(1, 501);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, Status::kState) << again->detail;
}

// A peer cannot pile up waiting Opens: past 1,024 of one client, one is refused at once.
TEST(MembershipTest, WaitingOpensOfOneClientAreBounded) {
  Harness h(Config{1000, 1, true});
  h.connect(1);
  h.open(1, "pol", "r");
  h.connect(2);
  for (RequestId q = 100; q < 100 + 1024; ++q) ASSERT_FALSE(h.open_raw(Open{2, q, "pol", "r", 0, 1})) << q;
  auto r = h.open_raw(Open{2, 5000, "pol", "r", 0, 1});
  ASSERT_TRUE(r) << "the 1,025th waited too";
  EXPECT_EQ(r->status, Status::kState);
}

// quiet_until(): the next time a Tick alone can change anything, so that a server may sleep
// until then (src/registry/server.cc). A Tick just before it changes nothing; at it, the
// deadline fires. (check_invariants(), after every step here and in the simulation, reports
// any step whose deadlines fired before the time promised at the step before.)
TEST(MembershipTest, QuietUntilIsTheNextHeartbeatDeadline) {
  Harness h(Config{1000, 1, true});
  EXPECT_EQ(h.reg().quiet_until(), Registry::kNever);  // nobody to wait for
  h.connect(1);
  h.advance(400);
  h.connect(2);
  EXPECT_EQ(h.reg().quiet_until(), 1001);  // client 1's: silent for more than 1000 us
  h.advance(600);
  h.send(Tick{});
  EXPECT_TRUE(h.all<Drop>().empty());
  EXPECT_EQ(h.reg().quiet_until(), 1001);
  h.advance(1);
  h.send(Tick{});
  ASSERT_EQ(h.all<Drop>().size(), 1u);
  EXPECT_EQ(h.all<Drop>()[0].client, 1u);
  EXPECT_EQ(h.reg().quiet_until(), 1401);  // client 2's now
  h.send(Heartbeat{2});
  EXPECT_EQ(h.reg().quiet_until(), 2002);
}

TEST(MembershipTest, QuietUntilIsNowWhileARequestWaits) {
  Config c;
  c.heartbeat_timeout = 60'000'000;
  c.takeover_grace = 5000;
  Harness h(c);
  h.connect(1);
  h.advance(100);
  MemberId r = h.open(1, "pol", "r");
  EXPECT_EQ(h.reg().quiet_until(), 5100);  // the takeover grace ends 5000 us after the first Open
  h.advance(100);
  RequestId q = h.replicate(1, r, 1);  // nothing holds version 1: it waits out the grace
  EXPECT_FALSE(h.reply_to(1, q));
  EXPECT_EQ(h.reg().quiet_until(), h.now()) << "a deferred request is retried at every tick";
  h.advance(4899);
  h.send(Tick{});
  EXPECT_FALSE(h.reply_to(1, q));
  h.advance(1);  // 5100
  h.send(Tick{});
  auto a = h.reply_to(1, q);
  ASSERT_TRUE(a) << "answered once the grace is over";
  EXPECT_NE(a->status, Status::kOk);
  EXPECT_EQ(h.reg().quiet_until(), 60'000'201);  // client 1's heartbeat deadline alone (heard at 200)
}

}  // namespace
}  // namespace thub::sched::testing
