// A replica's rounds (the user's n-th replicate or update of a model handle): their
// transactions, which shards joined or left them, and for a replica of several shards the
// commit that gives every shard the same outcome, the round's moves to a newer version and its
// failure on every shard (docs/sched.md, "Transactions", "Rounds of several shards").
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "sched/core.h"

namespace thub::sched::detail {

Transaction* Core::transaction(Replica& r, uint64_t round) {
  auto it = r.txns.find(round);
  return it == r.txns.end() ? nullptr : &it->second;
}

void Core::finish_shard(Replica& r, uint64_t round, int shard, bool keep_slot) {
  if (round > 0) {  // it has its answer for this round: a later transaction of it skips it
    uint64_t& mark = r.refused[shard];
    mark = std::max(mark, round);
  }
  auto it = r.txns.find(round);
  if (it == r.txns.end()) return;
  it->second.joined.insert(shard);
  it->second.returning.erase(shard);
  if (!keep_slot) unreserve(it->second, shard);
  settle(r, round);
}

Transaction* Core::round_of(const Member& m) {
  if (m.round == 0) return nullptr;
  Transaction* t = transaction(*m.rep, m.round);
  return t && t->commit ? t : nullptr;
}

// Commit: every shard joined the round (or its hold passed: a shard that asks later joins a
// committed round) and none is in its transfer any more: the held TransferDones are answered.
// The round is forgotten once every shard joined and nothing is owed.
void Core::settle(Replica& r, uint64_t round) {
  auto it = r.txns.find(round);
  if (it == r.txns.end()) return;
  Transaction& t = it->second;
  const bool all = static_cast<int>(t.joined.size()) >= r.num_shards;
  if (!t.active.empty()) return;
  if (all || (t.commit && now_ >= t.hold_until && t.returning.empty())) {
    t.committed = true;
    for (const auto& [s, hd] : t.done) {
      held_reqs_.erase({hd.client, hd.req});
      auto mit = members_.find(hd.member);
      if (mit == members_.end()) continue;
      mit->second.round = 0;
      Reply rep = make_reply(hd.client, hd.req);
      rep.version = mit->second.version;
      reply(std::move(rep));
    }
    t.done.clear();
  }
  if (all) {
    // Slots still kept (an update in place that left before its grant): freed with it.
    for (auto rs = t.reserved.begin(); rs != t.reserved.end();) unreserve(t, (rs++)->first);
    r.txns.erase(it);
  }
}

void Core::leave_active(Member& m) {
  Transaction* t = round_of(m);
  m.round = 0;
  if (!t) return;
  t->active.erase(m.shard);
  unreserve(*t, m.shard);  // a slot kept for its update in place
  if (auto d = t->done.find(m.shard); d != t->done.end()) {
    held_reqs_.erase({d->second.client, d->second.req});
    t->done.erase(d);
  }
  settle(*m.rep, t->round);
}

void Core::answer_stale(Member& m, const Transaction& t, Reply& r) {
  if (t.status == Status::kOk) {
    r.status = Status::kVersionLost;
    r.version = t.version;  // >= 0: the round moved there; ask the round again
    // The source kept for it (introspection, and the simulation's view of kept slots).
    if (auto rs = t.reserved.find(m.shard); rs != t.reserved.end()) r.source = rs->second;
    r.detail = "a shard of this replica lost the version of round " + std::to_string(t.round) +
               ": the round moved to version " + std::to_string(t.version);
  } else {
    r.status = t.status;
    r.version = -1;
    r.detail = t.detail;
  }
}

// m's transfer was for a version its round no longer has: m leaves the round's transfer and
// is answered so (asked to ask the round again if it moved); the round may commit now.
void Core::reply_stale(Member& m, Transaction& t, Reply r) {
  answer_stale(m, t, r);
  t.active.erase(m.shard);
  m.round = 0;
  if (t.status == Status::kOk) {  // it asks the round again
    t.joined.erase(m.shard);
    t.returning.insert(m.shard);
  }
  const uint64_t round = t.round;
  reply(std::move(r));
  settle(*m.rep, round);
}

// The loss of one shard is the round's: with a relative spec it moves to the newest version
// some replica serves in every shard (VERSION_LOST only when none newer than the request's
// newer_than is left), else every shard gets the same error. Shards that hold or read the
// old version give it up (their buffers drain) and are told to ask the round again (a moved
// round: VERSION_LOST carrying the new version) or the error; shards not joined yet get the
// round's new answer when they ask; an update in place still draining its old holding is
// granted the new version instead.
void Core::lose_round(Member& m, const Pending* p, Status s, const std::string& detail, Reply* answer) {
  Transaction& t = *round_of(m);
  Replica& r = *m.rep;
  const uint64_t round = t.round;
  t.active.erase(m.shard);
  m.round = 0;
  if (m.buf == Buf::kReceiving && !m.unpublish_pending) begin_drain(m);  // (an Unpublish drains it itself)
  constexpr int kMaxMoves = 16;
  bool moved = false;
  if (s == Status::kVersionLost && t.spec < 0 && t.moves < kMaxMoves) {
    Version v2 = -1;
    std::string d2;
    // The newest version a replica will serve whole: the resolved one, or, when that is the
    // lost one or its holders drain too, the newest older one that stays.
    if (resolve(m, t.spec, &v2, &d2) == Status::kOk && (v2 == t.version || !replica_will_serve(m, v2)))
      v2 = older_servable(m, v2, t.newer_than);
    if (v2 >= 0 && v2 > t.newer_than && v2 != t.version && replica_will_serve(m, v2)) {
      moved = true;
      ++t.moves;
      t.version = v2;
      for (auto it = t.reserved.begin(); it != t.reserved.end();) unreserve(t, (it++)->first);
      t.source_replica.clear();
      if (auto src = choose_replica(m, v2)) {
        t.source_replica = *src;
        if (cfg_.round_hold > 0) t.hold_until = std::max(t.hold_until, now_ + cfg_.round_hold);
        round_ends_.insert({t.hold_until, m.id, round});
        const Replica& sr = models_.at(m.model).replicas.at(*src);
        // Every shard reads the new version (the ones that held or read the old one ask
        // again): its source is kept for each.
        for (int sh = 0; sh < r.num_shards; ++sh) reserve(t, sh, sr.shards.at(sh));
      }
    }
  }
  if (!moved) {
    t.status = s;
    t.detail = detail;
    for (auto it = t.reserved.begin(); it != t.reserved.end();) unreserve(t, (it++)->first);
  }
  Reply stale = make_reply(0, 0);
  answer_stale(m, t, stale);
  if (moved) {  // it asks the round again
    t.joined.erase(m.shard);
    t.returning.insert(m.shard);
  }
  if (p) {
    if (moved) {
      stale.client = p->client;
      stale.req = p->req;
      reply(stale);
    } else {
      fail_replicate(*p, m, s, detail);
    }
  } else if (answer) {
    answer->status = stale.status;
    answer->version = stale.version;
    answer->detail = stale.detail;
  }
  // Shards holding the old version, their TransferDone held: their buffers drain.
  for (const auto& [sh, hd] : std::map<int, HeldDone>(t.done)) {
    held_reqs_.erase({hd.client, hd.req});
    auto mit = members_.find(hd.member);
    t.done.erase(sh);
    if (mit == members_.end()) continue;
    Member& x = mit->second;
    x.round = 0;
    if (x.buf == Buf::kHolding) {
      unindex(x);
      x.buf = Buf::kDraining;
      x.intact = false;  // given up: never offloaded or restored
      chains_changed();
      index(x);
      check_drain(x);
    }
    Reply rep = make_reply(hd.client, hd.req);
    answer_stale(x, t, rep);
    reply(std::move(rep));
    if (moved) {
      t.joined.erase(sh);
      t.returning.insert(sh);
    }
  }
  // Shards waiting at the registry in this round: a regrant of the old version is answered;
  // an update in place still draining is granted the new version (or fails with the round).
  for (int sh : std::set<int>(t.active)) {
    auto rit = r.shards.find(sh);
    if (rit == r.shards.end()) continue;
    Member& x = members_.at(rit->second);
    PendingIt it = first_pending(x.id);
    if (it == pending_.end()) continue;  // reading: told when it reports
    Pending& q = it->second;
    if (q.in_place) {  // its old holding still drains: try_grant_update decides after it
      if (moved) q.spec = t.version;
      continue;
    }
    const Pending copy = q;
    undefer(it);
    t.active.erase(sh);
    x.round = 0;
    if (x.buf == Buf::kReceiving) begin_drain(x);
    if (!moved) {
      fail_replicate(copy, x, t.status, t.detail);
    } else {
      Reply rep = make_reply(copy.client, copy.req);
      answer_stale(x, t, rep);
      reply(std::move(rep));
      t.joined.erase(sh);
      t.returning.insert(sh);
    }
  }
  expose(r);
  settle(r, round);
}

// m resumes, at this registry, its round's version, which it holds whole already (its
// TransferDone's answer was lost with the registry before): m holds it here from now on, as
// after a TransferDone, and its answer is the round's commit (at once if the round has none
// to wait for). A loss of the round later drains it as any shard that holds the version.
void Core::complete_whole(const Pending& p, Member& m, Transaction& t) {
  Replica& r = *m.rep;
  unindex(m);
  m.buf = Buf::kHolding;
  m.version = t.version;
  chains_changed();
  index(m);
  if (t.commit && !t.committed) {
    m.round = p.round;
    t.done[m.shard] = HeldDone{p.client, p.req, m.id};
    held_reqs_.insert({p.client, p.req});
    finish_shard(r, p.round, m.shard);  // joined: may commit (and forget the round) now
    return;
  }
  const Version v = t.version;
  finish_shard(r, p.round, m.shard);
  Reply rep = make_reply(p.client, p.req);
  rep.version = v;
  reply(std::move(rep));
}

namespace {
// The errors that are a round's answer (shared by its shards), as a shard reports them.
bool round_error(Status s) {
  return s == Status::kNotFound || s == Status::kNotUpdated || s == Status::kVersionLost || s == Status::kTransport;
}
}  // namespace

// What a shard tells of its latest round at a registry before this one (its re-open after a
// failover, or a CANCEL with a version): the outcome that registry gave it. With no
// transaction of that round here, one is opened with that outcome, so that a shard that asks
// the round here (afresh: its answer was lost; or resuming) gets the same: the version
// (still `open`: the reporter is in the round's transfer, and the round commits on every
// shard, or moves, as any committing round), or the error. A report with no outcome to share
// (its own cancel or deadline) only says the shard is done with the round. Anything else a
// peer may send (an unknown status) is such a report too.
void Core::take_round_report(Member& m, uint64_t round, bool open, Status status, Version version, Version spec,
                             Version newer_than) {
  if (round == 0) return;
  Replica& r = *m.rep;
  const bool granted = status == Status::kOk && version >= 0;
  open = open && granted;
  const bool outcome = m.num_shards > 1 && (granted || round_error(status));
  const std::string failed = "round " + std::to_string(round) + " of replica " + m.replica + " ended with status " +
                             std::to_string(static_cast<int>(status)) + " on a shard at the registry before";
  Transaction* t = outcome ? transaction(r, round) : nullptr;
  const bool settled_here = t && (!t->active.empty() || !t->done.empty() || t->from == Transaction::From::kRequest);
  if (t && !open && !granted && t->status == Status::kOk && t->commit && !t->committed && settled_here) {
    // Its user saw the round fail (a failure of its own, at a registry that never heard of
    // it: its give-up went nowhere) while its siblings are in the round here: the round
    // fails on every shard, as when a shard gives its transfer up here. No move: this shard
    // will not ask again.
    t->spec = t->version;
    t->active.insert(m.shard);
    m.round = round;
    Reply scratch = make_reply(0, 0);
    lose_round(m, nullptr, status, failed, &scratch);
  } else if (t && !settled_here) {
    // Reports of one round that differ (every shard's comes before the round is asked here):
    // an answer a shard's user has seen wins over one still in its transfer, and of those,
    // the newest version (a round that moved at the registry before, told to one shard).
    const bool done_wins = !open && t->from == Transaction::From::kOpenReport;
    const bool newer = open && t->from == Transaction::From::kOpenReport && version > t->version;
    if (done_wins || newer) {
      for (auto rs = t->reserved.begin(); rs != t->reserved.end();) unreserve(*t, (rs++)->first);
      t->status = granted ? Status::kOk : status;
      t->version = granted ? version : -1;
      if (!granted) t->detail = failed;
      t->commit = t->commit && granted;
      t->from = open ? Transaction::From::kOpenReport : Transaction::From::kDoneReport;
    }
  } else if (outcome && !t) {
    Transaction n;
    n.from = open ? Transaction::From::kOpenReport : Transaction::From::kDoneReport;
    n.round = round;
    n.status = granted ? Status::kOk : status;
    n.version = granted ? version : -1;
    if (!granted) n.detail = failed;
    if (open) {
      n.commit = true;
      n.spec = spec;
      n.newer_than = newer_than;
      if (cfg_.round_hold > 0) n.hold_until = now_ + cfg_.round_hold;
      round_ends_.insert({n.hold_until, m.id, round});
    }
    start_transaction(r, std::move(n));
  }
  if (!open) return leave_round(m, round);
  enter_round(m, round);  // it asks (resumes) this round itself:
  // the round does not commit without it, whatever its hold says (it is in its transfer).
  if (Transaction* rt = transaction(r, round); rt && rt->status == Status::kOk && rt->commit && !rt->joined.count(m.shard))
    rt->returning.insert(m.shard);
  // Granted at the registry before: what it held is gone (fail_replicate, released).
  if (Transaction* rt = transaction(r, round)) rt->overwritten.insert(m.shard);
}

void Core::start_transaction(Replica& r, Transaction t) {
  // Shards done with this round (or a later one) without a transaction of it got their
  // answer for it elsewhere, or none is coming. A round-less mark concerns only the next one.
  for (auto it = r.refused.begin(); it != r.refused.end();) {
    const bool roundless = t.round == 0 || it->second == 0;
    if (roundless || it->second >= t.round) t.joined.insert(it->first);
    if (roundless)
      it = r.refused.erase(it);
    else
      ++it;
  }
  const uint64_t round = t.round;
  r.txns[round] = std::move(t);
  expose(r);  // its shards' deferred requests no longer wait for the model alone
}

// A request of round R (> 0): its shard is done with every earlier round, so the
// transactions of those rounds it has not joined stop waiting for it (and free the slot
// they reserved for it), and one opened later does not wait for it either.
bool Core::enter_round(const Member& m, uint64_t round) {
  if (round == 0) return false;
  Replica& r = *m.rep;
  bool left = false;
  for (auto it = r.txns.begin(); it != r.txns.end() && it->first < round;) {
    const uint64_t t = (it++)->first;  // finish_shard may erase it
    if (!r.txns.at(t).joined.count(m.shard)) {
      finish_shard(r, t, m.shard);
      left = true;
    }
  }
  if (round > 1) {
    uint64_t& mark = r.refused[m.shard];
    mark = std::max(mark, round - 1);
  }
  return left;
}

void Core::leave_round(const Member& m, uint64_t round) {
  Replica& r = *m.rep;
  if (round == 0) {
    if (r.txns.count(0))
      finish_shard(r, 0, m.shard);
    else
      r.refused[m.shard] = 0;
    return;
  }
  enter_round(m, round);
  finish_shard(r, round, m.shard);  // marks it done with the round
}

void Core::leave_transaction(const Member& m) {
  Model* md = model_of(m);
  if (!md) return;
  auto it = md->replicas.find(m.replica);
  if (it == md->replicas.end()) return;
  Replica& r = it->second;
  std::vector<uint64_t> rounds;
  for (const auto& [round, t] : r.txns)
    if (!t.joined.count(m.shard)) rounds.push_back(round);
  for (uint64_t round : rounds) finish_shard(r, round, m.shard);
}

}  // namespace thub::sched::detail
