// Checks from outside the registry: the world's view of what the registry decided (leases
// held by each simulated reader, holders, host copies, hidden members, old sessions) and the
// invariants checked against it at the moment of each decision: reader limits, no idle wait,
// one version and one source replica per transaction, retention on unpublish, liveness.
#include "tests/sched/simulation_world.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <type_traits>

namespace thub::sched::sim::detail {

// Host copies outside the retained window are dropped by the registry (for good).
bool World::retained_now(const std::string& model, Version v) const {
  int k = 0;
  for_each_registered([&](const Actor& b) {
    if (b.model == model) k = std::max(k, b.retain);
  });
  auto pit = published_.find(model);
  if (pit == published_.end()) return false;
  int j = 0;
  for (auto it = pit->second.rbegin(); it != pit->second.rend() && j < k; ++it, ++j)
    if (*it == v) return true;
  return false;
}

void World::sweep_host_copies() {
  auto sweep = [&](Actor& b) {
    for (Shard& t : b.sh)
      for (auto it = t.host_reg.begin(); it != t.host_reg.end();)
        it = retained_now(b.model, *it) ? std::next(it) : t.host_reg.erase(it);
  };
  for (Actor& b : actors_)
    if (b.registered) sweep(b);
  for (auto& [cid, z] : zombies_) sweep(z);
}

void World::mark_delivered(ClientId c, RequestId req) {
  int i = current(c);
  if (i < 0) return;
  for (Shard& t : actors_[i].sh)
    if (auto it = t.out.find(req); it != t.out.end()) it->second.delivered = true;
}

std::set<MemberId> World::members_of(ClientId c) const {
  std::set<MemberId> ids;
  int i = current(c);
  if (i >= 0)
    for (const Shard& t : actors_[i].sh) ids.insert(t.id);
  if (auto z = zombies_.find(c); z != zombies_.end())
    for (const Shard& t : z->second.sh) ids.insert(t.id);
  ids.erase(0);
  return ids;
}

// The reads of `readers` end (until == 0) or become orphans that end at `until`.
void World::release_reads(const std::set<MemberId>& readers, Time until) {
  for (auto it = held_.begin(); it != held_.end();) {
    if (!readers.count(it->second.reader) || it->second.orphan_until) {
      ++it;
    } else if (until) {
      it->second.orphan_until = until;
      ++it;
    } else {
      it = held_.erase(it);
    }
  }
}

// Leases held on a source, plus the slots an open transaction of another replica may
// still claim on it (an upper bound of the registry's load).
std::map<MemberId, int> World::outside_load(bool with_reservations) {
  for (auto it = held_.begin(); it != held_.end();)
    it = it->second.orphan_until && it->second.orphan_until <= now_ ? held_.erase(it) : std::next(it);
  std::map<MemberId, int> n;
  for (const auto& [l, h] : held_)
    if (!h.orphan_until) ++n[h.src];  // an orphan keeps the drain, not a reader slot
  // Every session the registry still knows counts, also one that crashed silently (its
  // transaction keeps its slots until the registry drops it or its shards leave).
  if (with_reservations)
    for_each_registered([&](const Actor& c) {
      if (!c.has_first || c.first_src < 0) return;
      for (size_t s = 0; s < c.sh.size() && s < c.first_plan.size(); ++s)
        if (!c.sh[s].round_decided) ++n[c.first_plan[s].first];
    });
  return n;
}

void World::check_reader_limit() {
  for (const auto& [src, k] : outside_load(false))
    if (k > cfg_.max_readers_per_source) {
      std::string leases;
      for (const auto& [l, h] : held_)
        if (h.src == src)
          leases += " lease " + std::to_string(l) + " (reader " + std::to_string(h.reader) +
                    (h.orphan_until ? ", orphan" : "") + ")";
      return fail("member " + std::to_string(src) + " has " + std::to_string(k) +
                  " readers (max " + std::to_string(cfg_.max_readers_per_source) +
                  ") in the clients' view:" + leases);
    }
}

// Does `t` (a shard of a registry-visible replica) hold v completely and unhidden?
bool World::complete_holder(const Shard& t, Version v) const {
  return t.id && ((t.reg_v == v && !suspect_.count(t.id)) || t.host_reg.count(v));
}

// A request the registry has seen but not answered must not wait while a source that is
// surely eligible is idle. Checked for absolute versions (a relative spec may resolve to a
// version this view cannot know) and for regrants; the first shard of a transaction only.
void World::check_no_idle_wait() {
  std::map<MemberId, int> load;
  bool loaded = false;
  for (const Actor& a : actors_) {
    if (!a.alive) continue;
    for (size_t s = 0; s < a.sh.size(); ++s)
      for (const auto& [req, out] : a.sh[s].out) {
        if (!out.delivered || out.decided) continue;
        Version v = -1;
        bool whole_replica = false;
        if (out.op == Op::kReplicate) {
          const Replicate& e = std::get<Replicate>(out.ev);
          if (e.spec < 0 || e.spec <= e.newer_than || a.has_first || out.round != a.round) continue;
          v = e.spec;
          whole_replica = true;
        } else if (out.op == Op::kFailed) {
          auto l = lease_src_.find(std::get<SourceFailed>(out.ev).lease);
          if (l == lease_src_.end()) continue;
          v = l->second.v;
        } else {
          continue;
        }
        if (!loaded) {
          load = outside_load(true);
          loaded = true;
        }
        auto idle = [&](const Shard& t) { return load[t.id] < cfg_.max_readers_per_source; };
        // A regrant never goes back to a source its reader reported in this transfer.
        const std::map<MemberId, Time>* shuns = nullptr;
        if (auto sh = shunned_.find(a.sh[s].id); out.op == Op::kFailed && sh != shunned_.end())
          shuns = &sh->second;
        std::string who;
        for_each_registered([&](const Actor& b) {
          if (!who.empty() || b.replica == a.replica || b.model != a.model || b.n != a.n) return;
          if (whole_replica) {
            for (const Shard& t : b.sh)
              if (!complete_holder(t, v) || !idle(t)) return;
            who = b.replica;
          } else if (complete_holder(b.sh[s], v) && idle(b.sh[s]) &&
                     !(shuns && shuns->count(b.sh[s].id))) {
            who = b.replica;
          }
        });
        if (!who.empty())
          return fail("request " + std::to_string(req) + " of " + a.replica + " shard " +
                      std::to_string(s) + " waits for v" + std::to_string(v) + " while " + who +
                      " is an idle holder");
      }
  }
}

// Is (client, req) a request of a current session that the registry has not answered yet?
// Only then can its delivery change the registry's state.
bool World::undecided(ClientId c, RequestId req) const {
  int i = current(c);
  if (i < 0) return false;
  for (const Shard& s : actors_[i].sh)
    if (auto it = s.out.find(req); it != s.out.end()) return !it->second.decided;
  return false;
}

// Is this the first time the registry sees (client, req), unanswered? A retry of a
// request whose answer is deferred changes nothing in the registry.
// A session the registry has removed (Disconnect, Drop) gets "unknown client" instead.
bool World::first_delivery(ClientId c, RequestId req) const {
  int i = current(c);
  if (i < 0 || !actors_[i].registered) return false;
  for (const Shard& s : actors_[i].sh)
    if (auto it = s.out.find(req); it != s.out.end())
      return !it->second.decided && !it->second.delivered;
  return false;
}

// The registry-view record of member m: in its actor's current session, or in the zombie
// of an older one.
Shard* World::reg_view(MemberId m) {
  if (auto o = owner_.find(m); o != owner_.end()) {
    Shard& t = actors_[o->second.first].sh[o->second.second];
    if (t.id == m) return &t;
  }
  for (auto& [cid, z] : zombies_)
    for (Shard& t : z.sh)
      if (t.id == m) return &t;
  return nullptr;
}

void World::hide(MemberId m) {
  if (std::getenv("THUB_SIM_TRACE"))
    std::fprintf(stderr, "t=%lld member %llu hidden in the view\n", static_cast<long long>(now_),
                 static_cast<unsigned long long>(m));
  suspect_.insert(m);
  ++hidden_[m];
}

void World::forget_client(ClientId c) {
  zombies_.erase(c);
  int i = current(c);
  if (i < 0) return;
  Actor& a = actors_[i];
  a.registered = false;
  for (Shard& s : a.sh) {
    hide(s.id);
    s.reg_v = -1;
    s.host_reg.clear();
    s.offload_ordered = -1;
  }
}

// A deferred request of an old session (its actor crashed and rejoined) may still be
// decided before the registry removes that session: nobody reads with a grant, but the
// registry counts the lease (as an orphan after a Drop) and a restored holding.
void World::zombie_decided(Actor& z, const Reply& rep) {
  for (Shard& t : z.sh) {
    auto o = t.out.find(rep.req);
    if (o == t.out.end() || o->second.decided) continue;
    o->second.decided = true;
    o->second.status = rep.status;
    bool grant = (o->second.op == Op::kReplicate || o->second.op == Op::kFailed) &&
                 rep.status == Status::kOk;
    if (grant) {
      lease_src_[rep.lease] =
          LeaseView{rep.source, rep.version, rep.source_descriptor.rfind("host-", 0) == 0};
      held_[rep.lease] = Held{rep.source, t.id, 0};
      if (o->second.op == Op::kReplicate) new_fill(t.id);
    }
    if (o->second.op == Op::kReplicate && rep.detail.find("still holding version") != std::string::npos) {
      t.reg_v = t.v;
      suspect_.erase(t.id);
      new_fill(t.id);
    }
    if (o->second.op == Op::kDone) done_read(std::get<TransferDone>(o->second.ev).lease, rep);
    if (std::getenv("THUB_SIM_TRACE"))
      std::fprintf(stderr, "t=%lld old session %llu of %s/%llu req %llu op%d -> %d v%lld src %llu\n",
                   static_cast<long long>(now_), static_cast<unsigned long long>(rep.client),
                   z.replica.c_str(), static_cast<unsigned long long>(t.id),
                   static_cast<unsigned long long>(rep.req), static_cast<int>(o->second.op),
                   static_cast<int>(rep.status), static_cast<long long>(rep.version),
                   static_cast<unsigned long long>(rep.source));
  }
}

void World::on_decided(int i, int s, const Out& out, const Reply& rep) {
  if (out.op == Op::kReplicate && out.round == actors_[i].round) actors_[i].sh[s].round_decided = true;
  Actor& a = actors_[i];
  if (std::getenv("THUB_SIM_TRACE"))
    std::fprintf(stderr, "t=%lld %s/%d req %llu op%d%s round %d(cur %d) -> %d v%lld src %llu %s\n",
                 static_cast<long long>(now_), a.replica.c_str(), s,
                 static_cast<unsigned long long>(rep.req), static_cast<int>(out.op),
                 out.op == Op::kReplicate
                     ? (" spec " + std::to_string(std::get<Replicate>(out.ev).spec) + " newer " +
                        std::to_string(std::get<Replicate>(out.ev).newer_than)).c_str()
                     : "",
                 out.round, a.round, static_cast<int>(rep.status),
                 static_cast<long long>(rep.version), static_cast<unsigned long long>(rep.source), rep.detail.c_str());
  Shard& sh = a.sh[s];
  if (out.op == Op::kOpen && rep.status == Status::kOk) {
    owner_[rep.member] = {i, s};
    a.registered = true;
  }
  if (out.op == Op::kPublish && rep.status == Status::kOk) {
    Version v = std::get<Publish>(out.ev).version;
    published_[a.model].insert(v);
    sh.reg_v = v;
    suspect_.erase(sh.id);
    new_fill(sh.id);
  }
  if (out.op == Op::kDone) done_read(std::get<TransferDone>(out.ev).lease, rep);
  if (out.op == Op::kDone && rep.status == Status::kOk) {
    sh.reg_v = rep.version;
    suspect_.erase(sh.id);
    failed_.erase(sh.id);
  }
  if (out.op == Op::kOffloadDone && rep.status == Status::kOk) {
    Version v = std::get<OffloadDone>(out.ev).version;
    sh.host_reg.insert(v);
    sh.offload_ordered = -1;
    forget_reports(sh.id, true, v);  // a new copy
    failed_host_.erase({sh.id, v});
  }
  if ((out.op == Op::kReplicate || out.op == Op::kFailed) && rep.status == Status::kOk) {
    ++res_.grants;
    bool host = rep.source_descriptor.rfind("host-", 0) == 0;
    // A copy confirmed failed is hidden from everybody until it is filled again.
    if (host ? failed_host_.count({rep.source, rep.version}) > 0 : failed_.count(rep.source) > 0)
      return fail("member " + std::to_string(sh.id) + " was granted " + (host ? "the host copy of " : "") +
                  "member " + std::to_string(rep.source) + ", which was confirmed failed");
    // The reporter itself never gets a source it reported again in the same transfer.
    if (out.op == Op::kFailed)
      if (auto sn = shunned_.find(sh.id); sn != shunned_.end() && sn->second.count(rep.source))
        return fail("member " + std::to_string(sh.id) + " was granted member " + std::to_string(rep.source) +
                    " again after reporting it failed in the same transfer");
    lease_src_[rep.lease] = LeaseView{rep.source, rep.version, host};
    held_[rep.lease] = Held{rep.source, sh.id, 0};
    if (out.op == Op::kReplicate) new_fill(sh.id);
    if (out.op == Op::kReplicate && out.round == a.round) check_transaction(i, s, rep);
  }
  if (out.op == Op::kUnpublish && rep.status == Status::kOk) acks_.emplace_back(i, s);
  if (out.op == Op::kFailed && rep.status == Status::kTransport &&
      rep.detail.find("only by sources that failed for this reader") != std::string::npos)
    ++res_.judged_alive;
  if (rep.status == Status::kVersionLost) check_version_lost(i, s, out, rep);
  if (out.op == Op::kReplicate && rep.status != Status::kOk &&
      rep.detail.find("still holding version") != std::string::npos) {
    sh.reg_v = sh.v;  // an update in place that failed after the drain: h is served again
    suspect_.erase(sh.id);
    new_fill(sh.id);
  }
  if (out.op == Op::kReplicate && rep.status == Status::kOk)
    for (const Actor& b : actors_)  // the grantee's buffers are overwritten from now on
      for (const Shard& t : b.sh)
        if (t.x.reading && !t.x.host && t.x.src == sh.id)
          return fail("member " + std::to_string(sh.id) + " granted a new version while " +
                      b.replica + " still reads it (lease " + std::to_string(t.x.lease) + ")");
}

// kVersionLost is said only when nothing is left to read, and never to a request for the
// latest (latest-k): those resolve only among versions that are not lost. Single-shard
// replicas only: a shard of a larger one shares its transaction's answer, decided earlier.
void World::check_version_lost(int i, int s, const Out& out, const Reply& rep) {
  Actor& a = actors_[i];
  const Shard& sh = a.sh[s];
  if (a.n != 1) return;
  Version v = -1;
  if (out.op == Op::kReplicate) {
    const auto& e = std::get<Replicate>(out.ev);
    // A requester's own host copy is a holder of the version that it cannot read from.
    bool own_copies = !sh.host.empty() || !sh.host_reg.empty() || sh.offload_ordered >= 0;
    // An update in place fixes its version when it begins and is granted after its drain:
    // the version may be lost meanwhile (the answer then says "still holding").
    if (e.spec < 0 && !own_copies && !out.in_place)
      return fail("request " + std::to_string(rep.req) + " of " + a.replica + " for spec " +
                  std::to_string(e.spec) + " was answered VERSION_LOST: a relative spec resolves only among versions that are not lost");
    v = e.spec;
  } else if (out.op == Op::kFailed) {
    auto l = lease_src_.find(std::get<SourceFailed>(out.ev).lease);
    if (l == lease_src_.end()) return;
    v = l->second.v;
  }
  if (v < 0) return;
  // Judged at the moment of the decision (a later answer of the same step may restore a
  // holding), but after the retention drops of this step: a Publish decided just before
  // may have dropped a host copy, and a waiter for its version is then told it is lost.
  // An update in place delivered in this step hides its holding before the waiters are
  // retried; the view hides it only after the step (unless it was refused at once).
  sweep_host_copies();
  std::string who;
  for_each_registered([&](const Actor& b) {
    const Shard& t = b.sh[0];
    if (who.empty() && b.model == a.model && b.n == 1 && t.id != sh.id && t.id != updating_now_ &&
        complete_holder(t, v))
      who = b.replica;
  });
  if (!who.empty())
    fail("request " + std::to_string(rep.req) + " of " + a.replica + " was answered VERSION_LOST for v" +
         std::to_string(v) + " while " + who + " holds it");
}

// ---- failure judgment, mirrored: sched/transaction.cc (report_failure, judge_silent)

ClientId World::session_of(MemberId m) const {
  if (auto o = owner_.find(m); o != owner_.end()) {
    const Actor& a = actors_[o->second.first];
    if (a.registered && a.sh[o->second.second].id == m) return a.cid;
  }
  for (const auto& [cid, z] : zombies_)
    for (const Shard& t : z.sh)
      if (t.id == m) return cid;
  return 0;
}

bool World::silent_view(ClientId c) const {
  Time silence = cfg_.failure_silence > 0 ? cfg_.failure_silence : cfg_.heartbeat_timeout / 2;
  auto it = last_seen_.find(c);
  return it == last_seen_.end() || now_ - it->second > silence;
}

// The registry refreshes the sender's deadline clock, then judges every reported copy whose
// source's client is silent, before it decides anything in the step.
void World::judge_silent_view(const Event& ev) {
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (!std::is_same_v<E, Tick> && !std::is_same_v<E, Disconnect>) last_seen_[e.client] = now_;
      },
      ev);
  for (auto it = reports_.begin(); it != reports_.end();) {
    auto [m, host, v] = it->first;
    ClientId c = session_of(m);
    if (c && !silent_view(c)) {
      ++it;
      continue;
    }
    it = reports_.erase(it);
    if (c) confirm(m, host, v);
  }
}

void World::reported(const SourceFailed& e) {
  auto l = lease_src_.find(e.lease);
  if (l == lease_src_.end()) return;
  const LeaseView lv = l->second;
  shunned_[e.member].emplace(lv.src, now_);
  ClientId c = session_of(lv.src);
  if (!c) return;  // gone: hidden already
  if (lv.host) {
    const Shard* t = reg_view(lv.src);
    if (!t || !t->host_reg.count(lv.v)) return;  // dropped already
  }
  ++res_.reports;
  auto key = std::make_tuple(lv.src, lv.host, lv.v);
  std::set<ClientId>& reps = reports_[key];
  reps.insert(e.client);
  if (static_cast<int>(reps.size()) < cfg_.failure_reports && !silent_view(c)) return;
  reports_.erase(key);
  confirm(lv.src, lv.host, lv.v);
}

void World::confirm(MemberId m, bool host, Version v) {
  if (std::getenv("THUB_SIM_TRACE"))
    std::fprintf(stderr, "t=%lld member %llu%s v%lld confirmed failed in the view\n", static_cast<long long>(now_),
                 static_cast<unsigned long long>(m), host ? " host copy" : "", static_cast<long long>(v));
  ++res_.confirmed;
  if (host) {
    if (Shard* t = reg_view(m)) t->host_reg.erase(v);
    failed_host_.insert({m, v});
  } else {
    hide(m);
    failed_.insert(m);  // the registry now counts its data as lost
  }
}

void World::forget_reports(MemberId m, bool host, Version v) { reports_.erase({m, host, v}); }

void World::new_fill(MemberId m) {
  for (auto it = reports_.lower_bound({m, false, INT64_MIN}); it != reports_.end() && std::get<0>(it->first) == m &&
                                                               !std::get<1>(it->first);)
    it = reports_.erase(it);
  failed_.erase(m);
  shunned_.erase(m);
}

// A TransferDone the registry took with its lease active (answered kOk, or kState because
// the reader itself was judged failed meanwhile) is a complete read: its source's reports go.
void World::done_read(LeaseId lease, const Reply& rep) {
  bool active = rep.status == Status::kOk || rep.detail.rfind("a reader reported", 0) == 0;
  auto l = lease_src_.find(lease);
  if (!active || l == lease_src_.end()) return;
  forget_reports(l->second.src, l->second.host, l->second.v);
}

// Is `t` receiving v through a chain that ends at a registry-visible complete holder or
// host copy? (The registry picks a partial source only then.) Hidden holders do not count:
// where the view cannot tell, the chain counts as broken, which only relaxes the checks.
bool World::grounded_view(const Shard& t, Version v) {
  const Shard* p = &t;
  for (size_t hops = 0; hops <= owner_.size() + 1; ++hops) {
    if (!(p->st == St::kReceiving && p->v == v && p->x.active)) return false;
    const Shard* src = reg_view(p->x.src);
    if (!src || !src->id) return false;
    if (p->x.host) return src->host_reg.count(v) > 0;
    if (src->reg_v == v && !suspect_.count(src->id)) return true;
    p = src;
  }
  return false;
}

void World::check_transaction(int i, int s, const Reply& rep) {
  Actor& a = actors_[i];
  auto own = owner_.find(rep.source);
  int src = own == owner_.end() ? -1 : own->second.first;
  if (!a.has_first) {
    a.has_first = true;
    a.first_v = rep.version;
    a.first_src = src;
    a.first_plan.clear();
    // The source replica's shards in the session that serves (an older session of an actor
    // that rejoined meanwhile is a zombie the registry still knows).
    const std::vector<Shard>* plan = src >= 0 ? &actors_[src].sh : nullptr;
    for (const auto& [cid, z] : zombies_)
      for (const Shard& t : z.sh)
        if (t.id == rep.source) plan = &z.sh;
    if (plan)
      for (const Shard& t : *plan) a.first_plan.emplace_back(t.id, hidden_[t.id]);
    return;
  }
  if (rep.version != a.first_v)
    return fail("shards of replica " + a.replica + " got versions " + std::to_string(a.first_v) +
                " and " + std::to_string(rep.version));
  if (src != a.first_src && a.first_src >= 0 && !a.in_place_round) {
    const Actor& fs = actors_[a.first_src];
    const Shard& ps = fs.sh[s];
    // (a partial whose chain no longer ends at a complete holder is not chosen any more)
    bool serves = ps.reg_v == a.first_v || grounded_view(ps, a.first_v);
    // the planned shard served all along (a member unpublished and re-filled meanwhile
    // counts as vanished: the registry rightly chose anew)
    bool same = s < static_cast<int>(a.first_plan.size()) && a.first_plan[s].first == ps.id &&
                a.first_plan[s].second == hidden_[ps.id];
    if (fs.registered && ps.id && !suspect_.count(ps.id) && serves && same)
      fail("shards of replica " + a.replica + " got different source replicas " + fs.replica +
           " and " + (src >= 0 ? actors_[src].replica : "?"));
  }
}

void World::check_unpublish_ack(int i, int s) {
  Actor& a = actors_[i];
  Shard& sh = a.sh[s];
  for (const Actor& b : actors_)
    for (const Shard& t : b.sh)
      if (t.x.reading && !t.x.host && t.x.src == sh.id)
        return fail("unpublish of member " + std::to_string(sh.id) + " acknowledged while " +
                    b.replica + " reads it (lease " + std::to_string(t.x.lease) + ")");
  // Retention: the last non-spot holder of a retained version never loses it by unpublish.
  Version v = sh.st == St::kHolding ? sh.v : -1;
  if (a.spot || v < 0 || sh.host_reg.count(v) || failed_.count(sh.id)) return;
  // Within one step `retain` only grows (an Open) or only shrinks (removals): the registry
  // decided with a value between before and after; only the smaller one is sure.
  int k = 0;
  for_each_registered([&](const Actor& b) {
    if (b.model == a.model) k = std::max(k, b.retain);
  });
  k = std::min(k, retain_before_[a.model]);
  const auto& pub = published_[a.model];
  bool retained = false;
  int j = 0;
  for (auto it = pub.rbegin(); it != pub.rend() && j < k; ++it, ++j) retained = retained || *it == v;
  if (!retained) return;
  bool kept = false;
  for_each_registered([&](const Actor& b) {
    if (&b == &a || b.spot || b.model != a.model || b.n != a.n) return;
    const Shard& t = b.sh[s];
    // a holder, a host copy, or an ordered offload (its buffers stay until OffloadDone)
    kept = kept || (t.reg_v == v && !suspect_.count(t.id)) || t.host_reg.count(v) ||
           t.offload_ordered == v;
  });
  if (kept) return;
  std::ostringstream os;
  for (const Actor& b : actors_)
    if (b.model == a.model)
      os << " [" << b.replica << " reg=" << b.registered << " spot=" << b.spot << " id=" << b.sh[s].id
         << " reg_v=" << b.sh[s].reg_v << " suspect=" << suspect_.count(b.sh[s].id) << "]";
  fail("retained version " + std::to_string(v) + " of " + a.model + " lost its last non-spot holder " +
       a.replica + " by unpublish;" + os.str());
}

void World::liveness() {
  for (const Actor& a : actors_) {
    if (!a.alive) continue;
    for (size_t s = 0; s < a.sh.size(); ++s)
      for (const auto& [req, out] : a.sh[s].out)
        return fail("request " + std::to_string(req) + " of replica " + a.replica + " shard " +
                    std::to_string(s) + " (op " + std::to_string(static_cast<int>(out.op)) +
                    ") was never answered");
  }
}

}  // namespace thub::sched::sim::detail
