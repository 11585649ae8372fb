#include "src/client/member_machine.h"

#include <type_traits>
#include <utility>

namespace thub::client {

namespace {
// The registry's status numbers are the public ones (src/common/status.h has the table).
#define THUB_SAME_STATUS(s) static_assert(static_cast<int>(sched::Status::s) == static_cast<int>(Code::s), #s)
THUB_SAME_STATUS(kNotUpdated);
THUB_SAME_STATUS(kArg);
THUB_SAME_STATUS(kState);
THUB_SAME_STATUS(kNotFound);
THUB_SAME_STATUS(kLayout);
THUB_SAME_STATUS(kTransport);
THUB_SAME_STATUS(kAuth);
THUB_SAME_STATUS(kVersionLost);
THUB_SAME_STATUS(kCanceled);
THUB_SAME_STATUS(kInternal);
#undef THUB_SAME_STATUS
static_assert(static_cast<int>(sched::Status::kOk) == static_cast<int>(Code::kSuccess));
Code code_of(sched::Status s) { return static_cast<Code>(static_cast<int>(s)); }

template <class T, class = void>
struct HasReq : std::false_type {};
template <class T>
struct HasReq<T, std::void_t<decltype(std::declval<T&>().req)>> : std::true_type {};
}  // namespace

MemberMachine::MemberMachine(MemberIdentity id) : id_(std::move(id)) {}

std::vector<MachineAction> MemberMachine::step(MachineEvent ev) {
  out_.clear();
  std::visit([this](auto& e) { on(e); }, ev);
  return std::move(out_);
}

// ---- operations -----------------------------------------------------------------------------

bool MemberMachine::start(uint64_t id, Kind kind) {
  if (op_) {
    out_.emplace_back(CompleteOp{id, Code::kState, held(), "another operation is in progress on this model"});
    return false;
  }
  if (phase_ == Phase::kClosed) {
    out_.emplace_back(CompleteOp{id, Code::kState, -1, "the model is closed"});
    return false;
  }
  op_ = Op{};
  op_->id = id;
  op_->kind = kind;
  return true;
}

void MemberMachine::finish(Code code, std::string detail) {
  const uint64_t id = op_->id;
  // A publish that failed after its fill was prepared: the user may overwrite the buffers
  // now, and a registry that took the request after all hands out its descriptor.
  if (op_->kind == Kind::kPublish && op_->prepared && code != Code::kSuccess) out_.emplace_back(InvalidateHolding{});
  // A round this registry never heard of from us (canceled or failed before it was asked):
  // the other shards' transaction of it must not wait for us.
  const bool unasked = op_->kind == Kind::kReplicate && (!op_->asked || op_->asked_generation != generation_);
  if (op_->kind == Kind::kReplicate && op_->round > 0) {
    // What a sibling that asks this round at a registry after a failover must get too.
    last_round_ = op_->round;
    last_status_ = sched::Status::kOk;
    last_version_ = -1;
    if (code == Code::kSuccess) {
      last_version_ = held();
    } else if (code == Code::kNotUpdated || code == Code::kVersionLost || code == Code::kNotFound ||
               code == Code::kTransport) {
      last_status_ = static_cast<sched::Status>(static_cast<int>(code));
    }
  }
  whole_ = false;
  op_.reset();
  out_.emplace_back(CompleteOp{id, code, held(), std::move(detail)});
  if (unasked) tell_round_done();
}

void MemberMachine::tell_round_done() {
  if (id_.num_shards < 2 || !up_ || member_ == 0) return;
  // A round in progress (a replicate of this replica of several shards, granted or not) is
  // asked or resumed here by this shard itself: the transaction it opens or joins waits for it.
  const uint64_t done = op_ && op_->kind == Kind::kReplicate ? rounds_ - 1 : rounds_;
  if (done == 0) return;
  sched::Cancel c{0, 0, member_, done};
  if (last_round_ == done) {  // how it ended: what a sibling that asks it here must get too
    c.version = last_version_;
    c.status = last_status_;
  }
  send(Purpose::kCleanup, c);
}

void MemberMachine::on(const OpOpen& e) {
  if (!start(e.op, Kind::kOpen)) return;
  if (phase_ != Phase::kNew) return finish(Code::kState, "already open");
  generation_ = std::max(generation_, e.generation);  // a RegistryBack may have come first
  if (e.gone) {  // the connection gave up before this model existed: its RegistryGone came first
    up_ = false;
    gone_ = true;
    gone_detail_ = e.gone_detail;
  }
  if (!up_) return wait_registry();
  send_op_request();
}

void MemberMachine::on(const OpPublish& e) {
  if (!start(e.op, Kind::kPublish)) return;
  if (e.version < 0) {
    return finish(Code::kArg, "publish needs an absolute version >= 0 (got " + std::to_string(e.version) + ")");
  }
  if (phase_ == Phase::kHolding) {
    return finish(Code::kState, "already published version " + std::to_string(version_) + "; unpublish first");
  }
  op_->spec = e.version;
  op_->stage = Stage::kPreparing;
  op_->prepared = true;
  out_.emplace_back(PrepareHolding{e.op, e.version});
}

void MemberMachine::on(const OpReplicate& e) {
  const uint64_t round = ++rounds_;  // every call counts, as every shard makes it
  if (!start(e.op, Kind::kReplicate)) return;
  op_->round = round;
  if (!e.update && phase_ == Phase::kHolding) {
    return finish(Code::kState, "replicate while holding version " + std::to_string(version_) +
                                    ": unpublish first, or use THUB_Update");
  }
  // Holding nothing, an update is a plain replicate; holding h, the registry answers
  // NOT_UPDATED (we keep h) or moves us to a newer version in place (sched/update.cc).
  op_->spec = e.spec;
  op_->newer_than = e.update && phase_ == Phase::kHolding ? version_ : -1;
  op_->stage = Stage::kPreparing;
  out_.emplace_back(PrepareFill{e.op});
}

void MemberMachine::on(Prepared& e) {
  if (!op_ || op_->id != e.op || op_->stage != Stage::kPreparing) return;
  if (op_->cancel) return finish(Code::kCanceled, "canceled");
  op_->layout_hash = e.layout_hash;
  op_->descriptor = std::move(e.descriptor);
  op_->fill = e.fill;
  if (unsettled()) return wait_registry();
  send_op_request();
}

void MemberMachine::on(const PrepareFailed& e) {
  if (!op_ || op_->id != e.op || op_->stage != Stage::kPreparing) return;
  finish(e.code, e.detail);
}

void MemberMachine::on(const OpUnpublish& e) {
  if (!start(e.op, Kind::kUnpublish)) return;
  if (phase_ != Phase::kHolding) return finish(Code::kState, "nothing is published: publish or replicate first");
  if (unsettled()) return wait_registry();
  send_op_request();
}

void MemberMachine::on(const OpClose& e) {
  if (!start(e.op, Kind::kClose)) return;
  // Close unpublishes first (the registry drains our readers), then forgets the member. A
  // registry that is gone forgets us anyway.
  if (!up_ || member_ == 0 || phase_ == Phase::kNew) {
    if (phase_ == Phase::kHolding) out_.emplace_back(InvalidateHolding{});
    phase_ = Phase::kClosed;
    host_.clear();
    out_.emplace_back(DropHostCopy{-1});
    return finish(Code::kSuccess);
  }
  if (phase_ == Phase::kHolding) {
    op_->stage = Stage::kAsked;
    send(Purpose::kOp, sched::Unpublish{0, 0, member_});
    return;
  }
  op_->stage = Stage::kClosing;
  send(Purpose::kOp, sched::Close{0, 0, member_});
}

void MemberMachine::on(const OpCancel& e) {
  // Cancellation takes effect where the operation has changed nothing yet: a replicate
  // waiting at the registry is withdrawn there (CANCEL), one waiting for a registry ends
  // now, and a grant that crosses the CANCEL is given back. Otherwise (an update in place,
  // a transfer under way) the operation completes as it would have (MPI_Cancel's rule).
  if (!op_ || op_->id != e.op || op_->kind != Kind::kReplicate || op_->newer_than >= 0 || op_->cancel) return;
  if (phase_ == Phase::kReceiving) return;
  op_->cancel = true;
  if (op_->stage == Stage::kWaitRegistry) return finish(Code::kCanceled, "canceled");
  if (op_->stage == Stage::kAsked) send(Purpose::kCleanup, sched::Cancel{0, 0, member_, op_->round});
}

// The request of the current operation, with the current member id.
void MemberMachine::send_op_request() {
  Op& op = *op_;
  op.stage = Stage::kAsked;
  switch (op.kind) {
    case Kind::kOpen:
      send(Purpose::kOp, sched::Open{0, 0, id_.model, id_.replica, id_.shard, id_.num_shards, id_.retain, id_.spot});
      break;
    case Kind::kPublish:
      send(Purpose::kOp, sched::Publish{0, 0, member_, op.spec, op.layout_hash, op.descriptor});
      break;
    case Kind::kReplicate:
      if (phase_ == Phase::kReceiving) {
        // Resuming a transfer at a registry that does not know it: ask for the same version
        // (the round's answer: a shard that asks the round afresh here joins it).
        op.stage = Stage::kRecovering;
        op.asked = true;  // this registry knows the round from here on
        op.asked_generation = generation_;
        send(Purpose::kOp,
             sched::Replicate{0, 0, member_, version_, -1, op.layout_hash, descriptor_, op.round, whole_, id_.seed});
      } else if (op.fill_promised) {
        // A registry may have granted the lost request and chained readers on us under its
        // fill: a grant of another version must not fill the same one (they would take it).
        op.fill_promised = false;
        op.stage = Stage::kPreparing;
        out_.emplace_back(PrepareFill{op.id});
      } else {
        op.fill_promised = true;
        op.asked = true;
        op.asked_generation = generation_;
        send(Purpose::kOp,
             sched::Replicate{0, 0, member_, op.spec, op.newer_than, op.layout_hash, op.descriptor, op.round, false,
                              id_.seed});
      }
      break;
    case Kind::kUnpublish:
      send(Purpose::kOp, sched::Unpublish{0, 0, member_});
      break;
    case Kind::kClose:
      op.stage = Stage::kClosing;
      send(Purpose::kOp, sched::Close{0, 0, member_});
      break;
  }
}

void MemberMachine::send(Purpose p, sched::Event ev) {
  uint64_t req = next_req_++;
  std::visit(
      [req](auto& e) {
        if constexpr (HasReq<std::decay_t<decltype(e)>>::value) e.req = req;
      },
      ev);
  pending_[req] = Pending{p, generation_};
  // Only what the operation can take back has the context's deadline: its REPLICATE while
  // asked (withdrawn past it), and requests answered at once that change nothing for good.
  bool deadline = !std::holds_alternative<sched::TransferDone>(ev) && !std::holds_alternative<sched::SourceFailed>(ev) &&
                  !std::holds_alternative<sched::Unpublish>(ev) && !std::holds_alternative<sched::Cancel>(ev);
  if (std::holds_alternative<sched::Replicate>(ev))
    deadline = op_ && op_->stage == Stage::kAsked && !(op_->newer_than >= 0 && phase_ == Phase::kHolding);
  // A re-open whose answer never came would leave us open nowhere, and nothing asks again
  // (seed 148 with THUB_SIM_TIMEOUTS=1: the operation waited for it for ever).
  if (p == Purpose::kReopen) deadline = false;
  out_.emplace_back(SendRequest{req, std::move(ev), generation_, deadline});
}

// ---- registry answers -------------------------------------------------------------------------

void MemberMachine::on(const RegistryReply& e) {
  auto it = pending_.find(e.req);
  if (it == pending_.end()) return;  // a request of a registry that is gone, or a duplicate
  Purpose p = it->second.purpose;
  pending_.erase(it);
  const sched::Reply& r = e.reply;
  const bool ok = r.status == sched::Status::kOk;
  switch (p) {
    case Purpose::kOp:
      if (op_) on_op_reply(r);
      break;
    case Purpose::kReopen:
      open_pending_ = false;
      if (!ok) {
        // This registry will not take us now (e.g. our old session is not dropped yet): we
        // serve nothing; the next operation asks again.
        if (phase_ == Phase::kHolding) {
          out_.emplace_back(InvalidateHolding{});
          phase_ = Phase::kIdle;
          version_ = -1;
        }
        needs_publish_ = false;
        if (op_ && op_->stage == Stage::kWaitRegistry) {
          const std::string why = "re-opening at the new registry: " + r.detail;
          // A replicate that waited half received gives that up (nobody may take it now).
          if (op_->kind == Kind::kReplicate && phase_ == Phase::kReceiving) return give_up(code_of(r.status), why);
          finish(code_of(r.status), why);
        }
        return;
      }
      member_ = r.member;  // (its Open told what the registry before decided of our rounds)
      // The round it reported in progress ended meanwhile, unasked here (its transfer failed
      // here, its give-up had no member to go to): the round's other shards, kept waiting for
      // this one, get how it ended (seed 3962 with THUB_SIM_TIMEOUTS=1: a sibling's resume was
      // never answered).
      if (reopen_told_open_ && !(in_round() && phase_ == Phase::kReceiving)) tell_round_done();
      reopen_told_open_ = false;
      if (needs_publish_) republish();
      resume_op();
      break;
    case Purpose::kRepublish:
      republish_pending_ = false;
      if (ok) {
        needs_publish_ = false;
        counters_.republished++;
      } else if (phase_ == Phase::kHolding) {
        // The new registry refuses what we hold (another layout was published there first):
        // we serve nothing now.
        out_.emplace_back(InvalidateHolding{});
        phase_ = Phase::kIdle;
        needs_publish_ = false;
      }
      resume_op();
      break;
    case Purpose::kOffloadDone: {
      // Refused: the registry no longer wants the copy (the version left the window).
      auto v = offload_reqs_.find(e.req);
      if (!ok && v != offload_reqs_.end() && host_.erase(v->second)) out_.emplace_back(DropHostCopy{v->second});
      break;
    }
    case Purpose::kCleanup:
      break;
  }
  offload_reqs_.erase(e.req);
}

void MemberMachine::on_op_reply(const sched::Reply& r) {
  Op& op = *op_;
  const bool ok = r.status == sched::Status::kOk;
  switch (op.kind) {
    case Kind::kOpen:
      if (!ok) return finish(code_of(r.status), "open: " + r.detail);
      member_ = r.member;
      phase_ = Phase::kIdle;
      return finish(Code::kSuccess);
    case Kind::kPublish:
      if (!ok) return finish(code_of(r.status), "publish of version " + std::to_string(op.spec) + ": " + r.detail);
      phase_ = Phase::kHolding;
      version_ = op.spec;
      descriptor_ = std::move(op.descriptor);  // the op ends here
      layout_hash_ = op.layout_hash;
      needs_publish_ = false;
      return finish(Code::kSuccess);
    case Kind::kReplicate:
      switch (op.stage) {
        case Stage::kAsked:
          if (!ok && r.released && phase_ == Phase::kHolding) {
            // Its round failed after a sibling's buffers were overwritten for it: the registry
            // no longer counts this shard as holding its version, and it gives it up alike,
            // so that the shards hold the same after the round (sched/update.cc).
            out_.emplace_back(InvalidateHolding{});
            phase_ = Phase::kIdle;
            version_ = -1;
            needs_publish_ = false;
          }
          if (r.status == sched::Status::kNotUpdated) {
            // An update that lost its version during the transfer holds nothing any more:
            // nothing newer than what it gave up is left, so the loss is its answer.
            if (op.moved_on && phase_ != Phase::kHolding) return finish(op.error, op.detail + "; nothing newer is left");
            return finish(Code::kNotUpdated);
          }
          if (r.status == sched::Status::kNotFound && op.moved_on && id_.num_shards == 1) {
            // A latest request whose version was lost under it, asked again: no version is
            // left at all. The loss is its answer (docs/integrity.md), not "never published".
            return finish(op.error, op.detail + "; no other version is available");
          }
          op.round_moved = round_moved(r);
          if (!ok && move_on(code_of(r.status), "replicate: " + r.detail)) return;
          if (!ok) return finish(code_of(r.status), "replicate: " + r.detail);
          if (op.spec >= 0 && r.version != op.spec) {
            // Not what was asked for (a registry, or something between, lying): nothing is
            // read; the grant is given back.
            phase_ = Phase::kReceiving;
            version_ = r.version;
            lease_ = r.lease;
            return give_up(Code::kRegistry, "the registry granted version " + std::to_string(r.version) +
                                                " for a request of version " + std::to_string(op.spec));
          }
          return on_grant(r);
        case Stage::kRecovering:
          if (!ok) {
            // A registry that never heard of the version we were reading (a new one after a
            // failover, where no holder of it published it again) has none: it is lost.
            const bool lost = r.status == sched::Status::kVersionLost ||
                              (r.status == sched::Status::kNotFound && id_.num_shards == 1);
            // In a round of several shards the answer is the round's: its siblings get it too.
            Code c = in_round() ? code_of(r.status) : lost ? Code::kVersionLost : Code::kTransport;
            op.round_moved = round_moved(r);
            return give_up(c, op.detail + "; no other source: " + r.detail);
          }
          if (r.version != version_) return give_up(Code::kInternal, "the registry granted another version");
          if (whole_) {
            // Resumed at its end: the registry counts us as holding it, its answer the commit.
            whole_ = false;
            phase_ = Phase::kHolding;
            needs_publish_ = false;
            return finish(Code::kSuccess);
          }
          return on_grant(r);
        case Stage::kDoneSent:
          if (!ok && id_.num_shards > 1 &&
              (r.status == sched::Status::kVersionLost || r.status == sched::Status::kTransport)) {
            // The round did not commit: a shard could not get its version (or our data was
            // judged broken). The registry drains what we hold; we give it up and wait for
            // that (UNPUBLISH), then ask the round again if it moved, else end with its error.
            op.round_moved = round_moved(r);
            out_.emplace_back(InvalidateHolding{});
            phase_ = Phase::kIdle;
            version_ = -1;
            op.stage = Stage::kGivingUp;
            op.error = code_of(r.status);
            op.detail = "transfer done: " + r.detail;
            send(Purpose::kOp, sched::Unpublish{0, 0, member_});
            return;
          }
          if (!ok) {
            // The data is whole, but the registry does not count us as a holder (a reader
            // reported us failed meanwhile): we serve nothing.
            out_.emplace_back(InvalidateHolding{});
            phase_ = Phase::kIdle;
            return finish(code_of(r.status), "transfer done: " + r.detail);
          }
          return finish(Code::kSuccess);
        case Stage::kGivingUp:
          if (move_on(op.error, op.detail)) return;  // the partial buffers are given up: ask again
          return finish(op.error, op.detail);
        case Stage::kWithdrawing:
          if (ok) return finish(op.error, op.detail);  // canceled while it waited
          // Nothing waited: answered meanwhile (a grant that crossed the CANCEL, an error) or
          // never taken. An UNPUBLISH gives a grant back (the registry refuses it when there
          // is none); the error comes after its answer.
          op.stage = Stage::kGivingUp;
          send(Purpose::kOp, sched::Unpublish{0, 0, member_});
          return;
        default:
          return;
      }
    case Kind::kUnpublish:
      if (!ok) return finish(code_of(r.status), "unpublish: " + r.detail);
      out_.emplace_back(InvalidateHolding{});  // before we answer: the user may overwrite then
      phase_ = Phase::kIdle;
      version_ = -1;
      return finish(Code::kSuccess);
    case Kind::kClose:
      if (op.stage == Stage::kAsked) {  // its unpublish
        out_.emplace_back(InvalidateHolding{});
        phase_ = Phase::kIdle;
        version_ = -1;
        op.stage = Stage::kClosing;
        send(Purpose::kOp, sched::Close{0, 0, member_});
        return;
      }
      phase_ = Phase::kClosed;
      host_.clear();
      out_.emplace_back(DropHostCopy{-1});
      return finish(Code::kSuccess);
  }
}

// A grant: from here on our buffers are overwritten. Readers of our previous fill that the
// registry forgot see the counter change before any byte does.
void MemberMachine::on_grant(const sched::Reply& r) {
  Op& op = *op_;
  if (op.cancel && op.stage == Stage::kAsked && phase_ != Phase::kHolding) {
    // Canceled before anything changed: give the grant back.
    phase_ = Phase::kReceiving;
    version_ = r.version;
    lease_ = r.lease;
    return give_up(Code::kCanceled, "canceled");
  }
  if (op.stage == Stage::kAsked) {
    out_.emplace_back(InvalidateHolding{});
    out_.emplace_back(BeginFill{op.fill});
    have_ = 0;
    descriptor_ = op.descriptor;
    layout_hash_ = op.layout_hash;
  }
  phase_ = Phase::kReceiving;
  version_ = r.version;
  lease_ = r.lease;
  grant_generation_ = generation_;
  whole_ = false;
  granted_round_ = op.round;
  granted_version_ = r.version;
  needs_publish_ = false;
  op.stage = Stage::kTransfer;
  if (r.source_partial) counters_.partial_sources++;
  out_.emplace_back(BeginTransfer{++transfer_, r.source_descriptor, r.source_partial, version_, have_, op.fill});
}

// A relative spec (latest, latest-k) asked for "the newest version that can be had": when the
// version it resolved to is lost (VERSION_LOST: no holder left, before or during our
// transfer), the spec is resolved once more and the new version is read from byte 0 under a
// new fill (PrepareFill again; a partial holding was given up first: counter invalidated,
// Unpublish answered). Once only: a second loss ends the operation. An absolute spec asked
// for that version, and a shard of a multi-shard replica cannot move alone (its siblings
// may already hold the lost version and must join one new round): both end VERSION_LOST.
// An update keeps its newer_than: refused before its grant it still holds h; having lost the
// version during the transfer it holds nothing, and a version not newer than the h it gave up
// is no update (NOT_UPDATED then ends it with the loss).
bool MemberMachine::move_on(Code code, const std::string& detail) {
  Op& op = *op_;
  const bool moved = op.round_moved;
  op.round_moved = false;
  // Told to ask its round again, the registry waits for this shard: if it does not (canceled,
  // an absolute spec), it is not asked there any more, and finish() says it is done with it.
  if (moved) op.asked = false;
  if (op.kind != Kind::kReplicate || code != Code::kVersionLost || op.spec >= 0 || op.cancel) return false;
  // A shard of a larger replica moves when the registry moved its round (every shard is told
  // so, and the registry bounds the moves); a single shard once, on its own.
  if (id_.num_shards != 1 ? !moved : op.moved_on) return false;
  op.moved_on = true;
  counters_.moved_on++;
  op.fill_promised = false;  // the new fill is prepared here
  op.error = code;
  op.detail = detail;
  op.stage = Stage::kPreparing;
  out_.emplace_back(PrepareFill{op.id});
  return true;
}

// VERSION_LOST carrying a version, to a shard of a larger replica: its round moved to that
// version (sched/transaction.cc, lose_round): every shard asks the round again.
bool MemberMachine::round_moved(const sched::Reply& r) const {
  return id_.num_shards > 1 && r.status == sched::Status::kVersionLost && r.version >= 0;
}

void MemberMachine::give_up(Code code, const std::string& detail) {
  Op& op = *op_;
  // Nobody takes what our counter showed; the registry forgets our partial holding (and
  // drains readers chained on it) before the error is answered.
  out_.emplace_back(InvalidateHolding{});
  bool receiving = phase_ == Phase::kReceiving;
  whole_ = false;
  phase_ = Phase::kIdle;
  version_ = -1;
  if (receiving && up_ && member_ != 0) {
    op.stage = Stage::kGivingUp;
    op.error = code;
    op.detail = detail;
    send(Purpose::kOp, sched::Unpublish{0, 0, member_});
    return;
  }
  finish(code, detail);
}

// ---- transfers --------------------------------------------------------------------------------

void MemberMachine::on(const TransferProgressed& e) {
  if (!op_ || op_->stage != Stage::kTransfer || e.transfer != transfer_) return;
  // Only to the registry that granted the read (another knows no lease of ours); its answer
  // changes nothing (a read it ended is heard of at the transfer's end).
  if (!up_ || member_ == 0 || grant_generation_ != generation_ || lease_ == 0) return;
  send(Purpose::kCleanup, sched::TransferProgress{0, 0, member_, lease_, e.held, e.path});
}

void MemberMachine::on(const TransferEnded& e) {
  if (!op_ || op_->stage != Stage::kTransfer || e.transfer != transfer_) return;
  Op& op = *op_;
  have_ = e.held;
  if (e.code == Code::kSuccess) {
    counters_.replications++;
    if ((grant_generation_ != generation_ || !up_ || member_ == 0) && in_round()) {
      // Whole, but the registry that granted it is gone, and with it the round's commit: the
      // round is resumed at the next registry (from its end), so that every shard gets one
      // answer there.
      whole_ = true;
      if (unsettled() || open_pending_) return wait_registry();
      return send_op_request();  // receiving: the resume of version_ in its round
    }
    phase_ = Phase::kHolding;
    // Every byte was checked against the source's counter: it is this version whatever
    // became of the registry that granted it.
    if (grant_generation_ != generation_ || !up_ || member_ == 0) {
      needs_publish_ = true;
      if (up_ && member_ != 0 && !open_pending_) republish();
      return finish(Code::kSuccess);
    }
    op.stage = Stage::kDoneSent;
    send(Purpose::kOp, sched::TransferDone{0, 0, member_, lease_});
    return;
  }
  if (!e.source_failed) return give_up(e.code, "replicate of version " + std::to_string(version_) + ": " + e.error);
  // The source failed (or changed under us): report how far we got and resume elsewhere.
  counters_.source_failures++;
  op.detail = "replicate of version " + std::to_string(version_) + ": " + e.error;
  if (op.cancel) return give_up(Code::kCanceled, "canceled");
  if (!up_ || member_ == 0) {
    return wait_registry();  // the next registry is asked for the same version
  }
  op.stage = Stage::kRecovering;
  if (grant_generation_ != generation_) {
    // The registry that granted us is gone, and with it our lease.
    op.asked = true;
    op.asked_generation = generation_;
    send(Purpose::kOp, sched::Replicate{0, 0, member_, version_, -1, layout_hash_, descriptor_, op.round});
  } else {
    send(Purpose::kOp, sched::SourceFailed{0, 0, member_, lease_, have_});
  }
}

// ---- retention ----------------------------------------------------------------------------------

void MemberMachine::on(const OffloadOrdered& e) {
  // Comes while our unpublish (or update) waits: the buffers still hold the version.
  if (e.member != member_ || member_ == 0 || phase_ != Phase::kHolding || e.version != version_) return;
  out_.emplace_back(MakeHostCopy{e.version});
}

void MemberMachine::on(const HostCopyMade& e) {
  if (!e.ok) {
    // Told with an empty descriptor: the registry drains us without a copy (it would otherwise
    // wait for an OffloadDone that never comes, and our unpublish with it). A registry that
    // went away meanwhile ordered nothing the next one waits for.
    if (up_ && member_ != 0) send(Purpose::kOffloadDone, sched::OffloadDone{0, 0, member_, e.version, ""});
    return;
  }
  if (!up_ || member_ == 0) {
    out_.emplace_back(DropHostCopy{e.version});
    return;
  }
  host_.insert(e.version);
  counters_.offloads++;
  uint64_t req = next_req_;
  send(Purpose::kOffloadDone, sched::OffloadDone{0, 0, member_, e.version, e.descriptor});
  offload_reqs_[req] = e.version;
}

void MemberMachine::on(const DiscardOrdered& e) {
  if (e.member != member_ || !host_.erase(e.version)) return;
  out_.emplace_back(DropHostCopy{e.version});
}

}  // namespace thub::client
