// Issue 19 item 2: a lease that makes no progress ends (Config::lease_progress_timeout). A
// reader that takes a read and never reports more bytes is dropped like a silent client (its
// reads end at once), so the source's unpublish waits for it that long at most; a reader
// that reports progress keeps its read, and a report of no more bytes is no progress.
#include <gtest/gtest.h>

#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

constexpr Time kTimeout = 2'000'000;

Config bounded() {
  Config c;
  c.lease_progress_timeout = kTimeout;
  c.heartbeat_timeout = 60'000'000;  // heartbeats are not what ends anything here
  return c;
}

struct Granted {
  Harness h{bounded()};
  MemberId t = 0, r = 0;
  LeaseId lease = 0;
  Granted() {
    h.connect(1);
    h.connect(2);
    t = h.open(1, "m", "trainer");
    EXPECT_EQ(h.publish(1, t, 1), Status::kOk);
    r = h.open(2, "m", "reader");
    auto g = h.replicate_now(2, r, -1);
    EXPECT_TRUE(g && g->status == Status::kOk);
    lease = g ? g->lease : 0;
  }
  Status progress(uint64_t bytes) {
    RequestId q = h.next_req();
    h.send(TransferProgress{2, q, r, lease, bytes, "socket"});
    auto a = h.reply_to(2, q);
    EXPECT_TRUE(a);
    return a ? a->status : Status::kInternal;
  }
  bool dropped() const { return !h.all<Drop>().empty() && h.all<Drop>().front().client == 2; }
};

TEST(LeaseProgressTest, AReaderThatNeverReadsIsDroppedAndTheUnpublishDrains) {
  Granted g;
  RequestId u = g.h.unpublish(1, g.t);
  EXPECT_FALSE(g.h.reply_to(1, u)) << "the unpublish did not wait for the reader";
  g.h.advance(kTimeout - 1);
  g.h.send(Heartbeat{2});  // alive, but not reading
  g.h.send(Heartbeat{1});
  EXPECT_FALSE(g.h.reply_to(1, u));
  EXPECT_FALSE(g.dropped());
  g.h.advance(1);
  g.h.send(Heartbeat{1});
  EXPECT_TRUE(g.dropped()) << "a read without progress for the timeout was kept";
  auto done = g.h.reply_to(1, u);
  ASSERT_TRUE(done) << "the unpublish still waits for a dropped reader";
  EXPECT_EQ(done->status, Status::kOk);
}

TEST(LeaseProgressTest, ProgressKeepsTheRead) {
  Granted g;
  for (int i = 1; i <= 5; ++i) {
    g.h.advance(kTimeout - 1);
    ASSERT_EQ(g.progress(1000u * i), Status::kOk);
    EXPECT_FALSE(g.dropped()) << "dropped a reader that reported progress, report " << i;
  }
  RequestId d = g.h.done(2, g.r, g.lease);
  auto a = g.h.reply_to(2, d);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, Status::kOk);
}

// The path a reader names in its reports is what the registry's view shows for the read
// (tensorhub-info); a report that names none keeps the last one.
TEST(LeaseProgressTest, TheReadPathAReaderReportsIsShownForItsRead) {
  Granted g;
  auto path_shown = [&g] {
    Snapshot s = g.h.reg().snapshot();
    return s.transfers.size() == 1 ? s.transfers[0].path : std::string("(no transfer)");
  };
  EXPECT_EQ(path_shown(), "") << "a path shown before any report";
  EXPECT_EQ(g.progress(4096), Status::kOk);
  EXPECT_EQ(path_shown(), "socket");
  RequestId q = g.h.next_req();
  g.h.send(TransferProgress{2, q, g.r, g.lease, 8192, ""});
  ASSERT_TRUE(g.h.reply_to(2, q));
  EXPECT_EQ(path_shown(), "socket");
}

TEST(LeaseProgressTest, AReportOfNoMoreBytesIsNoProgress) {
  Granted g;
  ASSERT_EQ(g.progress(500), Status::kOk);
  g.h.advance(kTimeout / 2);
  ASSERT_EQ(g.progress(500), Status::kOk);  // the same bytes again
  g.h.advance(kTimeout / 2);
  g.h.send(Tick{});
  EXPECT_TRUE(g.dropped()) << "reports of the same bytes kept a read alive";
}

TEST(LeaseProgressTest, AReportOnAnEndedReadIsAStateError) {
  Granted g;
  RequestId d = g.h.done(2, g.r, g.lease);
  ASSERT_TRUE(g.h.reply_to(2, d));
  EXPECT_EQ(g.progress(10), Status::kState);
}

TEST(LeaseProgressTest, NoBoundWhenTheTimeoutIsZero) {
  Config c = bounded();
  c.lease_progress_timeout = 0;
  Harness h(c);
  h.connect(1);
  h.connect(2);
  MemberId t = h.open(1, "m", "trainer");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  MemberId r = h.open(2, "m", "reader");
  ASSERT_TRUE(h.replicate_now(2, r, -1));
  h.advance(30 * kTimeout);
  h.send(Heartbeat{1});
  h.send(Heartbeat{2});
  EXPECT_TRUE(h.all<Drop>().empty());
}

// The read's progress deadline is the registry's next deadline (quiet_until(): a server may
// sleep until then), and it is kept: a Tick just before it ends nothing, at it the reader goes.
TEST(LeaseProgressTest, TheProgressDeadlineIsWhenTheRegistryMayNextAct) {
  Granted g;  // granted at 0; heartbeats due at 60 s
  EXPECT_EQ(g.h.reg().quiet_until(), kTimeout);
  g.h.advance(kTimeout - 1);
  g.h.send(Tick{});
  EXPECT_FALSE(g.dropped());
  EXPECT_EQ(g.h.reg().quiet_until(), kTimeout);
  g.h.advance(1);
  g.h.send(Tick{});
  EXPECT_TRUE(g.dropped());
}

}  // namespace
}  // namespace thub::sched::testing
