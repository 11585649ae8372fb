// The client's member machine alone (no registry, no UCX): one behaviour per test, each the
// reduction of a schedule the deterministic simulation (tests/sched/) found.
#include "src/client/member_machine.h"

#include <gtest/gtest.h>

#include <optional>
#include <utility>
#include <variant>
#include <vector>

namespace thub::client {
namespace {

class MemberMachineTest : public ::testing::Test {
 protected:
  MemberMachine m{MemberIdentity{"m", "r", 0, 1, 0, false}};
  std::vector<MachineAction> out;  // every action since the last clear()
  uint64_t next_op = 1;

  void step(const MachineEvent& e) {
    auto a = m.step(e);
    out.insert(out.end(), a.begin(), a.end());
  }
  void clear() { out.clear(); }

  // The last request of type T sent since clear(): (machine request id, event).
  template <class T>
  std::optional<std::pair<uint64_t, T>> sent() const {
    std::optional<std::pair<uint64_t, T>> r;
    for (const auto& a : out)
      if (auto* s = std::get_if<SendRequest>(&a))
        if (auto* e = std::get_if<T>(&s->event)) r = std::make_pair(s->req, *e);
    return r;
  }
  std::optional<CompleteOp> completed() const {
    std::optional<CompleteOp> r;
    for (const auto& a : out)
      if (auto* c = std::get_if<CompleteOp>(&a)) r = *c;
    return r;
  }
  template <class T>
  bool did() const {
    for (const auto& a : out)
      if (std::holds_alternative<T>(a)) return true;
    return false;
  }
  void reply(uint64_t req, sched::Reply r = {}) { step(RegistryReply{req, std::move(r)}); }
  void ok(uint64_t req, sched::MemberId member = 0) {
    sched::Reply r{};
    r.member = member;
    reply(req, r);
  }
  sched::Reply grant(int64_t version, uint64_t lease, bool partial = false) {
    sched::Reply r{};
    r.version = version;
    r.lease = lease;
    r.source = 99;
    r.source_descriptor = "src";
    r.source_partial = partial;
    return r;
  }

  void open(sched::MemberId member = 1) {
    clear();
    step(OpOpen{next_op++});
    ok(sent<sched::Open>()->first, member);
    ASSERT_EQ(completed()->code, Code::kSuccess);
  }
  void publish(int64_t v) {
    clear();
    uint64_t op = next_op++;
    step(OpPublish{op, v});
    step(Prepared{op, 7, "d" + std::to_string(v), 1});
    ok(sent<sched::Publish>()->first);
    ASSERT_EQ(completed()->code, Code::kSuccess);
    ASSERT_EQ(m.held(), v);
  }
  // The registry restarts: the connection is lost and comes back; the machine opens again
  // (answered with `member`) and publishes again what it holds.
  void failover(uint64_t generation, sched::MemberId member) {
    clear();
    step(RegistryLost{});
    step(RegistryBack{generation});
    ok(sent<sched::Open>()->first, member);
  }
};

// Seed 158: after a failover the machine published its holding again and, before that
// Publish was answered, sent an update's Replicate; the registry, not knowing the holding
// yet, granted it as a plain replicate, and the late refusal of the Publish then made the
// machine drop the newer version it had meanwhile received. An operation's request waits for
// the re-publish to be answered.
TEST_F(MemberMachineTest, UpdateAfterFailoverWaitsForTheRepublish) {
  open();
  publish(1);
  failover(1, 5);
  auto republish = sent<sched::Publish>();
  ASSERT_TRUE(republish);
  EXPECT_EQ(republish->second.version, 1);
  clear();
  uint64_t op = next_op++;
  step(OpReplicate{op, -1, true});
  step(Prepared{op, 7, "fill", 2});
  EXPECT_FALSE(sent<sched::Replicate>()) << "the update's request went out before the re-publish was answered";
  ok(republish->first);
  auto rep = sent<sched::Replicate>();
  ASSERT_TRUE(rep);
  EXPECT_EQ(rep->second.newer_than, 1);
  EXPECT_EQ(rep->second.member, 5u);
}

// Seed 1514: cut off from the registry, the client reconnected before the registry had
// dropped its old session, so the re-open was refused ("already open"). Nothing asked again
// later: every following operation waited for a registry that was there all along. The next
// operation tries the re-open again.
TEST_F(MemberMachineTest, RefusedReopenIsTriedAgainByTheNextOperation) {
  open();
  publish(1);
  clear();
  step(RegistryLost{});
  step(RegistryBack{1});
  sched::Reply refused{};
  refused.status = sched::Status::kState;
  refused.detail = "shard 0 of replica r is already open";
  reply(sent<sched::Open>()->first, refused);
  EXPECT_EQ(m.held(), -1) << "the new registry does not count us as a holder";
  clear();
  uint64_t op = next_op++;
  step(OpPublish{op, 2});
  step(Prepared{op, 7, "d2", 2});
  auto reopen = sent<sched::Open>();
  ASSERT_TRUE(reopen) << "the publish waits for a re-open that nothing asks for";
  EXPECT_FALSE(sent<sched::Publish>());
  ok(reopen->first, 9);
  auto pub = sent<sched::Publish>();
  ASSERT_TRUE(pub);
  EXPECT_EQ(pub->second.member, 9u);
  EXPECT_EQ(pub->second.version, 2);
  ok(pub->first);
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kSuccess);
  EXPECT_EQ(m.held(), 2);
}

// Seed 295: a publish that fails after PrepareHolding (here: its request past its deadline;
// in the seed: the re-open refused) left the counter vouching for the prepared fill. The user
// may overwrite the buffers once the publish has failed, while a registry that did take the
// late PUBLISH hands its descriptor to readers: they must see the counter invalid.
TEST_F(MemberMachineTest, FailedPublishInvalidatesWhatItPrepared) {
  open();
  clear();
  uint64_t op = next_op++;
  step(OpPublish{op, 3});
  step(Prepared{op, 7, "d3", 1});
  auto pub = sent<sched::Publish>();
  ASSERT_TRUE(pub);
  clear();
  step(RegistryNoReply{pub->first, Code::kTimeout, "no reply within its deadline"});
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kTimeout);
  EXPECT_TRUE(did<InvalidateHolding>()) << "the counter still vouches for buffers the user may now overwrite";
}

// Seed 4585: a replicate's request reached the registry, which granted it (and made us a
// partial source under the request's descriptor, fill 1, for version 0) but the answer was
// lost with the connection. Asked again at the new registry with the same descriptor, it was
// granted version 2 into the same fill: a reader the old grant had chained on us took the
// bytes of version 2 as version 0 (its counter read showed the fill it expected). A request
// asked again promises a new fill.
TEST_F(MemberMachineTest, ReplicateAskedAgainAfterFailoverPromisesANewFill) {
  open();
  clear();
  uint64_t op = next_op++;
  step(OpReplicate{op, -1, false});
  step(Prepared{op, 7, "fill-1", 1});
  auto first = sent<sched::Replicate>();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->second.descriptor, "fill-1");
  step(RegistryNoReply{first->first, Code::kRegistry, "lost the connection"});
  failover(1, 4);
  EXPECT_FALSE(sent<sched::Replicate>()) << "asked again under the fill the lost request promised";
  bool refill = false;
  for (const auto& a : out) refill = refill || std::holds_alternative<PrepareFill>(a);
  ASSERT_TRUE(refill);
  step(Prepared{op, 7, "fill-2", 2});
  auto again = sent<sched::Replicate>();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->second.descriptor, "fill-2");
}

// Seed 2297: a model handle opened while the connection was reconnecting sent its OPEN,
// which the connection refused (not connected); RegistryBack came before that refusal was
// seen, so the open then waited for another RegistryBack that never came. A request of an
// older connection than the one up is asked again at once.
TEST_F(MemberMachineTest, RequestRefusedBeforeRegistryBackIsAskedAgainAtOnce) {
  clear();
  step(OpOpen{1});
  auto first = sent<sched::Open>();
  ASSERT_TRUE(first);
  step(RegistryBack{2});
  clear();
  step(RegistryNoReply{first->first, Code::kRegistry, "not connected to a registry"});
  auto again = sent<sched::Open>();
  ASSERT_TRUE(again) << "the open waits for a registry that is already back";
  ok(again->first, 3);
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kSuccess);
  EXPECT_EQ(m.member(), 3u);
}

// Seed 613: a replicate whose source failed while the registry was away waited, half
// received, for the new registry; its re-open there was refused ("already open"), and the
// operation ended with the error but left the machine receiving: the member stayed half
// filled, its counter vouching for it, with no operation to finish it. It gives up what it
// half holds.
TEST_F(MemberMachineTest, RefusedReopenGivesUpAHalfReceivedVersion) {
  open();
  clear();
  uint64_t op = next_op++;
  step(OpReplicate{op, -1, false});
  step(Prepared{op, 7, "fill-1", 1});
  reply(sent<sched::Replicate>()->first, grant(4, 11));
  uint64_t transfer = 0;
  for (const auto& a : out)
    if (auto* b = std::get_if<BeginTransfer>(&a)) transfer = b->transfer;
  ASSERT_NE(transfer, 0u);
  step(RegistryLost{});
  step(TransferEnded{transfer, Code::kTransport, true, 1024, "source died"});
  ASSERT_EQ(m.receiving(), 4);
  clear();
  step(RegistryBack{1});
  sched::Reply refused{};
  refused.status = sched::Status::kState;
  refused.detail = "shard 0 of replica r is already open";
  reply(sent<sched::Open>()->first, refused);
  ASSERT_TRUE(completed());
  EXPECT_NE(completed()->code, Code::kSuccess);
  EXPECT_EQ(m.receiving(), -1) << "the operation ended, the member still half filled";
  EXPECT_TRUE(did<InvalidateHolding>());
}

}  // namespace
}  // namespace thub::client
