// THUB_Update in place: a member holding h asks for a version newer than h. In one step the
// registry checks that something newer can be served, hides the holding of h from new
// source choices, and defers the grant of the newer version until no lease reads the
// member's buffers any more (the drain of h); then it grants as for any Replicate.
#include "sched/core.h"

namespace thub::sched::detail {

void Core::begin_update(const Replicate& e, Member& m) {
  if (has_pending(m.id))
    return reply_err(e.client, e.req, Status::kState, "a replicate of this member is in progress");
  m.shunned.clear();  // a new transfer (if any): what the last one reported no longer applies
  Replica& r = models_.at(m.model).replicas.at(m.replica);
  Version v = -1;
  Status st = Status::kOk;
  std::string detail;
  enter_round(m, e.round);
  if (Transaction* tp = transaction(r, e.round)) {
    // The replica's shards share one answer: the first shard's version (or error).
    Transaction& t = *tp;
    if (t.joined.count(m.shard) && e.round == 0)
      return reply_err(e.client, e.req, Status::kState,
                       "the previous replicate of this replica has not finished in every shard");
    st = t.status;
    detail = t.detail;
    v = t.version;
    finish_shard(r, e.round, m.shard);
  } else {
    st = resolve(m, e.spec, &v, &detail);
    if (st == Status::kOk && v > e.newer_than && !replica_will_serve(m, v)) {
      st = Status::kVersionLost;
      detail = "every holder of version " + std::to_string(v) + " of model " + m.model + " is gone";
    }
    if (m.num_shards > 1) {
      Transaction t;  // fixes the version for the other shards; the source comes later
      t.round = e.round;
      t.status = st == Status::kOk && v <= e.newer_than ? Status::kNotUpdated : st;
      t.detail = detail;
      t.version = v;
      start_transaction(r, std::move(t));
      finish_shard(r, e.round, m.shard);
    }
  }
  if (st == Status::kOk && v <= e.newer_than) {
    st = Status::kNotUpdated;
    detail = "nothing newer than " + std::to_string(e.newer_than);
  }
  if (st != Status::kOk) return reply_err(e.client, e.req, st, detail);  // h stays served
  // Hide h now; its readers finish; retention may first want a host copy of h.
  const Version held = m.version;  // before the drain: an unread member is emptied at once
  m.descriptor = e.descriptor;
  m.intact = true;
  chains_changed();
  if (needs_offload(m)) {
    unindex(m);
    m.buf = Buf::kOffloading;
    chains_changed();
    index(m);
    out_.emplace_back(Offload{m.client, m.id, m.version});
  } else {
    begin_drain(m);
  }
  Pending p;
  p.kind = Pending::Kind::kReplicate;
  p.client = e.client;
  p.req = e.req;
  p.member = m.id;
  p.spec = v;  // absolute: every shard replicates the version fixed above
  p.newer_than = e.newer_than;
  p.in_place = true;
  p.restorable = true;
  p.held = held;
  defer(p);  // granted by wake() once the buffers are empty
}

// After the drain: the version was fixed for the whole replica when the update began; the
// source is chosen per member (the shards drain at different times, so one source replica
// cannot be reserved for all of them), as for a regrant.
bool Core::try_grant_update(const Pending& p, Member& m) {
  Version v = p.spec;
  if (auto pick = choose_member(m, v)) {
    grant(p, m, v, *pick);
    return true;
  }
  if (has_holder(m, v, m.shard)) return false;
  fail_replicate(p, m, Status::kVersionLost,
                 "every holder of version " + std::to_string(v) + " of model " + m.model + " is gone");
  return true;
}

// An error answer to a Replicate. An update in place whose version became unservable while
// h drained gets h back (its buffers were never overwritten), so that an error always means
// "still holding h", unless a reader reported h broken meanwhile.
void Core::fail_replicate(const Pending& p, Member& m, Status s, std::string detail) {
  if (p.in_place && p.restorable && m.buf == Buf::kEmpty) {
    unindex(m);
    m.buf = Buf::kHolding;
    chains_changed();
    m.version = p.held;
    index(m);
    detail += "; still holding version " + std::to_string(p.held);
  }
  reply_err(p.client, p.req, s, std::move(detail));
}

}  // namespace thub::sched::detail
