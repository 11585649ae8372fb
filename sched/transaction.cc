// Replicate, its replica-level transaction, grants and leases, transfer completion, and the
// retries of deferred requests (wake). A source's failure, judged: failures.cc.
#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "sched/core.h"

namespace thub::sched::detail {

void Core::on(const Replicate& e) {
  Member* m = owned(e.client, e.req, e.member);
  if (!m) return;
  if (holds_for_assembly(e, *m)) {
    assembling_.push_back({e, now_ + cfg_.round_hold});
    held_reqs_.insert({e.client, e.req});
    quiet_ = true;  // nothing changed that another request waits for
    return;
  }
  replicate(e);
}

// After a failover every shard of a replica opens here again on its own, and its Open says
// what the registry before decided of its latest round (take_round_report()). A shard that
// asks a round here before a sibling's Open came would decide the round alone, and the
// sibling's report (its grant, its answer, an error) would come too late to give both one
// outcome (docs/sched.md, "Across a registry failover"). Such a request waits for the
// replica's other shards to open, at most round_hold; a round that a request here opened
// already has its outcome, and is answered at once (one opened by a report may still change
// with the next shard's report).
bool Core::holds_for_assembly(const Replicate& e, const Member& m) {
  const Replica& r = *m.rep;
  return e.round > 0 && m.num_shards > 1 && cfg_.round_hold > 0 && static_cast<int>(r.shards.size()) < r.num_shards &&
         (!r.txns.count(e.round) || r.txns.at(e.round).from != Transaction::From::kRequest);
}

bool Core::release_assembled() {
  bool any = false;
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < assembling_.size(); ++i) {
      const Assembling& a = assembling_[i];
      auto mit = members_.find(a.e.member);
      const bool gone = mit == members_.end() || mit->second.client != a.e.client;
      if (!gone && now_ < a.until && holds_for_assembly(a.e, mit->second)) continue;
      const Replicate e = a.e;
      assembling_.erase(assembling_.begin() + static_cast<std::ptrdiff_t>(i));
      held_reqs_.erase({e.client, e.req});
      if (!gone) {  // (a member that went, or its client, is owed no answer)
        replicate(e);
        any = true;
      }
      again = true;  // it may have opened the round another held request waits for
      break;
    }
  }
  return any;
}

void Core::replicate(const Replicate& e) {
  Member* m = owned(e.client, e.req, e.member);
  if (!m) return;
  const Model& md = *model_of(*m);
  if (auto it = md.layout.find(m->shard); it != md.layout.end() && it->second != e.layout_hash)
    return reply_err(e.client, e.req, Status::kLayout,
                     "layout of shard " + std::to_string(m->shard) + " differs from model " +
                         m->model + "'s");
  Replica& rep = models_.at(m->model).replicas.at(m->replica);
  if (e.round == 0) rep.refused.erase(m->shard);  // a new request of this shard: its round starts now
  // THUB_Update in place (update.cc); also of a holding judged failed meanwhile (hidden and
  // draining, not by its own unpublish), whose shard does not know it yet.
  const bool judged = m->buf == Buf::kDraining && !m->intact;
  if ((m->buf == Buf::kHolding || judged) && e.newer_than >= 0 && e.newer_than == m->version &&
      !m->unpublish_pending)
    return begin_update(e, *m);
  if (m->buf != Buf::kEmpty) {
    // This shard cannot take part in its replica's transaction of this round (it would wait
    // for it for ever): it leaves it; if none is open yet, the one that another shard opens
    // must not wait for it.
    leave_round(*m, e.round);
    // A holder asking for something newer than what it does not hold: nothing newer is
    // still worth knowing at once.
    Version v = -1;
    std::string detail;
    if (e.newer_than >= 0 && m->buf == Buf::kHolding && resolve(*m, e.spec, &v, &detail) == Status::kOk &&
        v <= e.newer_than)
      return reply_err(e.client, e.req, Status::kNotUpdated, "nothing newer than " + std::to_string(e.newer_than));
    return reply_err(e.client, e.req, Status::kState,
                     std::string("member is ") + buf_name(m->buf) + " version " +
                         std::to_string(m->version) + ": unpublish before replicating");
  }
  if (has_pending(m->id))
    return reply_err(e.client, e.req, Status::kState, "a replicate of this member is in progress");
  if (std::string why = refused_descriptor(e.client, m->descriptor, e.descriptor); !why.empty()) {
    leave_round(*m, e.round);  // as any refusal before the round: its siblings do not wait for it
    return reply_err(e.client, e.req, Status::kArg, "replicate: " + why);
  }
  store(e.client, m->descriptor, e.descriptor);
  m->shunned.clear();  // a new transfer: what the last one reported no longer applies
  Pending p;
  p.kind = Pending::Kind::kReplicate;
  p.client = e.client;
  p.req = e.req;
  p.member = e.member;
  p.spec = e.spec;
  p.newer_than = e.newer_than;
  p.round = e.round;
  p.whole = e.whole && e.spec >= 0 && e.round > 0 && m->num_shards > 1;
  p.seed_only = e.seed_only;
  const bool left = enter_round(*m, e.round);
  if (!try_replicate(p)) {
    // Deferred: nothing changed that another deferred request waits for (only this member's
    // own descriptor and its shard's `refused` mark, which decide no wait), unless it left
    // a transaction of an earlier round, whose slot reserved for it is free now.
    defer(p);
    quiet_ = !left;
  }
}

// Only a replicate that changed nothing yet is canceled: its member is still empty (a
// regrant after a source failure holds part of a version; an update in place drains its
// old holding first), and it holds no lease.
void Core::on(const Cancel& e) {
  Member* m = owned(e.client, e.req, e.member);
  if (!m) return;
  for (auto it = assembling_.begin(); it != assembling_.end(); ++it) {
    if (it->e.member != m->id || (e.round != 0 && it->e.round != e.round)) continue;
    if (it->e.newer_than >= 0 && m->buf == Buf::kHolding && it->e.newer_than == m->version) break;  // an update in place
    const Replicate held = it->e;
    assembling_.erase(it);
    held_reqs_.erase({held.client, held.req});
    leave_round(*m, held.round);
    reply_err(held.client, held.req, Status::kCanceled, "canceled while waiting at the registry");
    reply(make_reply(e.client, e.req));
    return;
  }
  if (PendingIt it = first_pending(m->id);
      it != pending_.end() && m->buf == Buf::kEmpty && !it->second.in_place &&
      (e.round == 0 || it->second.round == e.round)) {
    const Pending p = it->second;
    undefer(it);
    leave_active(*m);  // a regrant of its round's join: the others commit without it
    if (p.round == 0)
      leave_transaction(*m);
    else
      leave_round(*m, p.round);  // also when no transaction of its round is open yet
    reply_err(p.client, p.req, Status::kCanceled, "canceled while waiting at the registry");
    reply(make_reply(e.client, e.req));
    return;
  }
  // An earlier registry granted this shard `version` in this round: a shard that asks the
  // round afresh here joins the same version (take_round_report()). The shard will not ask
  // that round here.
  if (e.round != 0) take_round_report(*m, e.round, false, e.status, e.version, -1, -1);
  reply_err(e.client, e.req, Status::kState, "no replicate of this member waits to be canceled");
}

// A partial holder is worth waiting for (or reading) only if its chain of sources ends at a
// complete holder without passing through the requester (a stalled chain never completes).
// A holder that is draining or offloading an intact holding still ends a chain: its readers
// finish before its buffers are freed. One whose data was found broken, or a partial that
// gave up, does not.
//
// Cached: a walk's answer is the same from every member it passes (the walk from there
// follows the same path to the same end), so each is remembered until chains_changed(). A
// requester that nobody reads is on no chain (a chain goes from reader to source), so it is
// asked as requester 0, the cached question.
bool Core::grounded(MemberId id, MemberId requester) const {
  if (requester != 0 && id != requester) {
    auto rd = leases_by_source_.find(requester);
    if (rd == leases_by_source_.end() || rd->second.empty()) requester = 0;
  }
  if (requester != 0) return grounded_walk(id, requester);
  if (ground_cache_gen_ != chain_gen_) {
    ground_cache_.clear();
    ground_cache_gen_ = chain_gen_;
  }
  ground_path_.clear();
  bool result = false;
  for (size_t hops = 0; hops <= members_.size(); ++hops) {
    if (auto c = ground_cache_.find(id); c != ground_cache_.end()) {
      result = c->second;
      break;
    }
    auto it = members_.find(id);
    if (it == members_.end()) break;
    ground_path_.push_back(id);
    const Member& h = it->second;
    if (h.buf == Buf::kHolding) {
      result = true;
      break;
    }
    if ((h.buf == Buf::kDraining || h.buf == Buf::kOffloading) && h.intact) {
      result = true;
      break;
    }
    if (h.buf != Buf::kReceiving) break;
    auto lit = leases_.find(h.own_lease);
    if (lit == leases_.end()) break;
    if (lit->second.from_offload) {
      result = members_.count(lit->second.source) > 0;
      break;
    }
    id = lit->second.source;
  }
  for (MemberId m : ground_path_) ground_cache_[m] = result;
  return result;
}

bool Core::grounded_walk(MemberId id, MemberId requester) const {
  for (size_t hops = 0; hops <= members_.size(); ++hops) {
    if (id == requester) return false;
    auto it = members_.find(id);
    if (it == members_.end()) return false;
    const Member& h = it->second;
    if (h.buf == Buf::kHolding) return true;
    if ((h.buf == Buf::kDraining || h.buf == Buf::kOffloading) && h.intact) return true;
    if (h.buf != Buf::kReceiving) return false;
    auto lit = leases_.find(h.own_lease);
    if (lit == leases_.end()) return false;
    if (lit->second.from_offload) return members_.count(lit->second.source) > 0;
    id = lit->second.source;
  }
  return false;
}

// h serves v now or will without anyone's help: a complete holder or host copy, a partial
// whose chain is grounded, a member offloading v (it serves the host copy after
// OffloadDone), or, without pipelining, a grounded receiver (it holds v when done).
Core::Serves Core::will_serve_unwalked(const Member& h, Version v, MemberId requester) const {
  if (h.id == requester) return Serves::kNo;
  if (serves_offload(h, v)) return Serves::kYes;
  if (h.version != v) return Serves::kNo;
  if (h.buf == Buf::kHolding || h.buf == Buf::kOffloading) return Serves::kYes;
  return h.buf == Buf::kReceiving ? Serves::kIfGrounded : Serves::kNo;
}

bool Core::will_serve(const Member& h, Version v, MemberId requester) const {
  Serves s = will_serve_unwalked(h, v, requester);
  return s == Serves::kYes || (s == Serves::kIfGrounded && grounded(h.id, requester));
}

bool Core::has_holder(const Member& req, Version v, int shard) const {
  const Model* md = model_of(req);
  if (!md) return false;
  for (const auto& [name, r] : md->replicas)
    if (auto it = r.shards.find(shard); it != r.shards.end() && r.num_shards == req.num_shards &&
                                        !req.shunned.count(it->second) &&
                                        will_serve(members_.at(it->second), v, req.id))
      return true;
  return false;
}

bool Core::replica_will_serve(const Member& req, Version v) const {
  const Model* md = model_of(req);
  if (!md) return false;
  const Replica& mine = md->replicas.at(req.replica);
  auto requester = [&](int s) {
    auto rq = mine.shards.find(s);
    return rq == mine.shards.end() ? MemberId{0} : rq->second;
  };
  auto all_serve_unwalked = [&](const std::string& name, const Replica& r) {
    if (name == req.replica || r.num_shards != req.num_shards ||
        static_cast<int>(r.shards.size()) != r.num_shards)
      return false;
    for (const auto& [s, id] : r.shards)
      if (will_serve_unwalked(members_.at(id), v, requester(s)) != Serves::kYes) return false;
    return true;
  };
  // Whether any replica will, so the order does not matter. First the replicas of the
  // holders of v (the index: usually a complete one comes first), with no chain walk; then
  // every replica, those that need no walk (grounded()) first, the others only if none will.
  if (auto hit = md->holders.find(v); hit != md->holders.end())
    for (MemberId id : hit->second) {
      const Member& h = members_.at(id);
      if (h.shard != req.shard || h.num_shards != req.num_shards) continue;
      if (auto rit = md->replicas.find(h.replica);
          rit != md->replicas.end() && all_serve_unwalked(rit->first, rit->second))
        return true;
    }
  std::vector<const Replica*> walk;
  for (const auto& [name, r] : md->replicas) {
    if (name == req.replica || r.num_shards != req.num_shards ||
        static_cast<int>(r.shards.size()) != r.num_shards)
      continue;
    bool no = false, partial = false;
    for (const auto& [s, id] : r.shards) {
      Serves sv = will_serve_unwalked(members_.at(id), v, requester(s));
      no = no || sv == Serves::kNo;
      partial = partial || sv == Serves::kIfGrounded;
      if (no) break;
    }
    if (no) continue;
    if (!partial) return true;
    walk.push_back(&r);
  }
  for (const Replica* r : walk) {
    bool all = true;
    for (const auto& [s, id] : r->shards) all = all && will_serve(members_.at(id), v, requester(s));
    if (all) return true;
  }
  return false;
}

bool Core::try_replicate(const Pending& p) {
  Member& m = members_.at(p.member);
  if (m.buf != Buf::kEmpty) return false;  // an update in place: its old holding drains first
  if (p.in_place) return try_grant_update(p, m);
  Replica& r = models_.at(m.model).replicas.at(m.replica);
  if (Transaction* tp = transaction(r, p.round)) {
    Transaction& t = *tp;
    // Asked again without a round: waits until the others joined, then opens the next one.
    // In a round (asked again at this registry after its answer was lost, or after it said
    // it was done with the round: resuming): the round's answer again.
    if (t.joined.count(m.shard) && p.round == 0) return false;
    if (t.status != Status::kOk) {
      fail_replicate(p, m, t.status, t.detail);
      finish_shard(r, p.round, m.shard);
      return true;
    }
    Version v = t.version;
    if (p.spec >= 0 && v != p.spec && t.commit && t.spec < 0) {
      // A shard resuming at this registry the version an earlier one granted it in this round,
      // while a sibling asked the round afresh here first and got another (the shards made
      // one relative call): the round moved. It gives up what it holds and asks again.
      Reply rep = make_reply(p.client, p.req);
      rep.status = Status::kVersionLost;
      rep.version = v;
      rep.detail = "this replica's round " + std::to_string(t.round) + " is at version " + std::to_string(v) +
                   " at this registry, not " + std::to_string(p.spec) + ": the round moved";
      t.joined.erase(m.shard);
      t.returning.insert(m.shard);
      reply(std::move(rep));
      return true;
    }
    if (p.spec >= 0 && v != p.spec) {
      finish_shard(r, p.round, m.shard);
      answer_alone(p, m);
      return true;
    }
    if (p.whole) {  // it holds the round's version already: nothing to read
      complete_whole(p, m, t);
      return true;
    }
    if (waits_for_takeover(m, &t, v)) return false;
    if (v <= p.newer_than) {
      fail_replicate(p, m, Status::kNotUpdated, "nothing newer than " + std::to_string(p.newer_than));
      finish_shard(r, p.round, m.shard);
      return true;
    }
    MemberId src = t.reserved.count(m.shard) ? t.reserved[m.shard] : 0;
    const bool held = t.holding.count(m.shard) > 0;
    // In the round's transfer from here (a loss below takes it out again): the round cannot
    // commit or be forgotten while this shard reads.
    const bool commit = t.commit && !t.committed;
    if (commit) t.active.insert(m.shard);
    finish_shard(r, p.round, m.shard);  // frees the reserved slot, so that pick_in may take it
    std::optional<SourcePick> pick;
    if (src && members_.count(src)) {
      const Member& s = members_.at(src);
      pick = pick_in(s, v, m.id);
      // Its buffers were kept for this shard (round_hold): read them although they drain.
      if (!pick && held && s.intact && s.version == v && (s.buf == Buf::kDraining || s.buf == Buf::kOffloading))
        pick = SourcePick{src, false, false};
    }
    // The reserved source vanished since: like a source failure right after the grant.
    if (!pick) pick = choose_member(m, v);
    if (commit) m.round = p.round;
    if (pick) {
      grant(p, m, v, *pick);
      return true;
    }
    if (has_holder(m, v, m.shard)) {
      Pending q = p;
      q.kind = Pending::Kind::kRegrant;
      q.version = v;
      defer(q);
      return true;  // answered later as a regrant
    }
    const std::string lost = "every holder of version " + std::to_string(v) + " of model " + m.model + " is gone";
    if (commit) {
      lose_round(m, &p, Status::kVersionLost, lost);
      return true;
    }
    fail_replicate(p, m, Status::kVersionLost, lost);
    return true;
  }
  if (p.whole) {
    // The first of its round here, holding the version whole (its commit was lost with the
    // registry before): the round is at that version, and commits once its shards joined.
    Transaction t;
    t.round = p.round;
    t.version = p.spec;
    t.commit = true;
    t.spec = p.spec;
    if (cfg_.round_hold > 0) t.hold_until = now_ + cfg_.round_hold;
    start_transaction(r, std::move(t));
    Transaction& opened = *transaction(r, p.round);
    round_ends_.insert({opened.hold_until, m.id, p.round});
    complete_whole(p, m, opened);
    return true;
  }
  Version v = -1;
  std::string detail;
  Status st = resolve(m, p.spec, &v, &detail);
  if (st == Status::kOk && v <= p.newer_than) {
    st = Status::kNotUpdated;
    detail = "nothing newer than " + std::to_string(p.newer_than);
  }
  // Offload seeding: a seed buffer takes v only as its datacenter's seeder.
  if (st == Status::kOk && p.seed_only) {
    if (std::string why = nothing_to_seed(m, v, p.newer_than); !why.empty()) {
      st = Status::kNotUpdated;
      detail = std::move(why);
    }
  }
  // Smart skipping: while its datacenter receives an older version, a relative request
  // takes that one (behind the seeder) instead of crossing for the newest.
  if (st == Status::kOk && p.spec < 0 && !p.seed_only) {
    Version local = skip_to_local(m, v, p.newer_than, /*in_place=*/false);
    if (local >= 0) v = local;
  }
  std::optional<std::string> src;
  if (st == Status::kOk) {
    src = choose_replica(m, v);
    // One replica serves every shard (a transaction has one source replica): wait for a
    // replica that will, even if each shard alone has some holder elsewhere.
    if (!src && replica_will_serve(m, v)) return false;  // busy or not yet complete: deferred
    // A relative spec whose newest version no other replica will serve (its holders drain, or
    // only this replica's own host copy holds it) takes the newest version another replica
    // serves (issue 18: VERSION_LOST only when nothing newer than it holds is left).
    if (Version older = !src && p.spec < 0 ? older_servable(m, v, p.newer_than) : -1; older >= 0) {
      v = older;
      src = choose_replica(m, v);
      if (!src) return false;  // a replica will serve it: deferred
    }
    if (!src) {
      st = Status::kVersionLost;
      detail = "every holder of version " + std::to_string(v) + " of model " + m.model + " is gone";
    }
  }
  // Taking over (Config::takeover_grace): the holders may not have come back yet.
  if ((st == Status::kNotFound || st == Status::kVersionLost) && in_takeover_grace()) return false;
  if (st != Status::kOk) {
    // The other shards of the replica get the same answer (a transaction without a grant).
    if (m.num_shards > 1) {
      Transaction t;
      t.round = p.round;
      t.status = st;
      t.detail = detail;
      start_transaction(r, std::move(t));
      finish_shard(r, p.round, m.shard);
    }
    fail_replicate(p, m, st, detail);
    return true;
  }
  const Replica& sr = models_.at(m.model).replicas.at(*src);
  Transaction t;
  t.round = p.round;
  t.version = v;
  t.source_replica = *src;
  if (cfg_.round_hold > 0) t.hold_until = now_ + cfg_.round_hold;
  t.commit = p.round > 0 && m.num_shards > 1;
  t.spec = p.spec;
  t.newer_than = p.newer_than;
  start_transaction(r, std::move(t));
  Transaction& opened = *transaction(r, p.round);
  for (int s = 0; s < m.num_shards; ++s)
    if (s != m.shard && !opened.joined.count(s)) reserve(opened, s, sr.shards.at(s));
  SourcePick pick = *pick_in(members_.at(sr.shards.at(m.shard)), v, m.id);
  if (opened.commit) {
    opened.active.insert(m.shard);
    m.round = p.round;
    round_ends_.insert({opened.hold_until, m.id, p.round});
  }
  finish_shard(r, p.round, m.shard);
  grant(p, m, v, pick);
  return true;
}

// Taking over (Config::takeover_grace): a shard of a round whose version has no holder here
// may be early (its holders publish again one by one after a failover): it waits, unless its
// round can move to a newer version now (a relative spec that resolves to one).
bool Core::waits_for_takeover(const Member& m, const Transaction* t, Version v) const {
  if (!in_takeover_grace() || has_holder(m, v, m.shard)) return false;
  Version newer = -1;
  std::string detail;
  return !(t && t->commit && t->spec < 0 && resolve(m, t->spec, &newer, &detail) == Status::kOk && newer > v);
}

// A shard whose round's transaction has another version than its absolute spec: a shard
// resuming, at a new registry, the version an earlier one granted it, while another shard
// asked the round afresh here (its answer was lost with the old registry). Handing it the
// transaction's version would fail its transfer; it is answered for its own version, its
// source chosen for this member as for a regrant (deferred as one while holders are busy).
void Core::answer_alone(const Pending& p, Member& m) {
  Version v = -1;
  std::string detail;
  Status st = resolve(m, p.spec, &v, &detail);
  if (st == Status::kOk) {
    if (auto pick = choose_member(m, v)) return grant(p, m, v, *pick);
    if (has_holder(m, v, m.shard)) {
      Pending q = p;
      q.kind = Pending::Kind::kRegrant;
      q.version = v;
      defer(q);
      return;
    }
    st = Status::kVersionLost;
    detail = "every holder of version " + std::to_string(v) + " of model " + m.model + " is gone";
  }
  fail_replicate(p, m, st, detail);
}

bool Core::try_regrant(const Pending& p) {
  Member& m = members_.at(p.member);
  Version v = p.version;
  if (auto pick = choose_member(m, v)) {
    grant(p, m, v, *pick);
    return true;
  }
  if (has_holder(m, v, m.shard)) return false;
  // Only sources this reader reported may be left. Wait for their judgment: one that is
  // really dead goes away (Disconnect, Drop) or falls silent within failure_silence of the
  // report, and then the version is lost; one still standing after that serves others but
  // not this reader, whose own link is the likely fault.
  Time until = -1;
  for (const auto& [src, when] : m.shunned)
    if (auto it = members_.find(src); it != members_.end() && it->second.shard == m.shard &&
                                      it->second.num_shards == m.num_shards &&
                                      will_serve(it->second, v, m.id))
      until = std::max(until, when + failure_silence());
  if (until >= 0 && now_ <= until) return false;
  if (m.buf == Buf::kReceiving) begin_drain(m);  // its partial buffers: readers must finish
  const Status st = until >= 0 ? Status::kTransport : Status::kVersionLost;
  const std::string detail =
      until >= 0 ? "version " + std::to_string(v) + " of model " + m.model +
                       " is still held, but only by sources that failed for this reader (they serve others)"
                 : "every holder of version " + std::to_string(v) + " of model " + m.model + " is gone";
  if (round_of(m)) {
    lose_round(m, &p, st, detail);
    return true;
  }
  fail_replicate(p, m, st, detail);
  return true;
}

void Core::grant(const Pending& p, Member& m, Version v, const SourcePick& pick) {
  Member& src = members_.at(pick.member);
  Lease l;
  l.id = next_lease_++;
  l.reader = m.id;
  l.source = src.id;
  l.reader_client = m.client;
  l.version = v;
  l.from_offload = pick.from_offload;
  l.seed = cfg_.seeding && !cfg_.seed_takes_slot && dc_of(src) != dc_of(m);
  l.granted_at = now_;
  l.progress_at = now_;
  m.seeding = -1;  // a seed decided before its drain: now it receives (will_serve)
  // m is on a cached chain only as its start, unless somebody reads m (a regrant of a
  // partial holder): then every cached answer may change.
  if (auto rd = leases_by_source_.find(m.id); rd != leases_by_source_.end() && !rd->second.empty())
    chains_changed();
  else
    ground_cache_.erase(m.id);
  leases_[l.id] = l;
  progress_.insert({l.progress_at, l.id});
  leases_by_source_[src.id].insert(l.id);
  if (!l.seed) add_load(src.id, 1);  // a new lease is no orphan
  unindex(m);
  m.buf = Buf::kReceiving;
  m.version = v;
  m.own_lease = l.id;
  // What it held is gone: if the round fails, its siblings give theirs up too (fail_replicate).
  if (p.round > 0 && m.num_shards > 1 && m.rep)
    if (Transaction* t = transaction(*m.rep, p.round)) t->overwritten.insert(m.shard);
  if (p.kind != Pending::Kind::kRegrant) {  // a regrant resumes from what SourceFailed reported
    m.bytes_reported = 0;
    m.reported_at = now_;
  }
  index(m);
  Reply r = make_reply(p.client, p.req);
  r.version = v;
  r.lease = l.id;
  r.source = src.id;
  r.source_descriptor = pick.from_offload ? src.offloaded.at(v).descriptor : src.descriptor;
  r.source_partial = pick.partial;
  reply(std::move(r));
}

void Core::end_lease(LeaseId id) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return;
  Lease l = it->second;
  leases_.erase(it);
  if (l.orphan_until) orphans_.erase({l.orphan_until, id});
  progress_.erase({l.progress_at, id});
  if (auto sit = leases_by_source_.find(l.source); sit != leases_by_source_.end()) {
    sit->second.erase(id);
    if (sit->second.empty()) leases_by_source_.erase(sit);
  }
  if (!l.orphan_until && !l.seed) add_load(l.source, -1);
  if (auto rit = members_.find(l.reader); rit != members_.end() && rit->second.own_lease == id) {
    rit->second.own_lease = 0;
    // A slot held for its regrant (the splice) is for this read's resumption only: taken by
    // its SourceFailed (which reads held_slot first) or no longer needed (done, abandoned).
    release_held(rit->second);
  }
  chains_changed();
  if (auto sit = members_.find(l.source); sit != members_.end()) check_drain(sit->second);
}

void Core::cancel_own_lease(Member& m) {
  if (m.own_lease) end_lease(m.own_lease);
}

void Core::on(const TransferDone& e) {
  Member* m = owned(e.client, e.req, e.member);
  if (!m) return;
  const Lease* lp = reading(e.client, e.req, *m, e.lease);
  if (!lp) return;
  Version v = lp->version;
  // A complete read of the source: evidence that it is healthy, whatever was reported.
  clear_reports(lp->source, lp->from_offload, v);
  end_lease(e.lease);
  Transaction* t = round_of(*m);
  if (m->buf != Buf::kReceiving) {
    const std::string why = "a reader reported this member failed meanwhile: unpublish, then replicate again";
    if (t && t->status == Status::kOk && t->version == v) {
      // Its data was judged broken: this shard cannot hold the round's version, so no shard
      // does (the round fails with kTransport on all of them).
      Reply r = make_reply(e.client, e.req);
      lose_round(*m, nullptr, Status::kTransport, why, &r);
      return reply(std::move(r));
    }
    if (t) return reply_stale(*m, *t, make_reply(e.client, e.req));  // its round moved or failed meanwhile
    return reply_err(e.client, e.req, Status::kState, why);
  }
  unindex(*m);
  m->buf = Buf::kHolding;
  chains_changed();
  m->version = v;
  index(*m);
  Reply r = make_reply(e.client, e.req);
  r.version = v;
  if (t && (t->status != Status::kOk || t->version != v)) {
    // Its round moved on (or failed) while it read: the version it holds is given up.
    unindex(*m);
    m->buf = Buf::kDraining;
    m->intact = false;
    chains_changed();
    index(*m);
    check_drain(*m);
    return reply_stale(*m, *t, std::move(r));
  }
  if (t && !t->committed) {
    t->active.erase(m->shard);
    t->done[m->shard] = HeldDone{e.client, e.req, m->id};
    held_reqs_.insert({e.client, e.req});
    return settle(*m->rep, t->round);
  }
  if (t) leave_active(*m);
  reply(std::move(r));
}


// A deferred Replicate of a replica that holds nothing (every shard's buffers empty, no host
// copy) and has no open transaction waits for the model's state alone: its answer depends
// on (model, num_shards, spec, newer_than) and the datacenter it asks from (seeding), not on
// who asks (no chain of partial sources can pass through an empty member, and an empty
// replica is never a source). So within one
// wake(), while no request has been answered, one such request that still has to wait says
// that every other with the same key waits too, and the source choice (which scans every
// holder) is not run again for each: with N replicas' shards asking in interleaved order,
// that made every event cost O(N) per deferred request, O(N^3) per version
// (docs/scale.md).
//
// The answer is remembered in the replica (Replica::model_only) while wake_gen_ is unchanged:
// wake() bumps it before every try, and between two tries it only skips requests or drops
// those of forgotten members, which changes nothing read here. So a stretch of skipped
// requests costs one walk of each replica's shards, not one per request, and no string-keyed
// lookup (Member::rep).
bool Core::waits_for_model_only(const Pending& p, const Member& m) const {
  if (p.kind != Pending::Kind::kReplicate || p.in_place) return false;
  const Replica& r = *m.rep;
  if (r.model_only_gen == wake_gen_) return r.model_only;
  bool only = r.txns.empty();
  if (only && r.shard_ptrs_gen != member_changes_) {
    r.shard_ptrs.clear();
    for (const auto& [s, id] : r.shards) r.shard_ptrs.push_back(&members_.at(id));
    r.shard_ptrs_gen = member_changes_;
  }
  if (only)
    for (const Member* xp : r.shard_ptrs) {
      const Member& x = *xp;
      if (x.buf != Buf::kEmpty || !x.offloaded.empty()) {
        only = false;
        break;
      }
    }
  r.model_only_gen = wake_gen_;
  r.model_only = only;
  return only;
}

// Tries the deferred requests in arrival order, pass after pass while one was answered.
// Skipped (no try) is a request that waits for the model's state alone when one of its key
// already had to wait and nothing was answered since (a try that waits changes nothing):
// such requests are not even visited. A pass visits, in arrival order, the exposed requests
// (all that might not wait for the model alone: deferred.cc) and, for each key not known to
// wait, the next request of its queue; so it tries exactly the requests, in the order, that
// a visit of every request would, at a cost in the requests tried, not in those waiting.
void Core::wake() {
  uint64_t answered = 0;
  bool progress = true;
  ++wake_gen_;  // the state changed since the last wake()
  ++wakes_;
  auto blocked = [&](const DeferredKey& k) { return k.blocked_wake == wakes_ && k.blocked_at == answered; };
  while (progress && !pending_.empty()) {
    progress = false;
    for (uint64_t pos = 0;;) {
      uint64_t next = 0;
      if (auto e = exposed_.upper_bound(pos); e != exposed_.end()) next = *e;
      for (const auto& [k, dk] : deferred_keys_)
        if (!blocked(dk))
          if (auto q = dk.seqs.upper_bound(pos); q != dk.seqs.end() && (next == 0 || *q < next)) next = *q;
#ifdef THUB_SCHED_CHECK_WAKE
      check_skipped(pos, next ? next : UINT64_MAX, answered);
#endif
      if (next == 0) break;
      pos = next;
      PendingIt it = pending_.find(pos);
      Pending& q = it->second;
      if (q.member_gen != member_changes_) {
        auto mit = members_.find(q.member);
        if (mit == members_.end()) {
          undefer(it);
          continue;
        }
        q.member_ptr = &mit->second;
        q.member_gen = member_changes_;
      }
      bool model_only = waits_for_model_only(q, *q.member_ptr);
      if (model_only) {
        exposed_.erase(pos);  // visited through its key's queue from now on (until exposed)
        if (blocked(q.key->second)) continue;  // an identical request had to wait since the last answer
      }
      Pending p = q;  // try_* may defer more requests
      ++wake_gen_;    // a try may change what waits_for_model_only read
      bool done = p.kind == Pending::Kind::kRegrant ? try_regrant(p) : try_replicate(p);
      ++wake_gen_;
      if (done) {
        undefer(pending_.find(pos));
        progress = true;
        ++answered;
      } else if (model_only) {
        p.key->second.blocked_wake = wakes_;  // a try that waits changes nothing
        p.key->second.blocked_at = answered;
      }
    }
  }
}

}  // namespace thub::sched::detail
