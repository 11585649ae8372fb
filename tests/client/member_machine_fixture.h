// The fixture of the member machine's tests (member_machine_test.cc, member_machine_round_test.cc):
// one machine, the actions it emitted, and helpers that answer its requests.
#pragma once

#include "src/client/member_machine.h"

#include <gtest/gtest.h>

#include <optional>
#include <utility>
#include <variant>
#include <vector>

namespace thub::client {
// Named, not anonymous: one fixture class for the tests of both files (GoogleTest requires it).
namespace member_machine_testing {

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

  // THUB_Update of the latest by a machine that holds `held`: its REPLICATE's request id
  // (checked: it asks for something newer than `held`), the actions cleared after it.
  uint64_t ask_update(int64_t held, uint64_t* op) {
    *op = next_op++;
    step(OpReplicate{*op, -1, true});
    step(Prepared{*op, 7, "fill-2", 2});
    auto rep = sent<sched::Replicate>();
    EXPECT_TRUE(rep);
    if (!rep) return 0;
    EXPECT_EQ(rep->second.newer_than, held);
    clear();
    return rep->first;
  }
  // The transfer ends whole: the TRANSFER_DONE's request id (0: none sent), actions cleared.
  uint64_t end_transfer(uint64_t transfer) {
    clear();
    step(TransferEnded{transfer, Code::kSuccess, false, 4096, ""});
    auto done = sent<sched::TransferDone>();
    EXPECT_TRUE(done);
    clear();
    return done ? done->first : 0;
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
  // The re-open just sent reports a round that ended: its number, status and version; it is
  // answered with `member`.
  void expect_reopen_reports(uint64_t round, sched::Status status, sched::Version version, sched::MemberId member) {
    auto reopen = sent<sched::Open>();
    ASSERT_TRUE(reopen);
    EXPECT_EQ(reopen->second.round, round);
    EXPECT_FALSE(reopen->second.round_open);
    EXPECT_EQ(reopen->second.round_status, status);
    EXPECT_EQ(reopen->second.round_version, version);
    ok(reopen->first, member);
  }
  // A replicate of `spec` that the registry refuses with VERSION_LOST ends so, with no fill.
  void replicate_refused_lost(int64_t spec) {
    uint64_t op = next_op++;
    step(OpReplicate{op, spec, false});
    step(Prepared{op, 7, "fill-1", 1});
    auto rep = sent<sched::Replicate>();
    ASSERT_TRUE(rep);
    clear();
    reply(rep->first, refusal(sched::Status::kVersionLost, "every holder of version 3 is gone"));
    ASSERT_TRUE(completed());
    EXPECT_EQ(completed()->code, Code::kVersionLost);
    EXPECT_FALSE(did<PrepareFill>());
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

}  // namespace member_machine_testing
}  // namespace thub::client
