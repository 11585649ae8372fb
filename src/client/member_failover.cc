// The member machine (member_machine.h) when its registry goes: requests that got no reply,
// the registry lost and back (the session reopened, the holding published again, the operation
// resumed), and a registry gone for good. The rest of the machine is member_machine.cc.
#include <utility>

#include "src/client/member_machine.h"

namespace thub::client {

void MemberMachine::on(const RegistryNoReply& e) {
  auto it = pending_.find(e.req);
  if (it == pending_.end()) return;
  const Purpose p = it->second.purpose;
  // Sent on an older connection than the one now up: its failure (seen after RegistryBack,
  // e.g. refused while reconnecting) concerns neither this registry's re-open nor re-publish,
  // and an operation asks again at once instead of waiting for another RegistryBack.
  const bool back_already = it->second.generation != generation_ && up_;
  pending_.erase(it);
  offload_reqs_.erase(e.req);
  if (p == Purpose::kReopen && !back_already) open_pending_ = false;
  if (p == Purpose::kRepublish && !back_already) {
    // Lost with the connection: the next registry is told again. Past its deadline: it may
    // or may not have been taken; what waits for it goes on.
    republish_pending_ = false;
    if (e.code != Code::kRegistry) resume_op();
  }
  if (p == Purpose::kOp && op_) lost_op_request(e.code, e.detail, back_already);
}

// The current operation's request got no answer.
void MemberMachine::lost_op_request(Code code, const std::string& detail, bool back_already) {
  Op& op = *op_;
  switch (op.stage) {
    case Stage::kDoneSent:
      if (code == Code::kRegistry && in_round()) {
        // The round's commit was lost with its registry: its other shards may get another
        // answer at the next one. This shard resumes the round there with what it holds
        // (a resume at its end: nothing left to read), and ends with that round's answer.
        phase_ = Phase::kReceiving;
        whole_ = true;
        wait_registry();
        if (back_already) resume_op();
        return;
      }
      if (code == Code::kRegistry) {
        // The data is whole and checked; only the registry is gone: the next one learns it.
        phase_ = Phase::kHolding;
        needs_publish_ = true;
        if (back_already && member_ != 0 && !open_pending_) republish();
        return finish(Code::kSuccess);
      }
      return finish(code, "transfer done: " + detail);
    case Stage::kGivingUp:
    case Stage::kWithdrawing:  // a registry that is gone keeps nothing of ours
      return finish(op.error, op.detail);
    case Stage::kClosing:
      phase_ = Phase::kClosed;
      host_.clear();
      out_.emplace_back(DropHostCopy{-1});
      return finish(Code::kSuccess);
    case Stage::kRecovering:
      if (code == Code::kRegistry && !op.retried) {
        wait_registry();  // ask the next registry for the same version
        if (back_already) resume_op();
        return;
      }
      return give_up(code, op.detail + "; " + detail);
    default:
      break;
  }
  if (op.kind == Kind::kClose) {  // its unpublish: a registry that is gone forgets us anyway
    out_.emplace_back(InvalidateHolding{});
    phase_ = Phase::kClosed;
    host_.clear();
    out_.emplace_back(DropHostCopy{-1});
    return finish(Code::kSuccess);
  }
  if (code == Code::kRegistry && !op.retried) {
    wait_registry();  // asked again once another registry answers
    if (back_already) resume_op();
    return;
  }
  if (code == Code::kTimeout && op.kind == Kind::kReplicate && op.stage == Stage::kAsked) {
    // Past the deadline the REPLICATE may still wait at the registry, or be granted any time:
    // withdrawn (else its grant, which nobody takes, would hold its source's drain for ever).
    op.stage = Stage::kWithdrawing;
    op.error = code;
    op.detail = "replicate: " + detail;
    send(Purpose::kOp, sched::Cancel{0, 0, member_, op.round});
    return;
  }
  finish(code, detail);
}

void MemberMachine::on(const RegistryLost&) { up_ = false; }

void MemberMachine::on(const RegistryBack& e) {
  if (e.generation != generation_) {
    // Requests to an earlier registry are never answered. The connection fails them, but its
    // failure may come after this: a request refused at its send (the reconnection's events
    // were already queued on the engine) is answered after them. A TRANSFER_DONE sent so,
    // whose NoReply came after the re-open, made that re-open re-publish the round's version
    // (the machine counted itself a holder), and the round's resume after it was refused:
    // the shards of the round disagreed (ShardRoundsFailoverS2Np4). They are taken as lost
    // here first, as the registry is (RegistryLost), so that the re-open reports and
    // re-publishes what the machine holds after them.
    up_ = false;
    std::vector<uint64_t> old;
    for (const auto& [req, p] : pending_)
      if (p.generation != e.generation) old.push_back(req);
    for (uint64_t req : old)
      on(RegistryNoReply{req, Code::kRegistry, "lost with the registry of generation " + std::to_string(generation_)});
  }
  up_ = true;
  gone_ = false;
  if (e.generation == generation_ && member_ != 0) return;
  generation_ = e.generation;
  member_ = 0;
  republish_pending_ = false;
  if (phase_ == Phase::kNew || phase_ == Phase::kClosed) {
    if (op_ && op_->kind == Kind::kOpen && op_->stage == Stage::kWaitRegistry) {
      op_->retried = true;
      send_op_request();
    }
    return;
  }
  reopen();
}

// A new registry knows nothing of us: open again, publish again what we hold; our
// retention copies are not known there either.
void MemberMachine::reopen() {
  if (!host_.empty()) {
    host_.clear();
    out_.emplace_back(DropHostCopy{-1});
  }
  if (phase_ == Phase::kHolding) needs_publish_ = true;
  open_pending_ = true;
  sched::Open o = reopen_request();
  reopen_told_open_ = o.round_open;
  send(Purpose::kReopen, std::move(o));
}

// A shard of a replica of several shards tells the new registry what the one before decided
// of its latest round, in its Open, so that no sibling asks that round there before it is
// known (sched/ holds such a request until the replica's shards are open). A round in
// progress with a grant is reported open, with the granted version and the round's request
// (it resumes the round itself); otherwise the latest round it is done with, and the answer
// a sibling must share.
sched::Open MemberMachine::reopen_request() const {
  sched::Open o{0, 0, id_.model, id_.replica, id_.shard, id_.num_shards, id_.retain, id_.spot};
  if (id_.num_shards < 2) return o;
  if (in_round() && phase_ == Phase::kReceiving && granted_round_ == op_->round) {
    o.round = op_->round;
    o.round_open = true;
    o.round_version = granted_version_;
    o.round_spec = op_->spec;
    o.round_newer_than = op_->newer_than;
    return o;
  }
  o.round = op_ && op_->kind == Kind::kReplicate ? rounds_ - 1 : rounds_;
  if (o.round > 0 && last_round_ == o.round) {
    o.round_status = last_status_;
    o.round_version = last_version_;
  }
  return o;
}

void MemberMachine::republish() {
  republish_pending_ = true;
  send(Purpose::kRepublish, sched::Publish{0, 0, member_, version_, layout_hash_, descriptor_});
}

void MemberMachine::resume_op() {
  if (!op_ || op_->stage != Stage::kWaitRegistry) return;
  // An open needs only a registry; the others need to be open there, and settled.
  if ((op_->kind == Kind::kOpen && phase_ == Phase::kNew) ? !up_ : unsettled()) return;
  op_->retried = true;
  send_op_request();
}

// The operation waits for a registry to answer again; when every registry is known gone it
// fails now instead (a receiving replica first gives up what it half holds).
void MemberMachine::wait_registry() {
  if (!gone_) {
    op_->stage = Stage::kWaitRegistry;
    // Connected but not open here (the re-open was refused): nothing else would ask again.
    if (up_ && member_ == 0 && !open_pending_ && phase_ != Phase::kNew && phase_ != Phase::kClosed) reopen();
    return;
  }
  if (op_->kind == Kind::kReplicate && phase_ == Phase::kReceiving) {
    return give_up(Code::kRegistry, "no registry: " + gone_detail_);
  }
  finish(Code::kRegistry, "no registry could be reached: " + gone_detail_);
}

void MemberMachine::on(const RegistryGone& e) {
  up_ = false;
  gone_ = true;
  gone_detail_ = e.detail;
  if (op_ && op_->stage == Stage::kWaitRegistry) {
    if (op_->kind == Kind::kReplicate && phase_ == Phase::kReceiving) {
      return give_up(Code::kRegistry, "no registry: " + e.detail);
    }
    finish(Code::kRegistry, "no registry could be reached: " + e.detail);
  }
}

}  // namespace thub::client
