// The introspection query (Registry::snapshot): models, versions, holders per shard with
// partial holders' reported bytes, transfers in flight, retention; limits; and that asking
// changes nothing.
#include <algorithm>

#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

const HolderView* holder(const Snapshot& s, MemberId m, Version v) {
  for (const HolderView& h : s.holders)
    if (h.member == m && h.version == v) return &h;
  return nullptr;
}

TEST(SnapshotTest, EmptyRegistry) {
  Harness h;
  Snapshot s = h.reg().snapshot();
  EXPECT_TRUE(s.models.empty());
  EXPECT_TRUE(s.holders.empty());
  EXPECT_TRUE(s.transfers.empty());
  EXPECT_FALSE(s.truncated);
  EXPECT_EQ(s.clients, 0u);
}

TEST(SnapshotTest, HoldersPerShardAndTransfersInFlight) {
  Harness h;
  h.connect(1);
  h.connect(2);
  h.connect(3);
  MemberId t = h.open(1, "pol", "trainer");
  MemberId r1 = h.open(2, "pol", "r1");
  MemberId r2 = h.open(3, "pol", "r2");
  ASSERT_EQ(h.publish(1, t, 4), Status::kOk);
  h.advance(1000);
  auto g1 = h.replicate_now(2, r1, -1);
  ASSERT_TRUE(g1 && g1->status == Status::kOk);
  h.advance(500);
  auto g2 = h.replicate_now(3, r2, -1);  // the trainer is busy: r2 reads r1, still receiving
  ASSERT_TRUE(g2 && g2->status == Status::kOk);
  ASSERT_EQ(g2->source, r1);

  Snapshot s = h.reg().snapshot();
  EXPECT_EQ(s.now, 1500);
  EXPECT_EQ(s.clients, 3u);
  EXPECT_EQ(s.members, 3u);
  ASSERT_EQ(s.models.size(), 1u);
  EXPECT_EQ(s.models[0].name, "pol");
  EXPECT_EQ(s.models[0].latest, 4);
  EXPECT_EQ(s.models[0].versions_published, 1u);
  EXPECT_EQ(s.models[0].members, 3u);
  ASSERT_EQ(s.holders.size(), 3u);
  const HolderView* ht = holder(s, t, 4);
  ASSERT_TRUE(ht);
  EXPECT_EQ(ht->state, Holding::kComplete);
  EXPECT_EQ(ht->replica, "trainer");
  EXPECT_EQ(ht->client, 1u);
  EXPECT_EQ(ht->load, 1);
  const HolderView* h1 = holder(s, r1, 4);
  ASSERT_TRUE(h1);
  EXPECT_EQ(h1->state, Holding::kPartial);
  EXPECT_EQ(h1->bytes_reported, 0u);  // nothing reported since the grant
  EXPECT_EQ(h1->reported_at, 1000);
  EXPECT_EQ(h1->load, 1);             // r2 reads it
  ASSERT_EQ(s.transfers.size(), 2u);
  const TransferView& a = s.transfers[0];
  EXPECT_EQ(a.lease, g1->lease);
  EXPECT_EQ(a.source, t);
  EXPECT_EQ(a.reader, r1);
  EXPECT_EQ(a.source_replica, "trainer");
  EXPECT_EQ(a.reader_replica, "r1");
  EXPECT_EQ(a.model, 0u);
  EXPECT_EQ(a.version, 4);
  EXPECT_FALSE(a.source_partial);
  EXPECT_EQ(a.granted_at, 1000);
  const TransferView& b = s.transfers[1];
  EXPECT_EQ(b.source, r1);
  EXPECT_EQ(b.reader, r2);
  EXPECT_TRUE(b.source_partial);
  EXPECT_FALSE(s.truncated);

  // Done: complete holders, no transfer left.
  h.done(2, r1, g1->lease);
  h.done(3, r2, g2->lease);
  s = h.reg().snapshot();
  EXPECT_TRUE(s.transfers.empty());
  for (const HolderView& x : s.holders) EXPECT_EQ(x.state, Holding::kComplete) << x.replica;
}

TEST(SnapshotTest, SourceFailedReportsTheBytesHeld) {
  Harness h;
  h.connect(1);
  h.connect(2);
  h.connect(3);
  MemberId a = h.open(1, "pol", "a");
  MemberId b = h.open(3, "pol", "b");
  MemberId r = h.open(2, "pol", "r");
  ASSERT_EQ(h.publish(1, a, 1), Status::kOk);
  ASSERT_EQ(h.publish(3, b, 1), Status::kOk);
  auto g = h.replicate_now(2, r, 1);
  ASSERT_TRUE(g && g->status == Status::kOk);
  h.advance(7000);
  RequestId q = h.failed(2, r, g->lease, 123456);
  auto g2 = h.reply_to(2, q);
  ASSERT_TRUE(g2 && g2->status == Status::kOk);  // regranted from the other holder
  Snapshot s = h.reg().snapshot();
  const HolderView* hr = holder(s, r, 1);
  ASSERT_TRUE(hr);
  EXPECT_EQ(hr->state, Holding::kPartial);
  EXPECT_EQ(hr->bytes_reported, 123456u);
  EXPECT_EQ(hr->reported_at, 7000);
  // The failed source had no other reader: it holds nothing any more.
  EXPECT_EQ(holder(s, g->source, 1), nullptr);
  ASSERT_EQ(s.transfers.size(), 1u);
  EXPECT_EQ(s.transfers[0].lease, g2->lease);
  EXPECT_EQ(s.transfers[0].bytes_reported, 123456u);
}

TEST(SnapshotTest, DrainingHolderIsListedUntilItsReaderFinishes) {
  Harness h;
  h.connect(1);
  h.connect(2);
  MemberId t = h.open(1, "pol", "t");
  MemberId r = h.open(2, "pol", "r");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  auto g = h.replicate_now(2, r, 1);
  ASSERT_TRUE(g && g->status == Status::kOk);
  h.unpublish(1, t);
  Snapshot s = h.reg().snapshot();
  ASSERT_NE(holder(s, t, 1), nullptr);
  EXPECT_EQ(holder(s, t, 1)->state, Holding::kDraining);
  ASSERT_EQ(s.transfers.size(), 1u);
  h.done(2, r, g->lease);
  s = h.reg().snapshot();
  EXPECT_EQ(holder(s, t, 1), nullptr);
  ASSERT_NE(holder(s, r, 1), nullptr);
  EXPECT_EQ(holder(s, r, 1)->state, Holding::kComplete);
}

TEST(SnapshotTest, RetentionAndHostCopies) {
  Harness h;
  h.connect(1);
  MemberId t = h.open(1, "pol", "t", 0, 1, /*retain=*/2);
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  h.unpublish(1, t);
  Snapshot s = h.reg().snapshot();
  ASSERT_NE(holder(s, t, 1), nullptr);
  EXPECT_EQ(holder(s, t, 1)->state, Holding::kOffloading);
  h.offload_done(1, t, 1, "host-1");
  ASSERT_EQ(h.publish(1, t, 2), Status::kOk);
  s = h.reg().snapshot();
  ASSERT_EQ(s.models.size(), 1u);
  EXPECT_EQ(s.models[0].retain, 2);
  EXPECT_EQ(s.models[0].retained, (std::vector<Version>{2, 1}));
  ASSERT_EQ(s.holders.size(), 2u);
  EXPECT_EQ(s.holders[0].version, 2);  // newest first
  EXPECT_EQ(s.holders[0].state, Holding::kComplete);
  EXPECT_EQ(s.holders[1].version, 1);
  EXPECT_EQ(s.holders[1].state, Holding::kHostCopy);
}

TEST(SnapshotTest, ShardsAreListedInOrder) {
  Harness h;
  h.connect(1);
  MemberId s1 = h.open(1, "pol", "t", 1, 2);
  MemberId s0 = h.open(1, "pol", "t", 0, 2);
  ASSERT_EQ(h.publish(1, s1, 3), Status::kOk);
  ASSERT_EQ(h.publish(1, s0, 3), Status::kOk);
  Snapshot s = h.reg().snapshot();
  ASSERT_EQ(s.holders.size(), 2u);
  EXPECT_EQ(s.holders[0].member, s0);
  EXPECT_EQ(s.holders[0].shard, 0);
  EXPECT_EQ(s.holders[0].num_shards, 2);
  EXPECT_EQ(s.holders[1].member, s1);
  EXPECT_EQ(s.holders[1].shard, 1);
}

TEST(SnapshotTest, LimitsTruncateAndCountWhatIsLeftOut) {
  Harness h;
  h.connect(1);
  for (int i = 0; i < 5; ++i) {
    MemberId m = h.open(1, "m" + std::to_string(i), "t");
    ASSERT_EQ(h.publish(1, m, i), Status::kOk);
  }
  SnapshotLimits lim;
  lim.max_models = 3;
  lim.max_holders = 2;
  lim.max_transfers = 0;
  Snapshot s = h.reg().snapshot(lim);
  EXPECT_TRUE(s.truncated);
  EXPECT_EQ(s.models_total, 5u);
  ASSERT_EQ(s.models.size(), 3u);
  EXPECT_EQ(s.models[2].name, "m2");
  EXPECT_EQ(s.holders_total, 3u);  // the holders of the models listed
  ASSERT_EQ(s.holders.size(), 2u);
  EXPECT_EQ(s.holders[1].model, 1u);
  EXPECT_FALSE(h.reg().snapshot().truncated);
}

// Asking changes nothing: the same state afterwards, and the same next decision.
TEST(SnapshotTest, AskingChangesNothing) {
  Harness h;
  h.connect(1);
  h.connect(2);
  MemberId t = h.open(1, "pol", "t", 0, 1, 1);
  MemberId r = h.open(2, "pol", "r");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  auto g = h.replicate_now(2, r, 1);
  ASSERT_TRUE(g);
  std::string before = h.reg().describe();
  for (int i = 0; i < 3; ++i) (void)h.reg().snapshot();
  EXPECT_EQ(h.reg().describe(), before);
  EXPECT_EQ(h.reg().check_invariants(), "");
  RequestId d = h.done(2, r, g->lease);
  EXPECT_EQ(h.reply_to(2, d)->status, Status::kOk);
}

}  // namespace
}  // namespace thub::sched::testing
