// A failed source is judged, not rumoured: one reader's SourceFailed keeps that reader away
// from the source for the rest of its transfer, but hides it from everybody only once the
// failure is confirmed: by failure_reports distinct reader clients, by the source's client
// being silent for failure_silence, or by the source going away.
#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

// Two complete holders of v1: a (client 1) and b (client 2); readers are clients 3 to 6.
// Without pipelining, so that a reader is not itself a source for the next one.
struct TwoHolders {
  Harness h;
  MemberId a, b;
  explicit TwoHolders(Config cfg = Config{5'000'000, 1, false}) : h(cfg) {
    for (ClientId c = 1; c <= 6; ++c) h.connect(c);
    a = h.open(1, "pol", "a");
    b = h.open(2, "pol", "b");
    EXPECT_EQ(h.publish(1, a, 1), Status::kOk);
    EXPECT_EQ(h.publish(2, b, 1), Status::kOk);
  }
  // Opens a reader on client c, replicates v1 and returns the grant.
  Reply read(ClientId c, const std::string& name, MemberId* m) {
    *m = h.open(c, "pol", name);
    auto g = h.replicate_now(c, *m, 1);
    EXPECT_TRUE(g && g->status == Status::kOk);
    return g ? *g : Reply{};
  }
};

TEST(SourceFailureTest, OneReadersReportDoesNotHideAHealthySource) {
  TwoHolders s;
  Harness& h = s.h;
  MemberId r1, r2;
  Reply g = s.read(3, "r1", &r1);
  ASSERT_EQ(g.source, s.a);
  auto again = h.reply_to(3, h.failed(3, r1, g.lease, 10));  // r1's own link to a is broken
  ASSERT_TRUE(again && again->status == Status::kOk);
  EXPECT_EQ(again->source, s.b) << "the reporter itself stops using a at once";
  Reply g2 = s.read(4, "r2", &r2);
  EXPECT_EQ(g2.source, s.a) << "a was reported by one reader only: it keeps serving the others";
  // a's buffers were never hidden: its owner may unpublish and is acknowledged after r2.
  RequestId u = h.unpublish(1, s.a);
  EXPECT_FALSE(h.reply_to(1, u));
  h.done(4, r2, g2.lease);
  ASSERT_TRUE(h.reply_to(1, u));
  EXPECT_EQ(h.reply_to(1, u)->status, Status::kOk);
}

TEST(SourceFailureTest, ReporterWaitsForAnotherSourceRatherThanTheReportedOne) {
  TwoHolders s;
  Harness& h = s.h;
  MemberId r1, r2;
  Reply g1 = s.read(3, "r1", &r1);  // a
  Reply g2 = s.read(4, "r2", &r2);  // b
  ASSERT_EQ(g1.source, s.a);
  ASSERT_EQ(g2.source, s.b);
  RequestId q = h.failed(3, r1, g1.lease, 10);
  EXPECT_FALSE(h.reply_to(3, q)) << "a is idle but r1 reported it: r1 waits for b";
  h.done(4, r2, g2.lease);
  auto g = h.reply_to(3, q);
  ASSERT_TRUE(g && g->status == Status::kOk);
  EXPECT_EQ(g->source, s.b);
}

TEST(SourceFailureTest, SecondReaderConfirmsTheFailure) {
  TwoHolders s;
  Harness& h = s.h;
  MemberId r1, r2, r3;
  Reply g1 = s.read(3, "r1", &r1);
  ASSERT_EQ(g1.source, s.a);
  auto g1b = h.reply_to(3, h.failed(3, r1, g1.lease));
  ASSERT_TRUE(g1b && g1b->source == s.b);
  Reply g2 = s.read(4, "r2", &r2);
  ASSERT_EQ(g2.source, s.a);
  RequestId q = h.failed(4, r2, g2.lease);  // a second reader client: confirmed
  EXPECT_FALSE(h.reply_to(4, q)) << "b is busy with r1";
  RequestId q3 = h.replicate(5, r3 = h.open(5, "pol", "r3"), 1);
  EXPECT_FALSE(h.reply_to(5, q3)) << "a is hidden now: r3 waits for b too";
  RequestId u = h.unpublish(1, s.a);
  EXPECT_EQ(h.reply_to(1, u)->status, Status::kState) << "a was hidden and emptied at once (nobody read it)";
  h.done(3, r1, g1b->lease);
  auto g = h.reply_to(4, q);
  ASSERT_TRUE(g && g->status == Status::kOk);
  EXPECT_EQ(g->source, s.b);
}

TEST(SourceFailureTest, ReportsFromOneClientCountOnce) {
  TwoHolders s;
  Harness& h = s.h;
  MemberId r1, r2, r3;
  Reply g1 = s.read(3, "r1", &r1);
  ASSERT_EQ(g1.source, s.a);
  auto g1b = h.reply_to(3, h.failed(3, r1, g1.lease));
  ASSERT_TRUE(g1b && g1b->source == s.b);
  Reply g2 = s.read(3, "r2", &r2);  // another member of the same client (same process)
  ASSERT_EQ(g2.source, s.a);
  RequestId q = h.failed(3, r2, g2.lease);
  EXPECT_FALSE(h.reply_to(3, q));
  Reply g3 = s.read(5, "r3", &r3);
  EXPECT_EQ(g3.source, s.a) << "one client's link counts once";
}

TEST(SourceFailureTest, SilentSourceIsConfirmedByOneReport) {
  TwoHolders s;  // heartbeat_timeout 5 s: silent after 2.5 s
  Harness& h = s.h;
  MemberId r1, r2;
  Reply g1 = s.read(3, "r1", &r1);
  ASSERT_EQ(g1.source, s.a);
  h.advance(3'000'000);
  for (ClientId c : {2, 4}) h.send(Heartbeat{c});  // a's client 1 is silent (stopped)
  auto g = h.reply_to(3, h.failed(3, r1, g1.lease));
  ASSERT_TRUE(g && g->status == Status::kOk);
  EXPECT_EQ(g->source, s.b);
  RequestId q = h.replicate(4, r2 = h.open(4, "pol", "r2"), 1);
  EXPECT_FALSE(h.reply_to(4, q)) << "a is confirmed failed: hidden, r2 waits for b";
}

TEST(SourceFailureTest, ReportedSourceFallingSilentLaterIsConfirmed) {
  TwoHolders s;
  Harness& h = s.h;
  MemberId r1, r2;
  Reply g1 = s.read(3, "r1", &r1);
  ASSERT_EQ(g1.source, s.a);
  auto g = h.reply_to(3, h.failed(3, r1, g1.lease));
  ASSERT_TRUE(g && g->source == s.b);
  h.advance(2'600'000);  // a's client has said nothing since
  h.send(Heartbeat{4});
  RequestId q = h.replicate(4, r2 = h.open(4, "pol", "r2"), 1);
  EXPECT_FALSE(h.reply_to(4, q)) << "a was reported and is silent now: hidden";
}

TEST(SourceFailureTest, SuccessfulReadClearsTheReports) {
  TwoHolders s;
  Harness& h = s.h;
  MemberId r1, r2, r3, r4;
  Reply g1 = s.read(3, "r1", &r1);
  ASSERT_EQ(g1.source, s.a);
  auto g1b = h.reply_to(3, h.failed(3, r1, g1.lease));
  ASSERT_TRUE(g1b && g1b->source == s.b);
  Reply g2 = s.read(4, "r2", &r2);
  ASSERT_EQ(g2.source, s.a);
  h.done(4, r2, g2.lease);  // a served r2 completely: it is healthy
  Reply g3 = s.read(5, "r3", &r3);
  ASSERT_EQ(g3.source, s.a);
  auto g3b = h.reply_to(5, h.failed(5, r3, g3.lease));  // one report since the success
  ASSERT_TRUE(g3b && g3b->status == Status::kOk);
  EXPECT_EQ(g3b->source, r2) << "r2 completed v1; r3 avoids a";
  Reply g4 = s.read(6, "r4", &r4);
  EXPECT_EQ(g4.source, s.a) << "a was reported twice, but a complete read came between";
}

// The only holder was reported by one reader: that reader waits for the judgment (a source
// that is really dead is removed, or found silent, within failure_silence); the source kept
// heartbeating, so it stands, and the reporter alone fails: kTransport, not kVersionLost.
TEST(SourceFailureTest, ReporterOfTheOnlyHolderFailsWithTransportOnceItIsJudgedAlive) {
  Harness h;
  h.connect(1);
  h.connect(2);
  h.connect(3);
  MemberId a = h.open(1, "pol", "a"), r1 = h.open(2, "pol", "r1"), r2 = h.open(3, "pol", "r2");
  ASSERT_EQ(h.publish(1, a, 1), Status::kOk);
  auto g = h.replicate_now(2, r1, 1);
  ASSERT_TRUE(g && g->status == Status::kOk);
  RequestId q = h.failed(2, r1, g->lease);
  EXPECT_FALSE(h.reply_to(2, q)) << "a is not judged yet";
  h.advance(2'000'000);
  h.send(Heartbeat{1});
  EXPECT_FALSE(h.reply_to(2, q));
  h.advance(600'000);
  h.send(Heartbeat{1});  // past failure_silence after the report: a heartbeats, it stands
  auto r = h.reply_to(2, q);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, Status::kTransport);
  auto g2 = h.replicate_now(3, r2, 1);
  ASSERT_TRUE(g2 && g2->status == Status::kOk);
  EXPECT_EQ(g2->source, a);
}

// ... and when the reported only holder really is dead, its removal answers: kVersionLost.
TEST(SourceFailureTest, ReporterOfAKilledOnlyHolderGetsVersionLost) {
  Harness h;
  h.connect(1);
  h.connect(2);
  MemberId a = h.open(1, "pol", "a"), r1 = h.open(2, "pol", "r1");
  ASSERT_EQ(h.publish(1, a, 1), Status::kOk);
  auto g = h.replicate_now(2, r1, 1);
  ASSERT_TRUE(g && g->status == Status::kOk);
  RequestId q = h.failed(2, r1, g->lease);  // the reader saw the death before the registry
  EXPECT_FALSE(h.reply_to(2, q));
  h.send(Disconnect{1});
  auto r = h.reply_to(2, q);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, Status::kVersionLost);
}

// A partial source one reader could not follow keeps receiving and completes: it was only
// waiting on its own source.
TEST(SourceFailureTest, ReportedPartialSourceCompletesItsOwnTransfer) {
  Harness h;
  for (ClientId c = 1; c <= 4; ++c) h.connect(c);
  MemberId t = h.open(1, "pol", "t"), s = h.open(2, "pol", "s");
  MemberId r1 = h.open(3, "pol", "r1"), r2 = h.open(4, "pol", "r2");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  auto gs = h.replicate_now(2, s, 1);
  ASSERT_TRUE(gs && gs->source == t);
  auto g1 = h.replicate_now(3, r1, 1);
  ASSERT_TRUE(g1 && g1->source == s && g1->source_partial);
  RequestId q = h.failed(3, r1, g1->lease);  // r1 stalled behind s
  EXPECT_FALSE(h.reply_to(3, q)) << "t is busy with s, and r1 does not take s again";
  auto g2 = h.replicate_now(4, r2, 1);
  ASSERT_TRUE(g2 && g2->status == Status::kOk);
  EXPECT_EQ(g2->source, s) << "s keeps serving others";
  auto d = h.reply_to(3, q);  // r2 is a new partial source: r1 may chain on it
  ASSERT_TRUE(d && d->status == Status::kOk);
  EXPECT_EQ(d->source, r2);
  RequestId sd = h.done(2, s, gs->lease);
  ASSERT_TRUE(h.reply_to(2, sd));
  EXPECT_EQ(h.reply_to(2, sd)->status, Status::kOk) << "s was never hidden: its transfer completes";
}

TEST(SourceFailureTest, ReportedPartialSourceIsNotRefusedItsTransferDone) {
  Harness h;
  for (ClientId c = 1; c <= 3; ++c) h.connect(c);
  MemberId t = h.open(1, "pol", "t"), s = h.open(2, "pol", "s"), r1 = h.open(3, "pol", "r1");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  auto gs = h.replicate_now(2, s, 1);
  auto g1 = h.replicate_now(3, r1, 1);
  ASSERT_TRUE(g1 && g1->source == s);
  h.failed(3, r1, g1->lease);
  RequestId d = h.done(2, s, gs->lease);
  auto r = h.reply_to(2, d);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, Status::kOk) << r->detail;
}

TEST(SourceFailureTest, ReportedHostCopyIsDroppedOnlyOnceConfirmed) {
  Harness h;
  for (ClientId c = 1; c <= 4; ++c) h.connect(c);
  MemberId t = h.open(1, "pol", "t", 0, 1, /*retain=*/1);
  MemberId r1 = h.open(2, "pol", "r1"), r2 = h.open(3, "pol", "r2"), r3 = h.open(4, "pol", "r3");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  RequestId u = h.unpublish(1, t);
  ASSERT_EQ(h.all<Offload>().size(), 1u);
  h.offload_done(1, t, 1, "host-t-1");
  ASSERT_EQ(h.reply_to(1, u)->status, Status::kOk);
  auto g1 = h.replicate_now(2, r1, 1);
  ASSERT_TRUE(g1 && g1->source_descriptor == "host-t-1");
  RequestId q1 = h.failed(2, r1, g1->lease);
  EXPECT_FALSE(h.reply_to(2, q1));
  auto g2 = h.replicate_now(3, r2, 1);
  ASSERT_TRUE(g2 && g2->status == Status::kOk) << "the host copy still serves";
  EXPECT_EQ(g2->source_descriptor, "host-t-1");
  h.failed(3, r2, g2->lease);  // a second client: the copy is dropped
  EXPECT_EQ(h.all<Discard>().size(), 1u);
  auto g3 = h.replicate_now(4, r3, 1);
  ASSERT_TRUE(g3);
  EXPECT_EQ(g3->status, Status::kVersionLost);
}

// failure_reports = 1: the first report hides the source (the registry's earlier rule).
TEST(SourceFailureTest, ThresholdOfOneHidesAtTheFirstReport) {
  Config cfg{5'000'000, 1, false};
  cfg.failure_reports = 1;
  TwoHolders s(cfg);
  Harness& h = s.h;
  MemberId r1, r2;
  Reply g1 = s.read(3, "r1", &r1);
  auto g = h.reply_to(3, h.failed(3, r1, g1.lease));
  ASSERT_TRUE(g && g->source == s.b);
  RequestId q = h.replicate(4, r2 = h.open(4, "pol", "r2"), 1);
  EXPECT_FALSE(h.reply_to(4, q)) << "a is hidden at the first report";
}

}  // namespace
}  // namespace thub::sched::testing
