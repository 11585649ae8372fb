// The client's member machine alone (no registry, no UCX): one behaviour per test, each the
// reduction of a schedule the deterministic simulation (tests/sched/) found. Shards and rounds:
// member_machine_round_test.cc.
#include "tests/client/member_machine_fixture.h"

namespace thub::client {
namespace {
using member_machine_testing::MemberMachineTest;

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
// older connection than the one up is asked again at once: at RegistryBack, which takes
// every request to an earlier registry as lost; its refusal, seen after, changes nothing.
TEST_F(MemberMachineTest, RequestRefusedBeforeRegistryBackIsAskedAgainAtOnce) {
  clear();
  step(OpOpen{1});
  auto first = sent<sched::Open>();
  ASSERT_TRUE(first);
  clear();
  step(RegistryBack{2});
  auto again = sent<sched::Open>();
  ASSERT_TRUE(again) << "the open waits for a registry that is already back";
  EXPECT_NE(again->first, first->first);
  clear();
  step(RegistryNoReply{first->first, Code::kRegistry, "not connected to a registry"});
  EXPECT_TRUE(out.empty()) << "the refusal of a request already taken as lost asks nothing again";
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
  replicate_refused_lost(3);
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
  step(TransferProgressed{transfer, 65536, "process_vm_readv"});
  auto p = sent<sched::TransferProgress>();
  ASSERT_TRUE(p) << "no progress report";
  EXPECT_EQ(p->second.member, 1u);
  EXPECT_EQ(p->second.lease, 11u);
  EXPECT_EQ(p->second.bytes, 65536u);
  EXPECT_EQ(p->second.path, "process_vm_readv") << "the read path is told with the bytes";
  clear();
  reply(p->first, refusal(sched::Status::kState, "lease 11 is not active"));
  EXPECT_FALSE(completed()) << "a refused report ended the transfer";
  step(TransferProgressed{transfer + 1, 1, "socket"});  // another transfer's
  EXPECT_FALSE(sent<sched::TransferProgress>());
  failover(1, 2);
  clear();
  step(TransferProgressed{transfer, 131072, "socket"});
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
  uint64_t op = 0;
  uint64_t unpub = lose_during_transfer(ask_update(1, &op), 2, 11);
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

// THUB_DEBUG_MACHINE's lines (member_machine_trace.cc) carry what a report needs: the request
// with its member, version, round and generation; the answer with its status and detail.
TEST_F(MemberMachineTest, TraceLinesNameWhatWasDecided) {
  sched::Replicate r{0, 0, 3, 97, -1, 7, "d", 101, true};
  EXPECT_EQ(describe(MachineAction{SendRequest{175, r, 1}}),
            "send req 175 (generation 1): REPLICATE member 3 spec 97 newer_than -1 round 101 whole");
  sched::Reply refused{};
  refused.status = sched::Status::kState;
  refused.detail = "member is holding version 97";
  EXPECT_EQ(describe(MachineEvent{RegistryReply{175, refused}}),
            "reply to req 175: status -2 v-1 lease 0 member 0 (member is holding version 97)");
  EXPECT_EQ(describe(MachineEvent{RegistryBack{2}}), "registry back, generation 2");
  EXPECT_EQ(describe(MachineAction{CompleteOp{9, Code::kSuccess, 4, ""}}), "complete op 9: code 0 holding v4");
  // Every event and action has a line (a new alternative without one does not compile).
  for (const MachineEvent& e : {MachineEvent{RegistryLost{}}, MachineEvent{TransferEnded{2, Code::kTransport, true, 64, "gone"}}})
    EXPECT_FALSE(describe(e).empty());
}

}  // namespace
}  // namespace thub::client
