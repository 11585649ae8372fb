// Checks from outside the registry: the world's view of what the registry was told and
// decided, per client session (leases held by each reader, holders, host copies, hidden
// members, sessions not yet removed), and the invariants checked against it at the moment of
// each decision: reader limits, no idle wait, one version and one source replica per
// transaction, drains on unpublish, and that every request is answered. Retention is checked
// in simulation_retention.cc, failures are judged in simulation_failures.cc.
#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>

#include "tests/sched/simulation_world.h"

namespace thub::sched::sim::detail {

void World::mark_delivered(ClientId c, RequestId req) {
  auto ss = sessions_.find(c);
  if (ss == sessions_.end()) return;
  if (auto it = ss->second.out.find(req); it != ss->second.out.end()) {
    it->second.delivered = true;
    if (!it->second.decided) ss->second.waiting.insert(req);
  }
}

std::set<MemberId> World::members_of(ClientId c) const {
  std::set<MemberId> ids;
  if (auto ss = sessions_.find(c); ss != sessions_.end())
    for (const ShardView& t : ss->second.sh) ids.insert(t.id);
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

// `gone` leave the registry (Close, Disconnect, Drop): a reader of one of them (or one
// whose slot was held on one of them) may now have a slot held on the gone member's own
// source, unless that source leaves too. Over-approximates the registry's rule (which holds
// one slot, for one reader, under more conditions): the idle check counts it as busy.
void World::splice_view(const std::set<MemberId>& gone) {
  for (MemberId m : gone) {
    MemberId up = 0;
    for (const auto& [l, h] : held_)
      if (h.reader == m && !h.orphan_until) up = h.src;
    if (gone.count(up)) up = 0;
    for (auto& [l, h] : held_)
      if (!h.orphan_until && !gone.count(h.reader) && (h.src == m || h.splice_src == m)) h.splice_src = up;
  }
}

// Is a read the registry still counts on `src` under way (a host copy of v, or its buffers)?
bool World::read_by_lease(MemberId src, bool host, Version v) {
  for (const auto& [l, h] : held_) {
    if (h.src != src || (h.orphan_until && h.orphan_until <= now_)) continue;
    auto lv = lease_src_.find(l);
    if (lv == lease_src_.end() || lv->second.host != host) continue;
    if (!host || lv->second.v == v) {
      trace("lease " + std::to_string(l) + " of reader " + std::to_string(h.reader) + " reads member " + std::to_string(src));
      return true;
    }
  }
  return false;
}

// Leases held on a source, plus the slots an open transaction of another replica may
// still claim on it (an upper bound of the registry's load).
std::map<MemberId, int> World::outside_load(bool with_reservations) {
  for (auto it = held_.begin(); it != held_.end();)
    it = it->second.orphan_until && it->second.orphan_until <= now_ ? held_.erase(it) : std::next(it);
  std::map<MemberId, int> n;
  for (const auto& [l, h] : held_)
    if (!h.orphan_until) {
      if (!h.seed) ++n[h.src];  // an orphan keeps the drain, not a reader slot; a seed neither
      if (with_reservations && h.splice_src) ++n[h.splice_src];
    }
  // Every session the registry still knows counts, also one whose process is gone (its
  // transaction keeps its slots until the registry drops it or its shards leave).
  if (with_reservations)
    for (const auto& [cid, c] : sessions_) {
      if (!c.has_first || !c.first_src) continue;
      for (size_t s = 0; s < c.sh.size() && s < c.first_plan.size(); ++s)
        if (!c.sh[s].round_decided) ++n[c.first_plan[s].first];
    }
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
      return fail("member " + std::to_string(src) + " has " + std::to_string(k) + " readers (max " +
                  std::to_string(cfg_.max_readers_per_source) + ") in the clients' view:" + leases);
    }
}

// Does `t` (a member the registry knows) hold v completely and unhidden?
bool World::complete_holder(const ShardView& t, Version v) const {
  return t.id && ((t.reg_v == v && !suspect_.count(t.id)) || t.host_reg.count(v));
}

// A request the registry has seen but not answered must not wait while a source that is
// surely eligible is idle. Checked for absolute versions (a relative spec may resolve to a
// version this view cannot know) and for regrants; the first shard of a transaction only.
void World::check_no_idle_wait() {
  std::map<MemberId, int> load;
  bool loaded = false;
  // An update in place of a replica of several shards keeps a slot on each shard of a source
  // replica until that shard's grant (sched/update.cc), a replica this view cannot name (the
  // choice is answered only with each grant): while one waits, the model's holders may be
  // busy for it.
  std::set<std::string> updating;
  for (const auto& [cid, ss] : sessions_) {
    const Actor& a = actor_of(ss);
    if (a.n < 2) continue;
    for (RequestId req : ss.waiting) {
      const Out& out = ss.out.at(req);
      if (out.op == Op::kReplicate && std::get<Replicate>(out.ev).newer_than >= 0) updating.insert(a.name);
    }
  }
  for (const auto& [cid, ss] : sessions_) {
    const Actor& a = actor_of(ss);
    if (!a.alive || a.conn.cid != cid || updating.count(a.name)) continue;
    for (RequestId req : ss.waiting) {
      const Out& out = ss.out.at(req);
      Version v = -1;
      bool whole_replica = false;
      if (out.op == Op::kReplicate) {
        const Replicate& e = std::get<Replicate>(out.ev);
        if (e.spec < 0 || e.spec <= e.newer_than || out.round != a.round || (ss.has_first && ss.txn_round == out.round))
          continue;
        if (e.whole) continue;  // a resume that reads nothing: it waits for its round's commit
        // A round's first request waits (round_hold at most) while a shard of its replica is
        // not open at the registry: its Open's round report may be the round's outcome.
        if (a.n > 1 && out.round > 0 &&
            std::any_of(ss.sh.begin(), ss.sh.end(), [](const ShardView& t) { return t.id == 0; }))
          continue;
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
      auto idle = [&](const ShardView& t) { return load[t.id] < cfg_.max_readers_per_source; };
      const int s = out.shard;
      // A regrant never goes back to a source its reader reported in this transfer.
      const std::map<MemberId, Time>* shuns = nullptr;
      if (auto sn = shunned_.find(ss.sh[s].id); out.op == Op::kFailed && sn != shunned_.end()) shuns = &sn->second;
      std::string who;
      // A holder in another datacenter is no source while a's own may hold v (seeding).
      const bool seeded = cfg_.seeding && seeded_view(a, v, whole_replica ? -1 : s);
      for (const auto& [bid, bs] : sessions_) {
        const Actor& b = actor_of(bs);
        if (!who.empty() || b.replica == a.replica || b.model != a.model || b.n != a.n) continue;
        if (seeded && b.dc != a.dc) continue;

        if (whole_replica) {
          bool all = true;
          for (const ShardView& t : bs.sh) all = all && complete_holder(t, v) && idle(t);
          if (all) who = b.replica;
        } else if (complete_holder(bs.sh[s], v) && idle(bs.sh[s]) && !(shuns && shuns->count(bs.sh[s].id))) {
          who = b.replica;
        }
      }
      if (!who.empty())
        return fail("request " + std::to_string(req) + " of " + a.replica + " shard " + std::to_string(s) +
                    " waits for v" + std::to_string(v) + " while " + who + " is an idle holder");
    }
  }
}

bool World::seeded_view(const Actor& a, Version v, int s) const {
  // Granted (its answer may be on the way to the reader still).
  for (const auto& [l, h] : held_) {
    auto lv = lease_src_.find(l);
    if (h.orphan_until || lv == lease_src_.end() || lv->second.v != v) continue;
    auto own = owner_.find(h.reader);
    if (own == owner_.end() || !sessions_.count(own->second.first)) continue;
    const Actor& c = actor_of(sessions_.at(own->second.first));
    if (c.dc == a.dc && c.replica != a.replica && c.model == a.model && c.n == a.n && (s < 0 || own->second.second == s))
      return true;
  }
  for (const auto& [cid, cs] : sessions_) {
    const Actor& c = actor_of(cs);
    if (c.dc != a.dc || c.replica == a.replica || c.model != a.model || c.n != a.n) continue;
    for (int k = 0; k < static_cast<int>(cs.sh.size()); ++k)
      if ((s < 0 || k == s) && may_hold_view(cs, k, v)) return true;
  }
  return false;
}

// Shard k of session cs holds v, receives it, or its round at v keeps a slot for it (it has
// not asked yet), in the registry's eyes as far as this view can tell (an upper bound).
bool World::may_hold_view(const Session& cs, int k, Version v) const {
  const Actor& c = actor_of(cs);
  const ShardView& t = cs.sh[k];
  if (cs.has_first && cs.first_v == v && !t.round_decided) return true;
  if (!t.id) return false;
  if (t.reg_v == v || t.host_reg.count(v) || t.offload_ordered == v) return true;  // (an ordered copy: kOffloading)
  // A request of its not answered yet: the registry may have decided it for v already. A seed
  // buffer's seed-only request, for any version newer than what it holds (an update in place
  // whose old holding drains counts as holding the new one: sched Member::seeding); any other
  // replicate or update whose spec allows v: its round's transaction takes its version at its
  // first request and keeps a slot for every shard, also one whose old holding drains before
  // it is answered (sched will_hold(): t.reserved), which the round's first answer (has_first)
  // does not show while every shard of it waits for its drain (seed 36345).
  for (const auto& [q, o] : cs.out) {
    if (o.shard != k || o.decided || o.op != Op::kReplicate) continue;
    const Replicate& r = std::get<Replicate>(o.ev);
    if (r.newer_than < v && (c.seed || r.spec < 0 || r.spec == v)) return true;
  }
  return k < static_cast<int>(c.sh.size()) && c.sh[k].m->member() == t.id &&
         (c.sh[k].m->receiving() == v || c.sh[k].m->held() == v);  // (its done on the way)
}

// Every shard of replica xss holds v, a host copy of it, or reads it from a source grounded
// in the registry's eyes (as far as this view can tell); with `reserved`, also a shard its
// round at v keeps a slot for (it has not asked yet: sched will_hold()).
bool World::whole_in_view(const Session& xss, Version v, bool reserved) {
  const Actor& xa = actor_of(xss);
  for (int k = 0; k < static_cast<int>(xss.sh.size()); ++k) {
    const ShardView& t = xss.sh[k];
    if (reserved && xss.has_first && xss.first_v == v && !t.round_decided) continue;
    if (!t.id || !(t.reg_v == v || t.host_reg.count(v) ||
                   (k < static_cast<int>(xa.sh.size()) && xa.sh[k].m->member() == t.id &&
                    xa.sh[k].m->receiving() == v && grounded_view(t.id, v))))
      return false;
  }
  return true;
}

// At a round's plan (its first grant, or a move): the other replicas of the model in the
// reader's datacenter that were not whole for v then, a shard its round keeps a slot for
// counted as whole, as the registry counts it when it plans (check_seeding's excuse for the
// round's later shards).
void World::note_plan(ClientId c, Version v) {
  Session& ss = sessions_.at(c);
  const Actor& a = actor_of(ss);
  ss.plan_unwhole.clear();
  for (auto& [x, xss] : sessions_) {
    if (x == c || xss.actor < 0) continue;
    const Actor& xa = actor_of(xss);
    if (xa.dc == a.dc && xa.model == a.model && xa.n == a.n && xa.replica != a.replica &&
        !whole_in_view(xss, v, true))
      ss.plan_unwhole.insert(x);
  }
}

void World::check_seeding(ClientId c, int s, const Out& out, const Reply& rep) {
  Session& ss = sessions_.at(c);
  const Actor& a = actor_of(ss);
  auto dc_of = [&](MemberId m) -> const Actor* {
    auto own = owner_.find(m);
    if (own == owner_.end() || !sessions_.count(own->second.first)) return nullptr;
    return &actor_of(sessions_.at(own->second.first));
  };
  const Actor* src = dc_of(rep.source);
  if (!src || src->dc == a.dc) return;
  auto src_own = owner_.find(rep.source);
  const bool follows_plan = out.op == Op::kReplicate && out.round == ss.txn_round && ss.has_first &&
                            src_own != owner_.end() && src_own->second.first == ss.first_src;
  ++res_.seeds;
  if (a.seed) ++res_.offload_seeds;
  const MemberId me = sessions_.at(c).sh[s].id;
  const auto sn = shunned_.find(me);
  for (const auto& [l, h] : held_) {
    auto lv = lease_src_.find(l);
    if (h.orphan_until || lv == lease_src_.end() || lv->second.v != rep.version || h.reader == me) continue;
    auto own = owner_.find(h.reader);
    const Actor* x = dc_of(h.reader);
    const Actor* xs = dc_of(h.src);
    if (!x || !xs || x->dc != a.dc || xs->dc == a.dc || x->replica == a.replica || x->model != a.model ||
        x->n != a.n || own->second.second != s)
      continue;
    // Beside another seed: fine only if this reader reported that one, or its chain is broken
    // in the registry's eyes (as far as this view can tell: hidden, or not grounded).
    ++res_.seeds_beside;
    if ((sn != shunned_.end() && sn->second.count(h.reader)) || hidden_.count(h.reader) || !grounded_view(h.reader, rep.version))
      continue;
    // A round reads every shard from one replica: one of this datacenter that is not reading
    // or holding every shard of v (a shard not asked yet, or waiting for a source) may be
    // no source for it. A later shard of a round follows the replica its round planned: that
    // other replica is judged as it stood when the round was planned (seed 29344: not whole
    // then, one of its shards waiting for a source, whole again by this shard's grant).
    if (a.n > 1 && (!whole_in_view(sessions_.at(own->second.first), rep.version) ||
                    (follows_plan && ss.plan_unwhole.count(own->second.first))))
      continue;
    return fail("member " + std::to_string(me) + " of " + a.replica + " (" + a.dc + ") was granted v" +
                std::to_string(rep.version) + " from member " + std::to_string(rep.source) + " of " + src->replica +
                " (" + src->dc + ") while member " + std::to_string(h.reader) + " of " + x->replica +
                " reads it across too (lease " + std::to_string(l) + ")");
  }
}

// Is (client, req) a request the registry has not answered yet? Only then can its delivery
// change the registry's state.
bool World::undecided(ClientId c, RequestId req) const {
  auto ss = sessions_.find(c);
  if (ss == sessions_.end()) return false;
  auto it = ss->second.out.find(req);
  return it != ss->second.out.end() && !it->second.decided;
}

// Is this the first time the registry sees (client, req), unanswered? A retry of a
// request whose answer is deferred changes nothing in the registry.
bool World::first_delivery(ClientId c, RequestId req) const {
  auto ss = sessions_.find(c);
  if (ss == sessions_.end()) return false;
  auto it = ss->second.out.find(req);
  return it != ss->second.out.end() && !it->second.decided && !it->second.delivered;
}

// The registry-view record of member m.
ShardView* World::reg_view(MemberId m) {
  auto o = owner_.find(m);
  if (o == owner_.end()) return nullptr;
  auto ss = sessions_.find(o->second.first);
  if (ss == sessions_.end()) return nullptr;
  ShardView& t = ss->second.sh[o->second.second];
  return t.id == m ? &t : nullptr;
}

void World::hide(MemberId m) {
  trace("member " + std::to_string(m) + " hidden in the view");
  suspect_.insert(m);
  ++hidden_[m];
}

void World::note_left(const Session& ss, int k) {
  const Actor& b = actor_of(ss);
  const ShardView& t = ss.sh[k];
  if (!t.id) return;
  Left l{b.name, b.n, k, b.spot, suspect_.count(t.id) > 0, t.reg_v, t.host_reg, {}};
  for (const auto& [lease, h] : held_)
    if (h.reader == t.id) l.reading.insert(h.src);
  left_now_.push_back(std::move(l));
}

void World::forget_client(ClientId c) {
  auto ss = sessions_.find(c);
  if (ss == sessions_.end()) return;
  for (int k = 0; k < static_cast<int>(ss->second.sh.size()); ++k) note_left(ss->second, k);
  for (ShardView& t : ss->second.sh)
    if (t.id) hide(t.id);
  sessions_.erase(ss);
  // The registry forgets a model (its published versions with it) as its last member goes,
  // before an Open the same step decides afterwards (one that waited for this session to
  // go) makes it anew: forgotten here too, not only at the end of the step.
  forget_models();
}

void World::on_decided(ClientId c, Out& out, const Reply& rep) {
  Session& ss = sessions_.at(c);
  const Actor& a = actors_[ss.actor];
  const int s = out.shard;
  ShardView& sh = ss.sh[s];
  if (trace_) {
    std::ostringstream os;
    os << "decided " << a.replica << "/" << s << " client " << c << " req " << rep.req << " op"
       << static_cast<int>(out.op) << " round " << out.round << " -> " << static_cast<int>(rep.status) << " v"
       << rep.version << " src " << rep.source << " lease " << rep.lease << " " << rep.detail;
    trace(os.str());
  }
  if (out.op == Op::kReplicate && a.n > 1) {
    auto key = std::make_tuple(ss.actor, a.proc, a.round);
    auto [it, fresh] = round_opened_.try_emplace(key, now_);
    // (at round_hold: the registry commits the round at the start of that step, before this)
    if (!fresh && now_ >= it->second + cfg_.round_hold) late_rounds_.insert(key);
  }
  if (out.op == Op::kReplicate) {
    if (out.round > ss.txn_round) {  // the first decision of a new round
      ss.txn_round = out.round;
      ss.has_first = false;
      ss.in_place_round = std::get<Replicate>(out.ev).newer_than >= 0;
      for (ShardView& t : ss.sh) t.round_decided = false;
    }
    if (out.round == ss.txn_round) sh.round_decided = true;
  }
  const bool ok = rep.status == Status::kOk;
  if (out.op == Op::kOpen && ok) {
    owner_[rep.member] = {c, s};
    opened_now_.insert(rep.member);
    const bool decided = sh.round_decided;  // a transaction may already keep a slot for it
    sh = ShardView{};
    sh.id = rep.member;
    sh.round_decided = decided;
  }
  if (out.op == Op::kClose && ok) {
    note_left(ss, s);
    sh.id = 0;
    sh.reg_v = -1;
    sh.host_reg.clear();
    sh.offload_ordered = -1;
    forget_models();  // its last member gone, as for a client's removal (forget_client)
  }
  if (out.op == Op::kPublish && ok) {
    Version v = std::get<Publish>(out.ev).version;
    published_[a.name].insert(v);
    sh.reg_v = v;
    sh.copy_failed = -1;
    suspect_.erase(sh.id);
    new_fill(sh.id);
  }
  // A resume of a version the shard holds whole (its commit lost with a registry before):
  // answered with the round's commit, no source read; it holds the version from then on.
  const bool whole = out.op == Op::kReplicate && std::get<Replicate>(out.ev).whole && rep.lease == 0;
  if ((out.op == Op::kDone || whole) && ok) {
    sh.reg_v = rep.version;
    suspect_.erase(sh.id);
    failed_.erase(sh.id);
  }
  if (out.op == Op::kOffloadDone && ok && std::get<OffloadDone>(out.ev).descriptor.empty()) {
    sh.offload_ordered = -1;  // no copy: the drain goes on without one
    sh.copy_failed = std::get<OffloadDone>(out.ev).version;
  } else if (out.op == Op::kOffloadDone && ok) {
    Version v = std::get<OffloadDone>(out.ev).version;
    sh.host_reg.insert(v);
    sh.offload_ordered = -1;
    forget_reports(sh.id, true, v);  // a new copy
    failed_host_.erase({sh.id, v});
  }
  if ((out.op == Op::kReplicate || out.op == Op::kFailed) && ok && !whole) {
    ++res_.grants;
    const bool host = rep.source_descriptor.rfind("host/", 0) == 0;
    // A copy confirmed failed is hidden from everybody until it is filled again.
    if (host ? failed_host_.count({rep.source, rep.version}) > 0 : failed_.count(rep.source) > 0)
      return fail("member " + std::to_string(sh.id) + " was granted " + (host ? "the host copy of " : "") + "member " +
                  std::to_string(rep.source) + ", which was confirmed failed");
    // The reporter itself never gets a source it reported again in the same transfer.
    if (out.op == Op::kFailed)
      if (auto sn = shunned_.find(sh.id); sn != shunned_.end() && sn->second.count(rep.source))
        return fail("member " + std::to_string(sh.id) + " was granted member " + std::to_string(rep.source) +
                    " again after reporting it failed in the same transfer");
    lease_src_[rep.lease] = LeaseView{rep.source, rep.version, host};
    if (out.op == Op::kReplicate && read_by_lease(sh.id, false, -1))
      return fail("member " + std::to_string(sh.id) + " granted a new version while a lease still reads it");
    if (cfg_.seeding) check_seeding(c, s, out, rep);
    held_[rep.lease] = Held{rep.source, sh.id, 0};
    if (auto own = owner_.find(rep.source);
        cfg_.seeding && !cfg_.seed_takes_slot && own != owner_.end() && sessions_.count(own->second.first))
      held_[rep.lease].seed = actor_of(sessions_.at(own->second.first)).dc != a.dc;
    if (out.op == Op::kReplicate) {
      new_fill(sh.id);  // a reader's report of its earlier buffers: this fill is new
      sh.copy_failed = -1;
    }
    // (A single shard has no transaction to share; it may ask twice in a round: moved on.)
    // (A skewed session's shards are not compared, but its first grant still plans the slots
    // the round keeps on the source's other shards: the idle check counts them as busy.)
    if (out.op == Op::kReplicate && out.round == ss.txn_round && a.n > 1 && (!skewed(c) || !ss.has_first))
      check_transaction(c, s, rep);
  }
  if (out.op == Op::kUnpublish && ok) acks_.emplace_back(c, s);
  if (rep.status == Status::kNotUpdated && rep.detail.find("smart skipping") != std::string::npos) {
    // Smart skipping: an update keeps what it holds while a newer version is on its way into
    // its datacenter (sched/source_chooser.cc, skip_to_local): one must be, as far as the
    // view can tell.
    // (A round of several shards is decided at its first shard: the others get that answer
    // later, when it may be out of date. Checked at the first.)
    ++res_.skipped_updates;
    const Version before = out.op == Op::kReplicate ? std::get<Replicate>(out.ev).newer_than : -1;
    const bool first = a.n == 1 || out.round == 0 || skip_rounds_.insert({c, out.round}).second;
    bool on_its_way = !first;
    // The versions the registry knows: those published to it, and those its members hold
    // (after a failover, a replica that resumed at the end of its transfer holds a version no
    // trainer has published there yet, and the registry resolves "latest" to it: seed 42510).
    std::set<Version> known = published_[a.name];
    for (const auto& [x, xss] : sessions_) {
      if (xss.actor < 0 || actor_of(xss).name != a.name) continue;
      for (const ShardView& t : xss.sh) {
        if (t.id && t.reg_v >= 0) known.insert(t.reg_v);
        for (Version u : t.host_reg) known.insert(u);
      }
    }
    for (Version u : known) on_its_way = on_its_way || (u > before && seeded_view(a, u, -1));
    if (!on_its_way)
      return fail(a.replica + "/" + std::to_string(s) + " answered not updated by smart skipping (" + rep.detail +
                  "), but nothing newer than " + std::to_string(before) + " is on its way into datacenter " + a.dc);
    skipped_.insert({ss.actor, s});
  }
  if (out.op == Op::kCancel && std::get<Cancel>(out.ev).version >= 0) ss.told_round = out.round;
  // A re-open's round report with a version opens its round with no planned source (the
  // report's round is the machine's count; the program's round is the one it reports on).
  if (out.op == Op::kOpen && ok && std::get<Open>(out.ev).round_version >= 0) ss.told_round = out.round;
  if (out.op == Op::kFailed && rep.status == Status::kTransport &&
      rep.detail.find("only by sources that failed for this reader") != std::string::npos)
    ++res_.judged_alive;
  if (rep.status == Status::kVersionLost && rep.version >= 0 && a.n > 1) {
    // The round moved to rep.version (sched/transaction.cc, lose_round): every shard of it
    // gets that version from now on, from sources chosen anew.
    // rep.source: a member of the replica it planned as the new source, whose slots it
    // keeps for every shard until each asks again (an upper bound: counted as busy). A later
    // shard told of the same move without a source (sched/transaction.cc: "the round
    // moved") leaves that plan standing: the registry's transaction still keeps its slots.
    const bool same_move = ss.has_first && ss.moved_round == ss.txn_round && ss.first_v == rep.version &&
                           ss.first_src && !rep.source;
    if (!same_move) {
      ss.has_first = true;
      ss.first_v = rep.version;
      ss.first_src = 0;
      ss.first_plan.clear();
      ss.moved_round = ss.txn_round;
      if (auto own = owner_.find(rep.source); rep.source && own != owner_.end()) {
        ss.first_src = own->second.first;
        if (auto fs = sessions_.find(ss.first_src); fs != sessions_.end())
          for (const ShardView& t : fs->second.sh) ss.first_plan.emplace_back(t.id, hidden_[t.id]);
        for (ShardView& t : ss.sh) t.round_decided = false;
        note_plan(c, rep.version);
      }
    }
    ++res_.rounds_moved;
  }
  if (rep.status == Status::kVersionLost) check_version_lost(c, s, out, rep);
  if (out.op == Op::kReplicate && !ok && rep.released) {
    // Its round failed after a sibling's buffers were overwritten for it: the registry counts
    // this shard as holding nothing any more, and the shard gives its version up alike
    // (Reply::released, sched/update.cc).
    sh.reg_v = -1;
  }
  if (out.op == Op::kReplicate && !ok && rep.detail.find("still holding version") != std::string::npos) {
    sh.reg_v = std::get<Replicate>(out.ev).newer_than;  // an update in place that failed after the drain
    suspect_.erase(sh.id);
    new_fill(sh.id);
  }
}

void World::check_transaction(ClientId c, int s, const Reply& rep) {
  Session& ss = sessions_.at(c);
  const Actor& a = actors_[ss.actor];
  auto own = owner_.find(rep.source);
  ClientId src = own == owner_.end() ? 0 : own->second.first;
  if (!ss.has_first) {
    ss.has_first = true;
    ss.first_v = rep.version;
    ss.first_src = src;
    ss.first_plan.clear();
    if (auto fs = sessions_.find(src); fs != sessions_.end())
      for (const ShardView& t : fs->second.sh) ss.first_plan.emplace_back(t.id, hidden_[t.id]);
    note_plan(c, rep.version);
    return;
  }
  if (rep.version != ss.first_v)
    return fail("shards of replica " + a.replica + " got versions " + std::to_string(ss.first_v) + " and " +
                std::to_string(rep.version));
  if (src == ss.first_src || !ss.first_src || ss.in_place_round || ss.told_round == ss.txn_round ||
      ss.moved_round == ss.txn_round)
    return;
  auto fs = sessions_.find(ss.first_src);
  if (fs == sessions_.end()) return;
  const ShardView& ps = fs->second.sh[s];
  const Actor& fa = actors_[fs->second.actor];
  // (a partial whose chain no longer ends at a complete holder is not chosen any more)
  bool serves = ps.reg_v == ss.first_v || grounded_view(ps.id, ss.first_v);
  // the planned shard served all along (a member unpublished and re-filled meanwhile
  // counts as vanished: the registry rightly chose anew)
  bool same = s < static_cast<int>(ss.first_plan.size()) && ss.first_plan[s].first == ps.id &&
              ss.first_plan[s].second == hidden_[ps.id];
  if (ps.id && !suspect_.count(ps.id) && serves && same)
    fail("shards of replica " + a.replica + " got different source replicas " + fa.replica + " and " +
         (src && sessions_.count(src) ? actors_[sessions_.at(src).actor].replica : std::string("?")));
}

// Is member m receiving v through a chain that ends at a registry-visible complete holder or
// host copy? (The registry picks a partial source only then.) Hidden holders do not count:
// where the view cannot tell, the chain counts as broken, which only relaxes the checks.
bool World::grounded_view(MemberId m, Version v) {
  for (size_t hops = 0; hops <= owner_.size() + 1; ++hops) {
    const ClientId c = session_of(m);
    if (!c) return false;
    const Actor& a = actor_of(sessions_.at(c));
    const int s = owner_.at(m).second;
    if (!a.alive || a.conn.cid != c || s >= static_cast<int>(a.sh.size())) return false;
    const Shard& t = a.sh[s];
    if (t.m->member() != m || t.m->receiving() != v || !t.job) return false;
    auto l = lease_src_.find(t.m->lease());
    if (l == lease_src_.end()) return false;
    const ShardView* src = reg_view(l->second.src);
    if (!src) return false;
    if (l->second.host) return src->host_reg.count(v) > 0;
    if (src->reg_v == v && !suspect_.count(src->id)) return true;
    m = src->id;
  }
  return false;
}

// After the quiet phase the registry has answered every request it saw from a live session.
void World::liveness() {
  for (const auto& [cid, ss] : sessions_) {
    const Actor& a = actor_of(ss);
    if (!a.alive || a.conn.cid != cid) continue;
    for (const auto& [req, out] : ss.out)
      if (out.delivered && !out.decided)
        return fail("request " + std::to_string(req) + " of replica " + a.replica + " shard " +
                    std::to_string(out.shard) + " (op " + std::to_string(static_cast<int>(out.op)) +
                    ") was never answered");
  }
}

}  // namespace thub::sched::sim::detail
