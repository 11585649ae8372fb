// THUB_Update in place: a member holding h asks for a version newer than h. In one step the
// registry checks that something newer can be served, hides the holding of h from new
// source choices, and defers the grant of the newer version until no lease reads the
// member's buffers any more (the drain of h); then it grants as for any Replicate.
#include "sched/core.h"

namespace thub::sched::detail {

void Core::begin_update(const Replicate& e, Member& m) {
  for (const Pending& q : pending_)
    if (q.member == m.id)
      return reply_err(e.client, e.req, Status::kState, "a replicate of this member is in progress");
  Replica& r = models_.at(m.model).replicas.at(m.replica);
  Version v = -1;
  Status st = Status::kOk;
  std::string detail;
  if (r.txn) {
    // The replica's shards share one answer: the first shard's version (or error).
    Transaction& t = *r.txn;
    if (t.joined.count(m.shard))
      return reply_err(e.client, e.req, Status::kState,
                       "the previous replicate of this replica has not finished in every shard");
    st = t.status;
    detail = t.detail;
    v = t.version;
    finish_shard(r, m.shard);
  } else {
    st = resolve(m, e.spec, &v, &detail);
    if (st == Status::kOk && v > e.newer_than && !replica_will_serve(m, v)) {
      st = Status::kVersionLost;
      detail = "every holder of version " + std::to_string(v) + " of model " + m.model + " is gone";
    }
    if (m.num_shards > 1) {
      Transaction t;  // fixes the version for the other shards; the source comes later
      t.status = st == Status::kOk && v <= e.newer_than ? Status::kNotUpdated : st;
      t.detail = detail;
      t.version = v;
      r.txn = std::move(t);
      finish_shard(r, m.shard);
    }
  }
  if (st == Status::kOk && v <= e.newer_than) {
    st = Status::kNotUpdated;
    detail = "nothing newer than " + std::to_string(e.newer_than);
  }
  if (st != Status::kOk) return reply_err(e.client, e.req, st, detail);  // h stays served
  // Hide h now; its readers finish; retention may first want a host copy of h.
  m.descriptor = e.descriptor;
  m.intact = true;
  if (needs_offload(m)) {
    unindex(m);
    m.buf = Buf::kOffloading;
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
  pending_.push_back(p);  // granted by wake() once the buffers are empty
}

}  // namespace thub::sched::detail
