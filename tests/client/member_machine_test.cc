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

  // The transfer the machine began last since clear(), or 0.
  uint64_t began() const {
    uint64_t t = 0;
    for (const auto& a : out)
      if (auto* b = std::get_if<BeginTransfer>(&a)) t = b->transfer;
    return t;
  }
  sched::Reply refusal(sched::Status st, const char* detail) {
    sched::Reply r{};
    r.status = st;
    r.detail = detail;
    return r;
  }
  // A transfer of `version` under lease `lease` whose source fails; the registry answers the
  // SourceFailed with VERSION_LOST (no holder left), so the machine gives its partial
  // buffers up: the Unpublish is sent and not yet answered. Returns the Unpublish's id.
  uint64_t lose_during_transfer(uint64_t req, int64_t version, uint64_t lease) {
    reply(req, grant(version, lease));
    uint64_t transfer = began();
    EXPECT_NE(transfer, 0u);
    clear();
    step(TransferEnded{transfer, Code::kTransport, true, 1024, "source died"});
    auto failed = sent<sched::SourceFailed>();
    EXPECT_TRUE(failed);
    clear();
    reply(failed->first, refusal(sched::Status::kVersionLost, "every holder of version is gone"));
    EXPECT_TRUE(did<InvalidateHolding>());
    auto unpub = sent<sched::Unpublish>();
    EXPECT_TRUE(unpub);
    EXPECT_FALSE(completed());
    clear();
    return unpub->first;
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
  // Shard `shard` of a replica of two shards, opened, asks round 1 for the latest and is
  // granted v4 (lease 11): returns the transfer begun; *op: the operation.
  uint64_t granted_in_round(int shard, uint64_t* op) {
    m = MemberMachine{MemberIdentity{"m", "r", shard, 2, 0, false}};
    open();
    clear();
    *op = next_op++;
    step(OpReplicate{*op, -1, false});
    step(Prepared{*op, 7, "fill", 1});
    auto rep = sent<sched::Replicate>();
    EXPECT_TRUE(rep);
    if (!rep) return 0;
    reply(rep->first, grant(4, 11));
    return began();
  }
  // A shard granted in round 1 (granted_in_round) whose registry fails over: RegistryBack
  // sends its OPEN, which reports round 1 in progress (checked). Returns the transfer.
  uint64_t reopening_in_round(std::optional<std::pair<uint64_t, sched::Open>>* reopen) {
    uint64_t op = 0;
    uint64_t transfer = granted_in_round(0, &op);
    EXPECT_NE(transfer, 0u);
    clear();
    step(RegistryLost{});
    step(RegistryBack{1});
    *reopen = sent<sched::Open>();
    EXPECT_TRUE(*reopen);
    if (*reopen) {
      EXPECT_EQ((*reopen)->second.round, 1u);
      EXPECT_TRUE((*reopen)->second.round_open) << "round 1 is in progress here: nothing may commit it without this shard";
      EXPECT_EQ((*reopen)->second.round_version, 4);
    }
    return transfer;
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


// Issue 13 item 3: a request for the latest whose version lost its last holder before the
// grant is resolved once more (a new fill: the first descriptor may have been promised), and
// ends VERSION_LOST at the second loss.
TEST_F(MemberMachineTest, LatestWhoseVersionIsLostAtTheAnswerMovesOnOnce) {
  open();
  clear();
  uint64_t op = next_op++;
  step(OpReplicate{op, -1, false});
  step(Prepared{op, 7, "fill-1", 1});
  auto first = sent<sched::Replicate>();
  ASSERT_TRUE(first);
  clear();
  reply(first->first, refusal(sched::Status::kVersionLost, "every holder of version 3 is gone"));
  EXPECT_FALSE(completed()) << "a latest request ended with the loss of the version it resolved to";
  ASSERT_TRUE(did<PrepareFill>());
  step(Prepared{op, 7, "fill-2", 2});
  auto again = sent<sched::Replicate>();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->second.spec, -1);
  EXPECT_EQ(again->second.newer_than, -1);
  EXPECT_EQ(again->second.descriptor, "fill-2");
  clear();
  reply(again->first, refusal(sched::Status::kVersionLost, "every holder of version 4 is gone"));
  ASSERT_TRUE(completed()) << "moved on twice";
  EXPECT_EQ(completed()->code, Code::kVersionLost);
  EXPECT_EQ(m.counters().moved_on, 1u);
}

// A version asked for by number ends with its loss: it asked for that version.
TEST_F(MemberMachineTest, AbsoluteSpecEndsWithTheLossOfItsVersion) {
  open();
  clear();
  uint64_t op = next_op++;
  step(OpReplicate{op, 3, false});
  step(Prepared{op, 7, "fill-1", 1});
  auto rep = sent<sched::Replicate>();
  ASSERT_TRUE(rep);
  clear();
  reply(rep->first, refusal(sched::Status::kVersionLost, "every holder of version 3 is gone"));
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kVersionLost);
  EXPECT_FALSE(did<PrepareFill>());
}

// Issue 19: a grant naming another version than an absolute request asked for (a lying
// registry, or a relay rewriting frames) is given back unread; the request fails, never
// reporting the other version as a success.
TEST_F(MemberMachineTest, GrantOfAnotherVersionThanAskedIsGivenBackUnread) {
  open();
  clear();
  uint64_t op = next_op++;
  step(OpReplicate{op, 1, false});
  step(Prepared{op, 7, "fill-1", 1});
  auto rep = sent<sched::Replicate>();
  ASSERT_TRUE(rep);
  clear();
  reply(rep->first, grant(7, 5));
  EXPECT_EQ(began(), 0u) << "nothing is read from the source the lie names";
  auto unpub = sent<sched::Unpublish>();
  ASSERT_TRUE(unpub) << "the grant is given back";
  EXPECT_FALSE(completed());
  ok(unpub->first);
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kRegistry);
  EXPECT_NE(completed()->detail.find("granted version 7 for a request of version 1"), std::string::npos)
      << completed()->detail;
  EXPECT_EQ(m.held(), -1);
}

// Lost during the transfer: the partial buffers are given up first (counter invalidated,
// Unpublish answered), then the latest is asked again and read from byte 0 under a new fill.
TEST_F(MemberMachineTest, LatestLostDuringTheTransferGivesUpThenMovesOn) {
  open();
  clear();
  uint64_t op = next_op++;
  step(OpReplicate{op, -1, false});
  step(Prepared{op, 7, "fill-1", 1});
  uint64_t unpub = lose_during_transfer(sent<sched::Replicate>()->first, 4, 11);
  EXPECT_FALSE(did<PrepareFill>()) << "asked again before the partial buffers were given up";
  ok(unpub);
  EXPECT_FALSE(completed());
  ASSERT_TRUE(did<PrepareFill>());
  EXPECT_EQ(m.receiving(), -1);
  step(Prepared{op, 7, "fill-2", 2});
  auto again = sent<sched::Replicate>();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->second.spec, -1);
  EXPECT_EQ(again->second.newer_than, -1);
  clear();
  reply(again->first, grant(5, 12));
  bool from_zero = false;
  for (const auto& a : out)
    if (auto* b = std::get_if<BeginTransfer>(&a)) from_zero = b->version == 5 && b->start == 0 && b->fill == 2;
  ASSERT_TRUE(from_zero) << "the new version is not read from byte 0 under the new fill";
  uint64_t transfer = began();
  clear();
  step(TransferEnded{transfer, Code::kSuccess, false, 4096, ""});
  ok(sent<sched::TransferDone>()->first);
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kSuccess);
  EXPECT_EQ(m.held(), 5);
}

// Issue 19: the version a latest request was reading is lost and nothing else is left: the
// loss is the answer (docs/integrity.md), not the re-ask's "no version is available".
TEST_F(MemberMachineTest, LatestLostWithNothingLeftEndsWithTheLoss) {
  open();
  clear();
  uint64_t op = next_op++;
  step(OpReplicate{op, -1, false});
  step(Prepared{op, 7, "fill-1", 1});
  uint64_t unpub = lose_during_transfer(sent<sched::Replicate>()->first, 4, 11);
  ok(unpub);
  step(Prepared{op, 7, "fill-2", 2});
  auto again = sent<sched::Replicate>();
  ASSERT_TRUE(again);
  clear();
  reply(again->first, refusal(sched::Status::kNotFound, "no version of model m is available"));
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kVersionLost) << completed()->detail;
}

// Issue 19: a transfer resumed at a registry that took over and never heard of its version
// (its only holder died before publishing it there) ends with the loss, not a transport
// error.
TEST_F(MemberMachineTest, ResumeAtARegistryThatNeverHeardOfTheVersionIsALoss) {
  open();
  clear();
  uint64_t op = next_op++;
  step(OpReplicate{op, 4, false});
  step(Prepared{op, 7, "fill", 1});
  reply(sent<sched::Replicate>()->first, grant(4, 11));
  uint64_t transfer = began();
  ASSERT_NE(transfer, 0u);
  failover(1, 2);
  clear();
  step(TransferEnded{transfer, Code::kTransport, true, 1024, "source died"});
  auto again = sent<sched::Replicate>();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->second.spec, 4);
  clear();
  reply(again->first, refusal(sched::Status::kNotFound, "version 4 of model m was never published"));
  auto unpub = sent<sched::Unpublish>();
  ASSERT_TRUE(unpub) << "the partial holding is not given up";
  clear();
  ok(unpub->first);
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kVersionLost) << completed()->detail;
}

// Issue 19: the transfer's progress goes to the registry that granted the read, with its
// lease and the bytes held; not to a registry that took over (it knows no lease of ours),
// and not once the transfer ended.
TEST_F(MemberMachineTest, ProgressIsReportedToTheRegistryThatGrantedTheRead) {
  open();
  clear();
  uint64_t op = next_op++;
  step(OpReplicate{op, -1, false});
  step(Prepared{op, 7, "fill", 1});
  reply(sent<sched::Replicate>()->first, grant(4, 11));
  uint64_t transfer = began();
  ASSERT_NE(transfer, 0u);
  clear();
  step(TransferProgressed{transfer, 65536});
  auto p = sent<sched::TransferProgress>();
  ASSERT_TRUE(p) << "no progress report";
  EXPECT_EQ(p->second.member, 1u);
  EXPECT_EQ(p->second.lease, 11u);
  EXPECT_EQ(p->second.bytes, 65536u);
  clear();
  reply(p->first, refusal(sched::Status::kState, "lease 11 is not active"));
  EXPECT_FALSE(completed()) << "a refused report ended the transfer";
  step(TransferProgressed{transfer + 1, 1});  // another transfer's
  EXPECT_FALSE(sent<sched::TransferProgress>());
  failover(1, 2);
  clear();
  step(TransferProgressed{transfer, 131072});
  EXPECT_FALSE(sent<sched::TransferProgress>()) << "reported to a registry that did not grant the read";
}

// An update in place that lost the newer version during its transfer holds nothing any more
// (its buffers were overwritten): asked again, it keeps newer_than h, and when nothing newer
// than h is left the registry's NOT_UPDATED ends it with the loss; it does not claim to
// still hold h (the simulation's promise check: "not updated, but holds another version").
TEST_F(MemberMachineTest, UpdateLostDuringTheTransferEndsWithTheLossWhenNothingNewerIsLeft) {
  open();
  publish(1);
  clear();
  uint64_t op = next_op++;
  step(OpReplicate{op, -1, true});
  step(Prepared{op, 7, "fill-2", 2});
  auto rep = sent<sched::Replicate>();
  ASSERT_TRUE(rep);
  EXPECT_EQ(rep->second.newer_than, 1);
  uint64_t unpub = lose_during_transfer(rep->first, 2, 11);
  ok(unpub);
  ASSERT_TRUE(did<PrepareFill>());
  step(Prepared{op, 7, "fill-3", 3});
  auto again = sent<sched::Replicate>();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->second.newer_than, 1) << "an update asked again for anything, older than what it gave up too";
  clear();
  reply(again->first, refusal(sched::Status::kNotUpdated, "nothing newer than 1"));
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kVersionLost);
  EXPECT_EQ(completed()->version, -1);
  EXPECT_EQ(m.held(), -1);
}

// A shard of a multi-shard replica does not move alone: its siblings share its round.
TEST_F(MemberMachineTest, ShardOfALargerReplicaEndsWithTheLoss) {
  m = MemberMachine{MemberIdentity{"m", "r", 1, 2, 0, false}};
  open();
  clear();
  uint64_t op = next_op++;
  step(OpReplicate{op, -1, false});
  step(Prepared{op, 7, "fill-1", 1});
  auto rep = sent<sched::Replicate>();
  ASSERT_TRUE(rep);
  clear();
  reply(rep->first, refusal(sched::Status::kVersionLost, "every holder of version 3 is gone"));
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kVersionLost);
  EXPECT_FALSE(did<PrepareFill>());
}

// A shard of a larger replica whose round moved (issue 18: another shard lost the round's
// version; the registry answers our TransferDone with VERSION_LOST and the new version): it
// gives up what it holds, waits for the drain (UNPUBLISH), and asks the round again with the
// same spec and round, under a new fill; told the round failed (no version), it ends so.
TEST_F(MemberMachineTest, ShardWhoseRoundMovedGivesUpAndAsksTheRoundAgain) {
  m = MemberMachine{MemberIdentity{"m", "r", 1, 2, 0, false}};
  open();
  clear();
  uint64_t op = next_op++;
  step(OpReplicate{op, -1, false});
  step(Prepared{op, 7, "fill-1", 1});
  auto rep = sent<sched::Replicate>();
  ASSERT_TRUE(rep);
  const uint64_t round = rep->second.round;
  reply(rep->first, grant(3, 11));
  uint64_t transfer = began();
  clear();
  step(TransferEnded{transfer, Code::kSuccess, false, 4096, ""});
  auto done = sent<sched::TransferDone>();
  ASSERT_TRUE(done);
  clear();
  sched::Reply moved = refusal(sched::Status::kVersionLost, "the round moved to version 4");
  moved.version = 4;
  reply(done->first, moved);
  EXPECT_FALSE(completed());
  EXPECT_TRUE(did<InvalidateHolding>());
  EXPECT_EQ(m.held(), -1);
  auto unpub = sent<sched::Unpublish>();
  ASSERT_TRUE(unpub) << "asked again before the registry drained what it held";
  EXPECT_FALSE(did<PrepareFill>());
  clear();
  ok(unpub->first);
  ASSERT_TRUE(did<PrepareFill>());
  step(Prepared{op, 7, "fill-2", 2});
  auto again = sent<sched::Replicate>();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->second.spec, -1);
  EXPECT_EQ(again->second.round, round);
  clear();
  reply(again->first, grant(4, 12));
  transfer = began();
  clear();
  step(TransferEnded{transfer, Code::kSuccess, false, 4096, ""});
  // Moved a second time: the registry bounds the moves, the shard follows every one.
  done = sent<sched::TransferDone>();
  ASSERT_TRUE(done);
  clear();
  reply(done->first, refusal(sched::Status::kVersionLost, "every holder of version 4 is gone"));
  unpub = sent<sched::Unpublish>();
  ASSERT_TRUE(unpub);
  clear();
  ok(unpub->first);
  ASSERT_TRUE(completed()) << "a round that failed (no version told) is not asked again";
  EXPECT_EQ(completed()->code, Code::kVersionLost);
  EXPECT_FALSE(did<PrepareFill>());
  EXPECT_EQ(m.held(), -1);
}

// A host copy that could not be made was only dropped: the registry kept the member
// offloading and its unpublish waited for an OffloadDone that never came (THUB_SIM_OFFLOAD_
// FAILURES=1: 431 of seeds 1-1,000 left a request unanswered). The registry is told, with an
// OffloadDone that names no copy.
TEST_F(MemberMachineTest, FailedHostCopyIsToldToTheRegistry) {
  open();
  publish(1);
  clear();
  step(OffloadOrdered{1, 1});
  ASSERT_TRUE(did<MakeHostCopy>());
  clear();
  step(HostCopyMade{1, false, "", "no host memory"});
  auto done = sent<sched::OffloadDone>();
  ASSERT_TRUE(done) << "the registry waits for a copy that will never be made";
  EXPECT_EQ(done->second.version, 1);
  EXPECT_EQ(done->second.descriptor, "");
  EXPECT_TRUE(m.host_copies().empty());
  ok(done->first);
  EXPECT_FALSE(did<DropHostCopy>());
}

// The stale-transaction finding (docs/sched.md): a replica's shards ask in lockstep, so the
// n-th replicate or update of a model handle is one round, and REPLICATE says which.
TEST_F(MemberMachineTest, ReplicateCarriesItsRound) {
  m = MemberMachine{MemberIdentity{"m", "r", 0, 2, 0, false}};
  open();
  for (uint64_t round = 1; round <= 2; ++round) {
    clear();
    uint64_t op = next_op++;
    step(OpReplicate{op, -1, round == 2});
    step(Prepared{op, 7, "fill", static_cast<uint32_t>(round)});
    auto rep = sent<sched::Replicate>();
    ASSERT_TRUE(rep);
    EXPECT_EQ(rep->second.round, round);
    reply(rep->first, refusal(sched::Status::kNotFound, "no version"));
    ASSERT_TRUE(completed());
  }
}

// A round canceled before its REPLICATE reached a registry: the other shards' transaction of
// it at the registry must not wait for this shard (a slot kept for it held up other replicas
// for ever: seed 782 with THUB_SIM_STRICT=1). The machine says the round is done (a CANCEL
// with the round), at once when it can, else after the re-open at the next registry.
TEST_F(MemberMachineTest, RoundCanceledBeforeItWasAskedIsToldDone) {
  m = MemberMachine{MemberIdentity{"m", "r", 1, 2, 0, false}};
  open(5);
  clear();
  uint64_t op = next_op++;
  step(OpReplicate{op, -1, false});
  step(OpCancel{op});
  step(Prepared{op, 7, "fill", 1});
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kCanceled);
  EXPECT_FALSE(sent<sched::Replicate>());
  auto done = sent<sched::Cancel>();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->second.member, 5u);
  EXPECT_EQ(done->second.round, 1u);
  // Round 2 waits for a registry and is canceled there; the next registry hears of it.
  clear();
  step(RegistryLost{});
  op = next_op++;
  step(OpReplicate{op, -1, false});
  step(Prepared{op, 7, "fill", 2});
  step(OpCancel{op});
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kCanceled);
  EXPECT_FALSE(sent<sched::Cancel>());
  clear();
  step(RegistryBack{1});
  // The re-open says it (protocol 7: in the same step as the shard opens there, so that no
  // sibling's request of round 2 is decided before), with no answer to share (its own cancel).
  auto reopen = sent<sched::Open>();
  ASSERT_TRUE(reopen);
  EXPECT_EQ(reopen->second.round, 2u);
  EXPECT_FALSE(reopen->second.round_open);
  EXPECT_EQ(reopen->second.round_status, sched::Status::kOk);
  EXPECT_EQ(reopen->second.round_version, -1);
  ok(reopen->first, 6);
  EXPECT_FALSE(sent<sched::Cancel>());
}

// Issue 18, a round across a registry failover: the re-open of a shard of a replica of
// several shards reports how its latest round ended, the version it holds or the round's
// error (a sibling whose answer was lost with the registry before gets the same there), and a
// round still in its transfer as open, with the version granted and the round's request.
TEST_F(MemberMachineTest, ReopenReportsItsLatestRound) {
  m = MemberMachine{MemberIdentity{"m", "r", 0, 2, 0, false}};
  open(5);
  // Round 1 ends NOT_FOUND at the registry.
  uint64_t op = next_op++;
  step(OpReplicate{op, -1, false});
  step(Prepared{op, 7, "fill", 1});
  reply(sent<sched::Replicate>()->first, refusal(sched::Status::kNotFound, "nothing published"));
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kNotFound);
  failover(1, 6);
  clear();
  step(RegistryLost{});
  step(RegistryBack{2});
  auto reopen = sent<sched::Open>();
  ASSERT_TRUE(reopen);
  EXPECT_EQ(reopen->second.round, 1u);
  EXPECT_FALSE(reopen->second.round_open);
  EXPECT_EQ(reopen->second.round_status, sched::Status::kNotFound);
  EXPECT_EQ(reopen->second.round_version, -1);
  ok(reopen->first, 7);
  // Round 2 succeeds with version 4: reported with its version.
  clear();
  op = next_op++;
  step(OpReplicate{op, -1, false});
  step(Prepared{op, 7, "fill", 2});
  reply(sent<sched::Replicate>()->first, grant(4, 11));
  uint64_t transfer = began();
  clear();
  step(TransferEnded{transfer, Code::kSuccess, false, 4096, ""});
  ok(sent<sched::TransferDone>()->first);
  ASSERT_TRUE(completed());
  clear();
  step(RegistryLost{});
  step(RegistryBack{3});
  reopen = sent<sched::Open>();
  ASSERT_TRUE(reopen);
  EXPECT_EQ(reopen->second.round, 2u);
  EXPECT_FALSE(reopen->second.round_open);
  EXPECT_EQ(reopen->second.round_status, sched::Status::kOk);
  EXPECT_EQ(reopen->second.round_version, 4);
  ok(reopen->first, 8);
  // Round 3, an update (newer than 4), granted 6 and still in its transfer: reported open.
  auto pub = sent<sched::Publish>();
  ASSERT_TRUE(pub);
  ok(pub->first);
  clear();
  op = next_op++;
  step(OpReplicate{op, -1, true});
  step(Prepared{op, 7, "fill", 3});
  reply(sent<sched::Replicate>()->first, grant(6, 12));
  ASSERT_NE(began(), 0u);
  clear();
  step(RegistryLost{});
  step(RegistryBack{4});
  reopen = sent<sched::Open>();
  ASSERT_TRUE(reopen);
  EXPECT_EQ(reopen->second.round, 3u);
  EXPECT_TRUE(reopen->second.round_open);
  EXPECT_EQ(reopen->second.round_version, 6);
  EXPECT_EQ(reopen->second.round_spec, -1);
  EXPECT_EQ(reopen->second.round_newer_than, 4);
}

// A resume in a round of several shards answered with an error ends with that error: it is
// the round's, which its siblings get too (it used to end THUB_ERR_TRANSPORT beside their
// THUB_ERR_NOT_FOUND).
TEST_F(MemberMachineTest, AResumeRefusedInARoundEndsWithTheRoundsError) {
  uint64_t op = 0;
  uint64_t transfer = granted_in_round(0, &op);
  ASSERT_NE(transfer, 0u);
  failover(1, 2);
  clear();
  step(TransferEnded{transfer, Code::kTransport, true, 0, "source died"});
  auto again = sent<sched::Replicate>();
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->second.whole);
  clear();
  reply(again->first, refusal(sched::Status::kNotFound, "version 4 was never published"));
  auto unpub = sent<sched::Unpublish>();
  ASSERT_TRUE(unpub);
  reply(unpub->first, refusal(sched::Status::kState, "nothing published"));
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kNotFound);
}

// After a failover a shard resumes the version the old registry granted it, in its round.
// Its round is in progress: the re-open does not say it is done with round 1 (issue 18: the
// transaction of round 1 at the new registry, opened by its resume or by a sibling asking
// afresh, waits for it, so that every shard gets one answer there).
TEST_F(MemberMachineTest, ResumeAtANewRegistryAsksInItsRound) {
  std::optional<std::pair<uint64_t, sched::Open>> reopen;
  uint64_t transfer = reopening_in_round(&reopen);
  ASSERT_TRUE(transfer != 0 && reopen);
  ok(reopen->first, 2);
  EXPECT_FALSE(sent<sched::Cancel>());
  clear();
  step(TransferEnded{transfer, Code::kTransport, true, 0, "source died"});
  auto again = sent<sched::Replicate>();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->second.spec, 4);
  EXPECT_EQ(again->second.round, 1u);
}

// Seed 3962 (THUB_SIM_TIMEOUTS=1): the re-open reported round 1 in progress (its transfer
// went on), then the transfer failed here before the OPEN was answered: its give-up had no
// member to go to. Once the OPEN is answered the registry is told how the round ended here,
// so that the sibling kept waiting for this shard gets that answer too.
TEST_F(MemberMachineTest, RoundThatEndedBeforeTheReopenWasAnsweredIsToldDone) {
  std::optional<std::pair<uint64_t, sched::Open>> reopen;
  uint64_t transfer = reopening_in_round(&reopen);
  ASSERT_TRUE(transfer != 0 && reopen);
  step(TransferEnded{transfer, Code::kTransport, false, 0, "copying out to the tensors failed"});
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kTransport);
  EXPECT_FALSE(sent<sched::Cancel>()) << "no member to tell yet";
  clear();
  ok(reopen->first, 2);
  auto done = sent<sched::Cancel>();
  ASSERT_TRUE(done) << "the round this shard reported open ended here unasked";
  EXPECT_EQ(done->second.member, 2u);
  EXPECT_EQ(done->second.round, 1u);
  EXPECT_EQ(done->second.status, sched::Status::kTransport);
  // A round still in progress at the answer is not told done (ResumeAtANewRegistryAsksInItsRound).
}

// Issue 18, a round across a registry failover: a shard of a replica of several shards whose
// TransferDone waited for the round's commit when the registry died does not end with
// success (its siblings, whose answers were lost, may get another answer at the next
// registry). It resumes its round there from its end, and ends with the round's answer: here
// the round moved to v5 (a sibling asked it afresh first), so it gives v4 up and asks again.
TEST_F(MemberMachineTest, CommitLostWithTheRegistryIsAskedAgainAtTheNext) {
  uint64_t op = 0;
  uint64_t transfer = granted_in_round(0, &op);
  clear();
  step(TransferEnded{transfer, Code::kSuccess, false, 4096, ""});
  auto done = sent<sched::TransferDone>();
  ASSERT_TRUE(done);
  clear();
  step(RegistryLost{});
  step(RegistryNoReply{done->first, Code::kRegistry, "lost the connection"});
  EXPECT_FALSE(completed()) << "the round's commit is unknown: no answer yet";
  step(RegistryBack{1});
  auto reopen = sent<sched::Open>();
  ASSERT_TRUE(reopen);
  EXPECT_TRUE(reopen->second.round_open) << "the round is still open here";
  EXPECT_EQ(reopen->second.round_version, 4);
  ok(reopen->first, 2);
  EXPECT_FALSE(sent<sched::Publish>()) << "not a holder before its round commits";
  auto resume = sent<sched::Replicate>();
  ASSERT_TRUE(resume);
  EXPECT_EQ(resume->second.spec, 4);
  EXPECT_EQ(resume->second.round, 1u);
  EXPECT_TRUE(resume->second.whole) << "it holds version 4 whole: nothing to read";
  EXPECT_FALSE(completed());
  clear();
  sched::Reply moved = refusal(sched::Status::kVersionLost, "the round moved");
  moved.version = 5;
  reply(resume->first, moved);
  EXPECT_TRUE(did<InvalidateHolding>());
  auto unpub = sent<sched::Unpublish>();
  ASSERT_TRUE(unpub);
  clear();
  reply(unpub->first, refusal(sched::Status::kState, "nothing published"));
  EXPECT_FALSE(completed());
  step(Prepared{op, 7, "fill", 2});
  auto ask = sent<sched::Replicate>();
  ASSERT_TRUE(ask);
  EXPECT_EQ(ask->second.spec, -1);
  EXPECT_EQ(ask->second.round, 1u);
  reply(ask->first, grant(5, 3));
  transfer = began();
  clear();
  step(TransferEnded{transfer, Code::kSuccess, false, 4096, ""});
  ok(sent<sched::TransferDone>()->first);
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kSuccess);
  EXPECT_EQ(completed()->version, 5);
}

// The same when the transfer ends after the registry that granted it is gone: the round is
// resumed at the next one from its end, saying it holds the version whole (Replicate::whole:
// the registry counts it as a holder without a source, so a round whose version has no
// other holder left there still commits), and the round's commit (lease 0) ends it with
// success, nothing read (a single shard ends with success at once, as before).
TEST_F(MemberMachineTest, TransferEndingAfterItsRegistryWentResumesTheRound) {
  uint64_t op = 0;
  uint64_t transfer = granted_in_round(1, &op);
  failover(1, 2);
  clear();
  step(TransferEnded{transfer, Code::kSuccess, false, 4096, ""});
  EXPECT_FALSE(completed());
  auto resume = sent<sched::Replicate>();
  ASSERT_TRUE(resume);
  EXPECT_EQ(resume->second.spec, 4);
  EXPECT_EQ(resume->second.round, 1u);
  EXPECT_TRUE(resume->second.whole);
  clear();
  sched::Reply commit{};
  commit.version = 4;
  reply(resume->first, commit);
  EXPECT_EQ(began(), 0u) << "nothing is read again";
  EXPECT_FALSE(sent<sched::TransferDone>());
  ASSERT_TRUE(completed());
  EXPECT_EQ(completed()->code, Code::kSuccess);
  EXPECT_EQ(completed()->version, 4);
  // It holds version 4: the next registry hears of it again.
  failover(2, 3);
  auto pub = sent<sched::Publish>();
  ASSERT_TRUE(pub);
  EXPECT_EQ(pub->second.version, 4);
}

// timeout_ms on a REPLICATE that waits at the registry (THUB_SIM_TIMEOUTS=1): ending it
// THUB_ERR_TIMEOUT left it pending there, and its later grant, taken by nobody, held its
// source's drain for ever. It is withdrawn: CANCEL; a grant that crossed it is given back
// (UNPUBLISH); then THUB_ERR_TIMEOUT.
TEST_F(MemberMachineTest, ReplicatePastItsDeadlineIsWithdrawn) {
  open(4);
  for (bool crossed : {false, true}) {
    clear();
    uint64_t op = next_op++;
    step(OpReplicate{op, -1, false});
    step(Prepared{op, 7, "fill", 1});
    auto rep = sent<sched::Replicate>();
    ASSERT_TRUE(rep);
    for (const auto& a : out) {
      if (auto* r = std::get_if<SendRequest>(&a)) {
        EXPECT_TRUE(r->deadline);
      }
    }
    clear();
    step(RegistryNoReply{rep->first, Code::kTimeout, "no reply within its deadline"});
    EXPECT_FALSE(completed());
    auto cancel = sent<sched::Cancel>();
    ASSERT_TRUE(cancel);
    EXPECT_EQ(cancel->second.member, 4u);
    clear();
    if (!crossed) {
      ok(cancel->first);  // it still waited: canceled
    } else {
      reply(cancel->first, refusal(sched::Status::kState, "no replicate of this member waits"));
      auto unpub = sent<sched::Unpublish>();
      ASSERT_TRUE(unpub) << "a grant that crossed the CANCEL would hold its source for ever";
      EXPECT_FALSE(completed());
      ok(unpub->first);
    }
    ASSERT_TRUE(completed());
    EXPECT_EQ(completed()->code, Code::kTimeout);
    EXPECT_EQ(m.phase(), MemberMachine::Phase::kIdle);
  }
}

// What cannot be withdrawn has no deadline: a TRANSFER_DONE past timeout_ms failed an
// operation whose member held the version.
TEST_F(MemberMachineTest, TransferDoneHasNoDeadline) {
  open();
  clear();
  uint64_t op = next_op++;
  step(OpReplicate{op, -1, false});
  step(Prepared{op, 7, "fill", 1});
  reply(sent<sched::Replicate>()->first, grant(3, 8));
  uint64_t transfer = began();
  clear();
  step(TransferEnded{transfer, Code::kSuccess, false, 4096, ""});
  auto done = sent<sched::TransferDone>();
  ASSERT_TRUE(done);
  for (const auto& a : out) {
    if (auto* r = std::get_if<SendRequest>(&a)) {
      EXPECT_FALSE(r->deadline);
    }
  }
}

}  // namespace
}  // namespace thub::client
