// The simulated world: one event queue in virtual time with one RNG, the lossy network to
// the registry (loss, duplicates, retries with the same request id), the registry's actions
// applied to the world, and the faults (crashes, registry restarts). See simulation_world.h.
#include "tests/sched/simulation_world.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace thub::sched::sim::detail {

World::World(uint64_t seed, int steps) : seed_(seed), steps_(steps), rng_(seed) {
  cfg_.heartbeat_timeout = 300 * kMs;
  cfg_.max_readers_per_source = 1 + static_cast<int>(r(3));
  cfg_.pipeline = r(4) != 0;
  cfg_.failure_reports = 1 + static_cast<int>(r(3));
  reg_ = std::make_unique<Registry>(cfg_);
}

SimResult World::run() {
  int n = 3 + static_cast<int>(r(6));
  for (int i = 0; i < n; ++i) add_actor();
  for (size_t i = 0; i < actors_.size(); ++i) join(static_cast<int>(i), false);
  for (int s = 0; s < steps_ && res_.ok; ++s) {
    at(10 * kMs, [] {});
    run_until(now_ + 10 * kMs);
    chaos();
  }
  quiet_ = true;
  Time end = now_ + 20 * cfg_.heartbeat_timeout;
  run_until(end);
  if (res_.ok) liveness();
  res_.trace_hash = hash_;
  return res_;
}

void World::run_until(Time t) {
  while (!q_.empty() && q_.begin()->first.first <= t && res_.ok) {
    auto it = q_.begin();
    now_ = it->first.first;
    auto fn = std::move(it->second);
    q_.erase(it);
    fn();
  }
  now_ = std::max(now_, t);
}

void World::fail(const std::string& what) {
  if (!res_.ok) return;
  res_.ok = false;
  std::ostringstream os;
  os << "seed " << seed_ << " t=" << now_ << "us: " << what << "\nregistry:\n" << reg_->describe();
  res_.error = os.str();
}

void World::send(int i, int s, Op op, Event ev, RequestId req) {
  Actor& a = actors_[i];
  a.sh[s].out[req] = Out{op, ev, a.round};
  transmit(i, a.session, ev);
  retry_later(i, s, req, a.session);
}

void World::transmit(int i, uint64_t session, const Event& ev) {
  uint64_t epoch = epoch_;
  if (!quiet_ && chance(10)) {
    ++res_.lost;
    return;  // lost
  }
  at(lat(), [=] { deliver(ev, epoch); });
  if (!quiet_ && chance(10)) at(lat() + 3 * kMs, [=] { deliver(ev, epoch); });  // duplicated
}

void World::retry_later(int i, int s, RequestId req, uint64_t session) {
  at(150 * kMs, [=] {
    Actor& a = actors_[i];
    if (a.session != session || !a.alive) return;
    auto it = a.sh[s].out.find(req);
    if (it == a.sh[s].out.end()) return;
    transmit(i, session, it->second.ev);  // the same request id: the registry de-duplicates
    retry_later(i, s, req, session);
  });
}

void World::deliver(const Event& ev, uint64_t epoch) {
  if (epoch != epoch_ || !res_.ok) return;
  judge_silent_view(ev);
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, Unpublish> || std::is_same_v<E, Close>) {
          // a late duplicate (the cache answers) or a retry of a deferred one (ignored)
          if (!first_delivery(e.client, e.req)) return;
          mark_delivered(e.client, e.req);
          // a receiving member's own read is cancelled, unless a reader reported the member
          // failed (then it drains, and its own read goes on until it reports)
          if (!failed_.count(e.member)) release_reads({e.member}, 0);
          hide(e.member);
          if (auto o = owner_.find(e.member); o != owner_.end())
            actors_[o->second.first].sh[o->second.second].reg_v = -1;
        } else if constexpr (std::is_same_v<E, TransferDone>) {
          if (undecided(e.client, e.req)) held_.erase(e.lease);
        } else if constexpr (std::is_same_v<E, SourceFailed>) {
          // Only its first delivery is a report: the registry ignores a retry while the
          // regrant is deferred, and the source may hold something new by then.
          if (!first_delivery(e.client, e.req)) return;
          held_.erase(e.lease);  // ended at once, even when the regrant is deferred
          reported(e);
        } else if constexpr (std::is_same_v<E, Disconnect>) {
          release_reads(members_of(e.client), 0);
          forget_client(e.client);
        }
        if constexpr (std::is_same_v<E, Replicate> || std::is_same_v<E, SourceFailed>)
          mark_delivered(e.client, e.req);
      },
      ev);
  // An update in place hides the member's holding unless it is answered with an error
  // at once (then the holding is untouched).
  std::pair<int, int> in_place{-1, -1};
  if (auto* u = std::get_if<Replicate>(&ev); u && u->newer_than >= 0 && undecided(u->client, u->req)) {
    int i = current(u->client);
    for (size_t k = 0; k < actors_[i].sh.size(); ++k) {
      const Shard& t = actors_[i].sh[k];
      // (the registry's view: a crashed client's update still arrives, its buffers hold h)
      if (t.id == u->member && ((t.st == St::kHolding && t.v == u->newer_than) || t.reg_v == u->newer_than))
        in_place = {i, static_cast<int>(k)};
    }
  }
  updating_now_ = in_place.first >= 0 ? actors_[in_place.first].sh[in_place.second].id : 0;
  mix("E" + std::to_string(ev.index()) + "@" + std::to_string(now_));
  // `retain` before the step: an ack decided at a drain's end (deadlines and orphans come
  // first) must not be judged by a member that the same step's Open adds afterwards.
  retain_before_.clear();
  for_each_registered([&](const Actor& b) {
    retain_before_[b.model] = std::max(retain_before_[b.model], b.retain);
  });
  std::vector<Action> acts = reg_->step(ev, now_);
  ++res_.events;
  std::string inv = reg_->check_invariants();
  if (!inv.empty()) return fail("registry invariant: " + inv);
  // Acks are checked against the view after the whole step: one event may both complete
  // another holder (a TransferDone) and, by ending its lease, acknowledge an unpublish.
  acks_.clear();
  for (const Action& a : acts) act(a);
  if (in_place.first >= 0) {
    Shard& t = actors_[in_place.first].sh[in_place.second];
    const auto& u = std::get<Replicate>(ev);
    auto it = t.out.find(u.req);
    if (it != t.out.end()) it->second.in_place = true;
    if (it == t.out.end() || !it->second.decided || it->second.status == Status::kOk) {
      hide(t.id);
      t.reg_v = -1;
    }
  }
  for (auto [i, s] : acks_) check_unpublish_ack(i, s);
  sweep_host_copies();
  check_reader_limit();
  check_no_idle_wait();
}

void World::act(const Action& action) {
  if (auto* d = std::get_if<Drop>(&action)) {
    mix("D" + std::to_string(d->client));
    if (std::getenv("THUB_SIM_TRACE"))
      std::fprintf(stderr, "t=%lld drop client %llu\n", static_cast<long long>(now_),
                   static_cast<unsigned long long>(d->client));
    int i = current(d->client);
    release_reads(members_of(d->client), now_ + cfg_.heartbeat_timeout);  // orphans
    forget_client(d->client);
    if (i < 0) return;
    uint64_t session = actors_[i].session;
    at(lat(), [=] {
      if (actors_[i].session == session && actors_[i].alive) rejoin(i);
    });
    return;
  }
  if (auto* o = std::get_if<Offload>(&action)) {
    mix("O" + std::to_string(o->member) + "v" + std::to_string(o->version));
    ++res_.offloads;
    int i = current(o->client);
    if (i < 0) return;
    auto own = owner_.find(o->member);
    if (own == owner_.end()) return;
    int s = own->second.second;
    actors_[i].sh[s].offload_ordered = o->version;
    uint64_t session = actors_[i].session;
    Offload off = *o;
    at(lat() + static_cast<Time>(r(20)) * kMs, [=] {  // the client copies to host memory
      Actor& a = actors_[i];
      if (a.session != session || !a.alive) return;
      a.sh[s].host.insert(off.version);
      RequestId q = next_req();
      send(i, s, Op::kOffloadDone,
           OffloadDone{a.cid, q, off.member, off.version,
                       "host-" + std::to_string(off.member) + "-" + std::to_string(off.version)},
           q);
    });
    return;
  }
  if (auto* d = std::get_if<Discard>(&action)) {
    mix("X" + std::to_string(d->member) + "v" + std::to_string(d->version));
    for (const Actor& a : actors_)
      for (const Shard& s : a.sh)
        if (s.x.reading && s.x.host && s.x.src == d->member && s.x.v == d->version)
          fail("host copy discarded while read");
    if (Shard* t = reg_view(d->member)) {
      t->host_reg.erase(d->version);
      t->host.erase(d->version);
    }
    return;
  }
  const Reply& rep = std::get<Reply>(action);
  {
    std::ostringstream os;
    os << "R" << rep.client << "/" << rep.req << ":" << static_cast<int>(rep.status) << ","
       << rep.member << "," << rep.version << "," << rep.lease << "," << rep.source << ","
       << rep.source_partial;
    mix(os.str());
  }
  if (auto z = zombies_.find(rep.client); z != zombies_.end()) zombie_decided(z->second, rep);
  auto it = by_client_.find(rep.client);
  if (it == by_client_.end()) return;
  int i = it->second;
  Actor& a = actors_[i];
  int s = -1;
  for (size_t k = 0; k < a.sh.size(); ++k)
    if (a.sh[k].out.count(rep.req)) s = static_cast<int>(k);
  if (s >= 0 && !a.sh[s].out.at(rep.req).decided) {
    // Only the first answer is a decision; a retry gets the cached reply, which must not
    // be checked again against a world that has moved on.
    a.sh[s].out.at(rep.req).decided = true;
    a.sh[s].out.at(rep.req).status = rep.status;
    on_decided(i, s, a.sh[s].out.at(rep.req), rep);
  }
  uint64_t session = a.session;
  if (!quiet_ && chance(10)) {
    ++res_.lost;
    return;  // the reply is lost: the client retries
  }
  at(lat(), [=] { reply(i, session, rep); });
}

void World::crash(int i) {
  Actor& a = actors_[i];
  if (std::getenv("THUB_SIM_TRACE"))
    std::fprintf(stderr, "t=%lld %s (client %llu) crashes\n", static_cast<long long>(now_),
                 a.replica.c_str(), static_cast<unsigned long long>(a.cid));
  ++res_.crashes;
  a.alive = false;
  ++a.session;
  for (Shard& s : a.sh) {
    ++s.gen;
    s.x = Xfer{};
    s.st = St::kNone;
  }
  if (chance(500)) {  // the connection closes; otherwise silence until the deadline
    uint64_t epoch = epoch_;
    Event d = Disconnect{a.cid};
    at(lat(), [=] { deliver(d, epoch); });
  }
}

void World::restart_registry() {
  ++res_.restarts;
  mix("RESTART");
  if (std::getenv("THUB_SIM_TRACE"))
    std::fprintf(stderr, "t=%lld registry restarts\n", static_cast<long long>(now_));
  reg_ = std::make_unique<Registry>(cfg_);
  ++epoch_;
  owner_.clear();
  zombies_.clear();
  published_.clear();
  suspect_.clear();
  failed_.clear();
  failed_host_.clear();
  last_seen_.clear();
  reports_.clear();
  shunned_.clear();
  lease_src_.clear();
  held_.clear();
  for (size_t i = 0; i < actors_.size(); ++i) {
    Actor& a = actors_[i];
    a.registered = false;
    if (!a.alive) continue;
    ++a.session;  // stale replies and timers die with the old connection
    for (Shard& s : a.sh) s.x = Xfer{};
    int k = static_cast<int>(i);
    at(lat(), [=] { rejoin(k); });
  }
}

void World::chaos() {
  if (chance(5)) return restart_registry();
  int i = static_cast<int>(r(actors_.size()));
  Actor& a = actors_[i];
  if (a.alive && chance(15)) return crash(i);
  if (!a.alive && chance(100)) return join(i, false);
  if (actors_.size() < 12 && chance(5)) {
    add_actor();
    join(static_cast<int>(actors_.size()) - 1, false);
  }
  // kick replicas whose loop is idle (e.g. after a reconnect)
  for (size_t k = 0; k < actors_.size(); ++k) progress(static_cast<int>(k));
}

}  // namespace thub::sched::sim::detail

namespace thub::sched::sim {

SimResult run_simulation(uint64_t seed, int steps) { return detail::World(seed, steps).run(); }

}  // namespace thub::sched::sim
