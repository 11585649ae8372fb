// Issue 19 item 2: the registry bounds the descriptors it stores, per client and in all
// (Config::max_descriptor_bytes_per_client, max_descriptor_bytes). A publish, replicate or
// update that would pass a budget is refused with kArg and changes nothing; what a client
// frees (unpublish and replace, close, its disconnection) counts against it no more; the
// count is checked against the state after every step (check_invariants, in the harness).
#include <gtest/gtest.h>

#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

Config budget(uint64_t per_client, uint64_t all) {
  Config c;
  c.max_descriptor_bytes_per_client = per_client;
  c.max_descriptor_bytes = all;
  return c;
}

Status publish(Harness& h, ClientId c, MemberId m, Version v, size_t bytes) {
  RequestId q = h.next_req();
  h.send(Publish{c, q, m, v, 7, std::string(bytes, 'd')});
  auto r = h.reply_to(c, q);
  EXPECT_TRUE(r);
  return r ? r->status : Status::kInternal;
}

TEST(BudgetTest, OneClientCannotStorePastItsBudget) {
  Harness h(budget(1000, 0));
  h.connect(1);
  MemberId a = h.open(1, "m", "a"), b = h.open(1, "n", "a"), c = h.open(1, "o", "a");
  EXPECT_EQ(publish(h, 1, a, 1, 600), Status::kOk);
  EXPECT_EQ(publish(h, 1, b, 1, 400), Status::kOk);  // exactly the budget
  RequestId q = h.next_req();
  h.send(Publish{1, q, c, 1, 7, std::string(1, 'd')});
  ASSERT_TRUE(h.reply_to(1, q));
  EXPECT_EQ(h.reply_to(1, q)->status, Status::kArg);
  EXPECT_NE(h.reply_to(1, q)->detail.find("max_descriptor_bytes_per_client"), std::string::npos)
      << h.reply_to(1, q)->detail;
  // Refused: nothing changed (c holds nothing; a reader finds no version of model o).
  h.connect(2);
  MemberId r = h.open(2, "o", "r");
  auto g = h.replicate_now(2, r, -1);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kNotFound);
  // Another client has a budget of its own.
  MemberId s = h.open(2, "m", "s");
  EXPECT_EQ(publish(h, 2, s, 2, 900), Status::kOk);
}

TEST(BudgetTest, WhatIsFreedCountsNoMore) {
  Harness h(budget(1000, 0));
  h.connect(1);
  MemberId a = h.open(1, "m", "a"), b = h.open(1, "n", "a");
  ASSERT_EQ(publish(h, 1, a, 1, 900), Status::kOk);
  EXPECT_EQ(publish(h, 1, b, 1, 200), Status::kArg);
  // Replaced by a smaller one at the next publish: room again.
  h.unpublish(1, a);
  ASSERT_EQ(publish(h, 1, a, 2, 100), Status::kOk);
  EXPECT_EQ(publish(h, 1, b, 1, 200), Status::kOk);
  // Closed: its descriptor goes with it.
  h.close(1, a);
  MemberId c = h.open(1, "o", "a");
  EXPECT_EQ(publish(h, 1, c, 1, 800), Status::kOk);
  // Disconnected: everything goes; a new session of the same process starts empty.
  h.send(Disconnect{1});
  h.connect(3);
  MemberId d = h.open(3, "m", "a");
  EXPECT_EQ(publish(h, 3, d, 5, 1000), Status::kOk);
}

TEST(BudgetTest, TheRegistrysTotalBoundsEveryClientTogether) {
  Harness h(budget(0, 1500));
  h.connect(1);
  h.connect(2);
  MemberId a = h.open(1, "m", "a"), b = h.open(2, "n", "b");
  ASSERT_EQ(publish(h, 1, a, 1, 1000), Status::kOk);
  RequestId q = h.next_req();
  h.send(Publish{2, q, b, 1, 7, std::string(600, 'd')});
  ASSERT_TRUE(h.reply_to(2, q));
  EXPECT_EQ(h.reply_to(2, q)->status, Status::kArg);
  EXPECT_NE(h.reply_to(2, q)->detail.find("max_descriptor_bytes ("), std::string::npos) << h.reply_to(2, q)->detail;
  EXPECT_EQ(publish(h, 2, b, 1, 500), Status::kOk);
}

TEST(BudgetTest, AReplicateOverTheBudgetIsRefusedAndTakesNoLease) {
  Harness h(budget(1000, 0));
  h.connect(1);
  h.connect(2);
  MemberId t = h.open(1, "m", "t");
  ASSERT_EQ(h.publish(1, t, 1), Status::kOk);
  MemberId r = h.open(2, "m", "r"), r2 = h.open(2, "n", "r");
  ASSERT_EQ(publish(h, 2, r2, 1, 990), Status::kOk);
  RequestId q = h.next_req();
  h.send(Replicate{2, q, r, -1, -1, 7, std::string(100, 'r')});
  auto g = h.reply_to(2, q);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kArg);
  EXPECT_EQ(g->lease, 0u);
  // Within it, the same read is granted.
  q = h.next_req();
  h.send(Replicate{2, q, r, -1, -1, 7, std::string(10, 'r')});
  g = h.reply_to(2, q);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, Status::kOk);
  EXPECT_EQ(g->version, 1);
}

TEST(BudgetTest, AHostCopyOverTheBudgetIsRefusedAndTheUnpublishStillDrains) {
  Harness h(budget(1000, 0));
  h.connect(1);
  MemberId t = h.open(1, "m", "t", 0, 1, /*retain=*/1);
  ASSERT_EQ(publish(h, 1, t, 1, 500), Status::kOk);
  RequestId u = h.unpublish(1, t);  // retention wants a host copy first
  ASSERT_EQ(h.all<Offload>().size(), 1u);
  RequestId q = h.offload_done(1, t, 1, std::string(600, 'h'));  // 500 + 600 > 1000
  auto r = h.reply_to(1, q);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, Status::kArg);  // the client frees its copy
  EXPECT_NE(r->detail.find("offload"), std::string::npos) << r->detail;
  auto done = h.reply_to(1, u);
  ASSERT_TRUE(done) << "the unpublish waits for a copy that was refused";
  EXPECT_EQ(done->status, Status::kOk);
}

// A member's own descriptor is what a reader is handed when the member serves as a source (a
// holder, or a partial source while it receives): an empty one would be handed out as a
// source that cannot be read. Refused where it arrives, like one over the budget, and a
// shard refused so does not hold its siblings' round.
TEST(BudgetTest, AnEmptyDescriptorIsRefused) {
  Harness h;
  h.connect(1);
  h.connect(2);
  MemberId t = h.open(1, "m", "t", 0, 2), t1 = h.open(1, "m", "t", 1, 2);
  EXPECT_EQ(publish(h, 1, t, 1, 0), Status::kArg);
  ASSERT_EQ(publish(h, 1, t, 1, 10), Status::kOk);
  ASSERT_EQ(publish(h, 1, t1, 1, 10), Status::kOk);
  MemberId r0 = h.open(2, "m", "r", 0, 2), r1 = h.open(2, "m", "r", 1, 2);
  RequestId q0 = h.next_req();
  h.send(Replicate{2, q0, r0, -1, -1, 7, "", 1});
  auto g0 = h.reply_to(2, q0);
  ASSERT_TRUE(g0);
  EXPECT_EQ(g0->status, Status::kArg);
  EXPECT_NE(g0->detail.find("empty descriptor"), std::string::npos) << g0->detail;
  EXPECT_EQ(g0->lease, 0u);
  // The sibling of the same round is answered: granted, not deferred for the refused shard.
  RequestId q1 = h.next_req();
  h.send(Replicate{2, q1, r1, -1, -1, 7, "r1", 1});
  auto g1 = h.reply_to(2, q1);
  ASSERT_TRUE(g1) << "the round waits for a shard that was refused";
  EXPECT_EQ(g1->status, Status::kOk);
  EXPECT_EQ(g1->version, 1);
}

}  // namespace
}  // namespace thub::sched::testing
