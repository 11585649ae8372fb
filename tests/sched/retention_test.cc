// Retention: the last non-spot holder of a retained version offloads before unpublishing.
#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

TEST(RetentionTest, LastNonSpotHolderOffloads) {
  Harness h;
  h.connect(1);
  MemberId t = h.open(1, "pol", "t", 0, 1, /*retain=*/2);
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  RequestId u = h.unpublish(1, t);
  EXPECT_FALSE(h.reply_to(1, u));
  auto off = h.all<Offload>();
  ASSERT_EQ(off.size(), 1u);
  EXPECT_EQ(off[0].member, t);
  EXPECT_EQ(off[0].version, 1);
  RequestId od = h.offload_done(1, t, 1, "host-1");
  EXPECT_EQ(h.reply_to(1, od)->status, Status::kOk);
  EXPECT_EQ(h.reply_to(1, u)->status, Status::kOk);
  // keeps serving v1 from host memory
  h.connect(2);
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, 1);
  ASSERT_TRUE(g && g->status == Status::kOk);
  EXPECT_EQ(g->source, t);
  EXPECT_EQ(g->source_descriptor, "host-1");
  h.done(2, r, g->lease);
}

// A host copy that could not be made (OffloadDone without a descriptor, e.g. no host memory):
// the unpublish used to wait for an OffloadDone that never came. It completes (after the
// readers, as any drain) with no copy (the version is lost: nobody else keeps it), and the holding
// is not asked to offload again; a later publish of the member is retained as usual.
TEST(RetentionTest, FailedHostCopyLetsTheUnpublishComplete) {
  Harness h;
  h.connect(1);
  h.connect(2);
  MemberId t = h.open(1, "pol", "t", 0, 1, /*retain=*/2);
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  RequestId u = h.unpublish(1, t);
  EXPECT_FALSE(h.reply_to(1, u));
  ASSERT_EQ(h.all<Offload>().size(), 1u);
  RequestId od = h.offload_done(1, t, 1, "");
  EXPECT_EQ(h.reply_to(1, od)->status, Status::kOk);
  auto ack = h.reply_to(1, u);
  ASSERT_TRUE(ack) << "the unpublish waits for a host copy that was never made";
  EXPECT_EQ(ack->status, Status::kOk);
  EXPECT_TRUE(h.all<Offload>().empty()) << "asked to offload again";
  MemberId r = h.open(2, "pol", "r");
  auto lost = h.replicate_now(2, r, 1);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->status, Status::kVersionLost);
  // The next holding starts with retention as before.
  ASSERT_EQ(h.publish(1, t, 2), Status::kOk);
  h.unpublish(1, t);
  auto off = h.all<Offload>();
  ASSERT_EQ(off.size(), 1u);
  EXPECT_EQ(off[0].version, 2);
}

// The same for an update in place whose old holding is offloaded first: the update goes on,
// and no copy of the old version is served.
TEST(RetentionTest, FailedHostCopyLetsTheUpdateInPlaceGoOn) {
  Harness h;
  h.connect(1);
  h.connect(2);
  MemberId t = h.open(1, "pol", "t", 0, 1, /*retain=*/2);
  MemberId p = h.open(2, "pol", "p");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  ASSERT_EQ(h.publish(2, p, 2), Status::kOk);
  RequestId q = h.replicate(1, t, -1, /*newer_than=*/1);
  auto off = h.all<Offload>();
  ASSERT_EQ(off.size(), 1u);
  EXPECT_EQ(off[0].version, 1);
  EXPECT_FALSE(h.reply_to(1, q));
  h.offload_done(1, t, 1, "");
  auto g = h.reply_to(1, q);
  ASSERT_TRUE(g) << "the update waits for a host copy that was never made";
  EXPECT_EQ(g->status, Status::kOk);
  EXPECT_EQ(g->version, 2);
  // No copy of v1 is served (a copy without a descriptor is no copy).
  h.connect(3);
  MemberId r = h.open(3, "pol", "r");
  auto lost = h.replicate_now(3, r, 1);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->status, Status::kVersionLost) << lost->source_descriptor;
}

TEST(RetentionTest, SpotDoesNotCountAndDoesNotOffload) {
  Harness h;
  h.connect(1);
  MemberId t = h.open(1, "pol", "t", 0, 1, 1);
  MemberId s = h.open(1, "pol", "s", 0, 1, 1, /*spot=*/true);
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  ASSERT_EQ(h.publish(1, s, 1), Status::kOk);
  RequestId u = h.unpublish(1, t);  // the spot copy does not count: offload
  EXPECT_EQ(h.all<Offload>().size(), 1u);
  EXPECT_FALSE(h.reply_to(1, u));
  RequestId us = h.unpublish(1, s);  // a spot member never offloads
  EXPECT_EQ(h.reply_to(1, us)->status, Status::kOk);
}

TEST(RetentionTest, OtherNonSpotHolderMeansNoOffload) {
  Harness h;
  h.connect(1);
  MemberId a = h.open(1, "pol", "a", 0, 1, 1), b = h.open(1, "pol", "b", 0, 1, 1);
  ASSERT_EQ(h.publish(1, a, 1), Status::kOk);
  ASSERT_EQ(h.publish(1, b, 1), Status::kOk);
  RequestId u = h.unpublish(1, a);
  EXPECT_EQ(h.reply_to(1, u)->status, Status::kOk);
  EXPECT_TRUE(h.all<Offload>().empty());
}

TEST(RetentionTest, OffloadedCopyDroppedWhenOutOfWindow) {
  Harness h;
  h.connect(1);
  MemberId t = h.open(1, "pol", "t", 0, 1, 1);
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  h.unpublish(1, t);
  h.offload_done(1, t, 1, "host-1");
  ASSERT_EQ(h.publish(1, t, 2), Status::kOk);  // v1 falls out of the latest 1
  auto d = h.all<Discard>();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].version, 1);
  h.connect(2);
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, 1);
  EXPECT_EQ(g->status, Status::kVersionLost);
}

// A client that goes away with the only other copy (a host copy) of a retained version, and
// with the last reader of a draining holder of it: the holder's drain ends in the same step,
// and it must see the copy as gone already (offload, not lose the version).
TEST(RetentionTest, DrainEndingWithTheOtherCopysRemovalOffloads) {
  Harness h;
  h.connect(1);
  MemberId t = h.open(1, "pol", "t", 0, 1, /*retain=*/1);
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  h.connect(2);
  MemberId r2 = h.open(2, "pol", "r2");  // forgotten first on removal (smaller id)
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, 1);
  ASSERT_TRUE(g && g->source == t);
  h.done(2, r, g->lease);
  RequestId ut = h.unpublish(1, t);  // r holds v1: no offload
  ASSERT_EQ(h.reply_to(1, ut)->status, Status::kOk);
  RequestId ur = h.unpublish(2, r);  // r is the last holder now: it keeps a host copy
  ASSERT_EQ(h.all<Offload>().size(), 1u);
  h.offload_done(2, r, 1, "host-r");
  ASSERT_EQ(h.reply_to(2, ur)->status, Status::kOk);
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  auto g2 = h.replicate_now(2, r2, 1);
  ASSERT_TRUE(g2 && g2->source == t);
  RequestId u = h.unpublish(1, t);  // r's host copy still keeps v1: no offload, drains
  EXPECT_TRUE(h.all<Offload>().empty());
  EXPECT_FALSE(h.reply_to(1, u));
  h.send(Disconnect{2});  // r2's read ends and r's host copy goes, in one step
  auto off = h.all<Offload>();
  ASSERT_EQ(off.size(), 1u);
  EXPECT_EQ(off[0].member, t);
  EXPECT_EQ(off[0].version, 1);
  EXPECT_FALSE(h.reply_to(1, u));
  h.offload_done(1, t, 1, "host-t");
  EXPECT_EQ(h.reply_to(1, u)->status, Status::kOk);
}

// The same when the member that keeps the other copy is itself the last reader, and closes.
TEST(RetentionTest, CloseOfTheReaderWithTheOtherCopyOffloads) {
  Harness h;
  h.connect(1);
  MemberId t = h.open(1, "pol", "t", 0, 1, /*retain=*/1);
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  h.connect(2);
  MemberId r = h.open(2, "pol", "r");
  auto g = h.replicate_now(2, r, 1);
  h.done(2, r, g->lease);
  ASSERT_EQ(h.reply_to(1, h.unpublish(1, t))->status, Status::kOk);
  RequestId ur = h.unpublish(2, r);
  h.offload_done(2, r, 1, "host-r");
  ASSERT_EQ(h.reply_to(2, ur)->status, Status::kOk);
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  auto g2 = h.replicate_now(2, r, 1);  // r reads v1 again, from t (not from itself)
  ASSERT_TRUE(g2 && g2->source == t);
  RequestId u = h.unpublish(1, t);
  EXPECT_FALSE(h.reply_to(1, u));
  h.close(2, r);
  auto off = h.all<Offload>();
  ASSERT_EQ(off.size(), 1u);
  EXPECT_EQ(off[0].member, t);
  EXPECT_FALSE(h.reply_to(1, u));
}

}  // namespace
}  // namespace thub::sched::testing
