// The queue of deferred requests: requests that wait for a busy source are answered in
// arrival order as sources free up, and a request waiting for one version is not held back
// by requests waiting for another (wake() skips retrying requests that wait for the same
// thing as one that just had to wait: transaction.cc, deferred.cc).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/sched/harness.h"

namespace thub::sched::testing {
namespace {

Config no_pipeline() {
  Config c;
  c.pipeline = false;  // only complete copies serve: receivers make others wait
  c.max_readers_per_source = 1;
  return c;
}

TEST(DeferredTest, ARequestForAnotherVersionIsNotHeldBack) {
  Harness h(no_pipeline());
  for (ClientId c = 1; c <= 5; ++c) h.connect(c);
  MemberId t = h.open(1, "m", "t"), x = h.open(2, "m", "x");
  MemberId a = h.open(3, "m", "a"), b = h.open(4, "m", "b"), d = h.open(5, "m", "d");
  h.connect(6);
  MemberId c = h.open(6, "m", "c");
  ASSERT_EQ(h.publish(1, t, 0), Status::kOk);
  ASSERT_EQ(h.publish(2, x, 1), Status::kOk);
  auto gd = h.replicate_now(5, d, 0);  // d reads t (version 0)
  ASSERT_TRUE(gd && gd->status == Status::kOk && gd->source == t);
  auto ga = h.replicate_now(3, a, -1);  // a reads x (version 1, the latest)
  ASSERT_TRUE(ga && ga->status == Status::kOk && ga->source == x);
  RequestId qb = h.replicate(4, b, -1);  // waits for x or a
  EXPECT_FALSE(h.reply_to(4, qb));
  RequestId qc = h.replicate(6, c, 0);  // waits for t or d
  EXPECT_FALSE(h.reply_to(6, qc));
  h.done(5, d, gd->lease);  // t is free: c proceeds, b still waits
  auto rc = h.reply_to(6, qc);
  ASSERT_TRUE(rc);
  EXPECT_EQ(rc->status, Status::kOk);
  EXPECT_EQ(rc->version, 0);
  EXPECT_EQ(rc->source, t);
  EXPECT_FALSE(h.reply_to(4, qb));
  h.done(3, a, ga->lease);  // x is free
  auto rb = h.reply_to(4, qb);
  ASSERT_TRUE(rb);
  EXPECT_EQ(rb->version, 1);
  EXPECT_EQ(rb->source, x);
}

// Four 2-shard replicas ask in interleaved order while the trainer's one reader slot per
// shard is taken; each replica that becomes a whole source goes to the replica that asked
// first, and a replica's shards get the same source replica.
TEST(DeferredTest, WaitingReplicasAreServedInArrivalOrder) {
  Harness h(no_pipeline());
  std::map<std::string, std::vector<MemberId>> m;
  std::map<std::string, ClientId> client;
  ClientId next = 1;
  for (std::string r : {"t", "a", "b", "c", "d"}) {
    client[r] = next;
    h.connect(next);
    for (int s = 0; s < 2; ++s) m[r].push_back(h.open(next, "m", r, s, 2));
    ++next;
  }
  for (int s = 0; s < 2; ++s) ASSERT_EQ(h.publish(client["t"], m["t"][static_cast<size_t>(s)], 0), Status::kOk);
  using Shard = std::pair<std::string, int>;
  std::map<Shard, RequestId> q;
  std::map<Shard, Reply> got;
  auto source = [&](const std::string& r, int s) { return got[Shard{r, s}].source; };
  auto member = [&](const std::string& r, int s) { return m[r][static_cast<size_t>(s)]; };
  auto collect = [&] {
    for (const auto& [k, req] : q)
      if (auto r = h.reply_to(client[k.first], req)) got[k] = *r;
  };
  for (const Shard& k : std::vector<Shard>{{"a", 0}, {"b", 0}, {"c", 0}, {"b", 1}, {"a", 1}, {"c", 1}, {"d", 0}, {"d", 1}}) {
    q[k] = h.replicate(client[k.first], m[k.first][static_cast<size_t>(k.second)], -1);
    collect();
  }
  ASSERT_EQ(got.size(), 2u);  // a, from t
  for (int s = 0; s < 2; ++s) EXPECT_EQ(source("a", s), member("t", s));
  h.done(client["a"], m["a"][0], got[{"a", 0}].lease);
  collect();
  EXPECT_EQ(got.size(), 2u);  // neither t nor a is free in both shards yet
  h.done(client["a"], m["a"][1], got[{"a", 1}].lease);
  collect();
  ASSERT_EQ(got.size(), 6u);  // b (asked first) gets t, c gets a, d waits
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(source("b", s), member("t", s));
    EXPECT_EQ(source("c", s), member("a", s));
  }
  h.done(client["b"], m["b"][0], got[{"b", 0}].lease);
  h.done(client["b"], m["b"][1], got[{"b", 1}].lease);
  collect();
  ASSERT_EQ(got.size(), 8u);
  for (int s = 0; s < 2; ++s) EXPECT_EQ(source("d", s), member("t", s));
}

// wake() skips the requests of a key (model, num_shards, spec, newer_than) once one of them
// had to wait, but not one whose replica opened a transaction since: it no longer waits for
// the model alone. Here b/1 waits for "latest" behind c/0, which waits for it too; b/0 asks
// for version 0, which is free, and b/1 joins that transaction in the same step while c/0
// still waits. (The harness checks after each step that every deferred request that does
// not wait for the model alone is visited by wake(): check_invariants.)
TEST(DeferredTest, ARequestWhoseReplicaStartedATransactionIsNotSkippedWithItsKey) {
  Harness h(no_pipeline());
  std::map<std::string, std::vector<MemberId>> m;
  std::map<std::string, ClientId> client;
  ClientId next = 1;
  for (std::string r : {"t", "x", "a", "b", "c"}) {
    client[r] = next;
    h.connect(next);
    for (int s = 0; s < 2; ++s) m[r].push_back(h.open(next, "m", r, s, 2));
    ++next;
  }
  for (int s = 0; s < 2; ++s) {
    ASSERT_EQ(h.publish(client["t"], m["t"][static_cast<size_t>(s)], 0), Status::kOk);
    ASSERT_EQ(h.publish(client["x"], m["x"][static_cast<size_t>(s)], 1), Status::kOk);
  }
  std::vector<LeaseId> la;
  for (int s = 0; s < 2; ++s) {  // a reads x (version 1, the latest): x is busy
    auto g = h.replicate_now(client["a"], m["a"][static_cast<size_t>(s)], -1);
    ASSERT_TRUE(g && g->status == Status::kOk && g->source == m["x"][static_cast<size_t>(s)]);
    la.push_back(g->lease);
  }
  RequestId qc0 = h.replicate(client["c"], m["c"][0], -1);
  RequestId qb1 = h.replicate(client["b"], m["b"][1], -1);
  EXPECT_FALSE(h.reply_to(client["c"], qc0));
  EXPECT_FALSE(h.reply_to(client["b"], qb1));
  h.done(client["a"], m["a"][0], la[0]);  // a retry of both: x/1 is still busy
  EXPECT_FALSE(h.reply_to(client["c"], qc0));
  EXPECT_FALSE(h.reply_to(client["b"], qb1));
  auto g0 = h.replicate_now(client["b"], m["b"][0], 0);
  ASSERT_TRUE(g0 && g0->status == Status::kOk);
  EXPECT_EQ(g0->source, m["t"][0]);
  auto g1 = h.reply_to(client["b"], qb1);  // joined b's transaction: version 0 from t
  ASSERT_TRUE(g1);
  EXPECT_EQ(g1->status, Status::kOk);
  EXPECT_EQ(g1->version, 0);
  EXPECT_EQ(g1->source, m["t"][1]);
  EXPECT_FALSE(h.reply_to(client["c"], qc0));  // x is still busy
}

}  // namespace
}  // namespace thub::sched::testing
