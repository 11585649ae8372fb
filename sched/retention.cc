// Drain and retention: an unpublished member is hidden and acknowledged once its readers
// are done; the last non-spot holder of a retained version first offloads it to host
// memory and keeps serving it from there until it falls out of the latest `retain`.
#include "sched/core.h"

namespace thub::sched::detail {

int Core::retain_of(const std::string& model) const {
  auto mit = models_.find(model);
  return mit == models_.end() || mit->second.retains.empty() ? 0 : *mit->second.retains.rbegin();
}

bool Core::retained(const std::string& model, Version v) const {
  int k = retain_of(model);
  const auto& pub = models_.at(model).published;
  int i = 0;
  for (auto it = pub.rbegin(); it != pub.rend() && i < k; ++it, ++i)
    if (*it == v) return true;
  return false;
}

bool Core::needs_offload(const Member& m) const {
  if (m.spot || m.offload_failed || serves_offload(m, m.version) || !retained(m.model, m.version)) return false;
  const Model& md = models_.at(m.model);
  auto hit = md.holders.find(m.version);
  if (hit != md.holders.end())
    for (MemberId id : hit->second) {
      if (id == m.id) continue;
      const Member& h = members_.at(id);
      if (h.spot || h.shard != m.shard || h.num_shards != m.num_shards)
        continue;  // spot replicas never count towards retention; other shards hold other data
      // (a holding whose round has not committed may still be given up: it is no copy yet)
      if ((h.buf == Buf::kHolding && h.version == m.version && h.round == 0) || serves_offload(h, m.version))
        return false;
    }
  return true;
}

void Core::begin_drain(Member& m) {
  unindex(m);
  m.buf = Buf::kDraining;
  chains_changed();
  index(m);
  check_drain(m);
}

void Core::check_drain(Member& m) {
  if (m.leaving) return;  // forgotten in this step: nothing to offload, ack or discard
  if (m.buf == Buf::kDraining && live_leases(m.id) == 0 && !drain_held(m) && m.intact && needs_offload(m)) {
    // Retention is decided again when the buffers are about to be freed: since the Unpublish
    // the other holder may have crashed, or a member with a larger `retain` may have opened.
    unindex(m);
    m.buf = Buf::kOffloading;
    chains_changed();
    index(m);
    out_.emplace_back(Offload{m.client, m.id, m.version});
  } else if (m.buf == Buf::kDraining && live_leases(m.id) == 0 && !drain_held(m)) {
    clear_reports(m.id, false, m.version);  // the next fill starts unreported
    unindex(m);
    m.buf = Buf::kEmpty;
    chains_changed();
    m.version = -1;
    m.intact = false;
    m.offload_failed = false;
    index(m);
    // A round's slot kept here for a shard that did not ask within round_hold reads nothing
    // now: freed, so that it holds no reader slot of the next fill (the shard, if it asks,
    // finds its source gone, as after a source failure).
    if (reserved_.count(m.id)) drop_reservations_on(m);
    if (m.unpublish_pending) {
      m.unpublish_pending = false;
      reply(make_reply(m.client, m.unpublish_req));
    }
  }
  for (auto it = m.offloaded.begin(); it != m.offloaded.end();) {
    bool read = false;
    if (auto lit = leases_by_source_.find(m.id); lit != leases_by_source_.end())
      for (LeaseId l : lit->second) {
        const Lease& ls = leases_.at(l);
        read = read || (ls.from_offload && ls.version == it->first);
      }
    if (it->second.dropping && !read) {
      out_.emplace_back(Discard{m.client, m.id, it->first});
      suspects_.erase({m.id, true, it->first});
      unstore(m.client, it->second.descriptor.size());
      it = m.offloaded.erase(it);
    } else {
      ++it;
    }
  }
}

void Core::drop_reservations_on(const Member& m) {
  Model* md = model_of(m);
  if (!md) return;
  for (auto& [name, r] : md->replicas)
    for (auto& [round, t] : r.txns)
      for (auto it = t.reserved.begin(); it != t.reserved.end();) {
        const int shard = (it++)->first;  // unreserve erases it
        if (t.reserved.at(shard) == m.id) unreserve(t, shard);
      }
}

void Core::sweep_retention(const std::string& model) {
  auto mit = models_.find(model);
  if (mit == models_.end()) return;
  for (const auto& [name, r] : mit->second.replicas)
    for (const auto& [s, id] : r.shards) {
      Member& m = members_.at(id);
      bool change = false;
      for (const auto& [v, c] : m.offloaded) change = change || (!c.dropping && !retained(model, v));
      if (!change) continue;
      unindex(m);
      for (auto& [v, c] : m.offloaded)
        if (!retained(model, v)) c.dropping = true;
      index(m);
      check_drain(m);
    }
}

void Core::on(const OffloadDone& e) {
  Member* m = owned(e.client, e.req, e.member);
  if (!m) return;
  if (m->buf != Buf::kOffloading || m->version != e.version)
    return reply_err(e.client, e.req, Status::kState, "no offload of this version was asked");
  const auto had = m->offloaded.find(e.version);
  const std::string over =
      over_budget(e.client, had == m->offloaded.end() ? 0 : had->second.descriptor.size(), e.descriptor.size());
  if (e.descriptor.empty() || !over.empty()) {
    // The client could not make the copy (e.g. host memory exhausted). Waiting for another
    // OffloadDone would hold the unpublish (or update) for ever: the drain goes on without a
    // copy, and the version is lost if nobody else keeps it. Retention asks this holding no
    // more (offload_failed, until the buffers are emptied). A copy over the descriptor budget
    // is refused the same way, and the client told so (it frees the copy).
    unindex(*m);
    m->offload_failed = true;
    m->buf = Buf::kDraining;
    chains_changed();
    index(*m);
    if (over.empty()) {
      reply(make_reply(e.client, e.req));
    } else {
      reply_err(e.client, e.req, Status::kArg, "offload: " + over);
    }
    check_drain(*m);
    return;
  }
  unindex(*m);
  suspects_.erase({m->id, true, e.version});  // a new copy starts unreported
  OffloadCopy& copy = m->offloaded[e.version];
  store(e.client, copy.descriptor, e.descriptor);
  copy.dropping = false;
  copy.reports.clear();
  m->buf = Buf::kDraining;
  chains_changed();
  index(*m);
  reply(make_reply(e.client, e.req));
  check_drain(*m);
  sweep_retention(m->model);
}

}  // namespace thub::sched::detail
