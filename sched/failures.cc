// A source's failure, judged and not rumoured: a reader's SourceFailed ends its lease and is
// one report; the source's copy is hidden once enough reader clients reported it or its own
// client went silent (docs/sched.md, "Failure: judged, not rumoured").
#include <map>
#include <set>
#include <vector>

#include "sched/core.h"

namespace thub::sched::detail {

Time Core::failure_silence() const {
  return cfg_.failure_silence > 0 ? cfg_.failure_silence : cfg_.heartbeat_timeout / 2;
}

bool Core::silent(ClientId c) const {
  auto it = clients_.find(c);
  return it == clients_.end() || now_ - it->second.last_seen > failure_silence();
}

void Core::clear_reports(MemberId id, bool from_offload, Version v) {
  suspects_.erase({id, from_offload, v});
  auto it = members_.find(id);
  if (it == members_.end()) return;
  if (!from_offload) {
    it->second.reports.clear();
  } else if (auto c = it->second.offloaded.find(v); c != it->second.offloaded.end()) {
    c->second.reports.clear();
  }
}

// One reader's report is a rumour: its link may be the broken one. The copy it read is
// hidden from everybody once failure_reports distinct reader clients reported it (one
// client's members share its link), or once the source's client has been silent for
// failure_silence (now or later: judge_silent); a source that went away is gone already.
void Core::report_failure(const Lease& l, ClientId reporter) {
  auto it = members_.find(l.source);
  if (it == members_.end()) return;
  Member& s = it->second;
  std::set<ClientId>* reports = nullptr;
  if (l.from_offload) {
    auto c = s.offloaded.find(l.version);
    if (c == s.offloaded.end() || c->second.dropping) return;  // no longer served anyway
    reports = &c->second.reports;
  } else {
    if (s.buf == Buf::kEmpty || s.version != l.version) return;
    reports = &s.reports;
  }
  reports->insert(reporter);
  suspects_.insert({s.id, l.from_offload, l.version});
  if (static_cast<int>(reports->size()) >= cfg_.failure_reports || silent(s.client))
    mark_failed(s.id, l.from_offload, l.version);
}

bool Core::judge_silent() {
  if (suspects_.empty()) return false;
  std::vector<std::tuple<MemberId, bool, Version>> confirmed;
  for (const auto& key : suspects_) {
    auto it = members_.find(std::get<0>(key));
    if (it == members_.end() || silent(it->second.client)) confirmed.push_back(key);
  }
  for (const auto& [id, host, v] : confirmed) {
    suspects_.erase({id, host, v});
    mark_failed(id, host, v);
  }
  return !confirmed.empty();
}

// The copy is confirmed failed: hidden from everybody, its data never offloaded or restored.
void Core::mark_failed(MemberId id, bool from_offload, Version v) {
  clear_reports(id, from_offload, v);
  auto it = members_.find(id);
  if (it == members_.end()) return;
  Member& s = it->second;
  std::vector<Pending> in_rounds;  // its regrants in a committing round: the round's loss
  bool held_done = false;          // its answer waits for its round's commit
  unindex(s);
  chains_changed();  // s.intact, s.buf
  if (from_offload) {
    if (auto c = s.offloaded.find(v); c != s.offloaded.end()) c->second.dropping = true;
  } else if ((s.buf == Buf::kDraining || s.buf == Buf::kOffloading) && s.version == v) {
    s.intact = false;  // never offload or restore data a reader found broken
    if (auto bm = pending_by_member_.find(id); bm != pending_by_member_.end())
      for (uint64_t seq : bm->second) pending_.at(seq).restorable = false;
  } else if ((s.buf == Buf::kHolding || s.buf == Buf::kReceiving) && s.version == v) {
    // Holding its round's version, its answer held for the round's commit (a TransferDone,
    // a whole resume): it cannot hold the version now, so no shard does (the round fails on
    // every shard, as for a TransferDone that comes after the judgment). Without this the
    // commit answered it with success and no version (seed 23515).
    if (const Transaction* t = round_of(s); t && !t->committed && t->status == Status::kOk && t->version == v) {
      auto d = t->done.find(s.shard);
      held_done = d != t->done.end() && d->second.member == s.id;
    }
    // Its own transfer (if any) goes on until it reports: a lease ends only when its reader
    // stops reading. A regrant it waits for is answered: its data is considered failed.
    for (PendingIt it = first_pending(id); it != pending_.end(); it = first_pending(id)) {
      const Pending q = it->second;
      undefer(it);
      const std::string why = "this member was reported failed by its readers; unpublish, then replicate again";
      if (round_of(s))
        in_rounds.push_back(q);  // once its state below is settled
      else
        reply_err(q.client, q.req, Status::kTransport, why);
    }
    s.buf = Buf::kDraining;  // hidden; its buffers are freed once its readers report
    s.intact = false;
  }
  index(s);
  check_drain(s);
  if (held_done && members_.count(id) && round_of(members_.at(id)))
    lose_round(members_.at(id), nullptr, Status::kTransport,
               "this member was reported failed by its readers; unpublish, then replicate again");
  for (const Pending& q : in_rounds)
    if (auto mit = members_.find(q.member); mit != members_.end() && round_of(mit->second))
      lose_round(mit->second, &q, Status::kTransport,
                 "this member was reported failed by its readers; unpublish, then replicate again");
}

void Core::on(const SourceFailed& e) {
  Member* m = owned(e.client, e.req, e.member);
  if (!m) return;
  const Lease* lp = reading(e.client, e.req, *m, e.lease);
  if (!lp) return;
  Lease l = *lp;
  m->bytes_reported = e.chunks_done;  // bytes of the stream held: the resume point
  m->reported_at = now_;
  m->shunned.emplace(l.source, now_);  // this reader never gets it again in this transfer
  // Judged while the lease still holds off the source's drain: the report always concerns
  // the fill this reader was reading, whatever ending the lease does to it.
  report_failure(l, e.client);
  // The splice (membership.cc): its source's source kept a slot for it; end_lease frees
  // the slot, which it takes at once below.
  MemberId spliced = m->held_slot;
  end_lease(l.id);
  if (Transaction* t = round_of(*m); t && (t->status != Status::kOk || t->version != l.version)) {
    // Its round moved on (or failed) while it read: nothing to resume.
    if (m->buf == Buf::kReceiving) begin_drain(*m);
    return reply_stale(*m, *t, make_reply(e.client, e.req));
  }
  if (m->buf != Buf::kReceiving) {
    const std::string why = "a reader reported this member failed meanwhile: unpublish, then replicate again";
    if (round_of(*m)) {  // it cannot hold the round's version: no shard does
      Reply r = make_reply(e.client, e.req);
      lose_round(*m, nullptr, Status::kTransport, why, &r);
      return reply(std::move(r));
    }
    return reply_err(e.client, e.req, Status::kState, why);
  }
  Pending p;
  p.kind = Pending::Kind::kRegrant;
  p.client = e.client;
  p.req = e.req;
  p.member = e.member;
  p.version = l.version;
  p.round = m->round;
  if (auto sp = members_.find(spliced); sp != members_.end() && !m->shunned.count(spliced))
    if (auto pick = pick_in(sp->second, p.version, m->id)) return grant(p, *m, p.version, *pick);
  if (!try_regrant(p)) defer(p);
}

}  // namespace thub::sched::detail
