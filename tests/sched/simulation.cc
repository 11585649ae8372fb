// The simulated world: trainer and rollout replicas (1-4 shards, spot or not, two
// datacenters) that behave like the real client (one outstanding request per operation,
// retries with the same request id, leases held while reading, TransferDone/SourceFailed),
// a lossy network that also duplicates, crashes (disconnect or silent), slow reads and
// registry restarts. Everything runs on one event queue in virtual time with one RNG.
#include "tests/sched/simulation.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include "sched/registry.h"

namespace thub::sched::sim {
namespace {

constexpr Time kMs = 1000;

enum class Op { kOpen, kPublish, kReplicate, kDone, kFailed, kUnpublish, kOffloadDone, kClose };
enum class St { kNone, kEmpty, kHolding, kReceiving };

struct Xfer {
  bool active = false, reading = false, host = false;
  LeaseId lease = 0;
  MemberId src = 0;
  uint64_t src_gen = 0;
  Version v = -1;
};

struct Out {
  Op op;
  Event ev;
  int round = 0;
  bool decided = false;  // the registry answered it once (later answers repeat the cache)
  bool delivered = false;  // the registry has seen it (so it is deferred until decided)
  Status status = Status::kOk;  // the decision, once decided
};

struct Shard {
  MemberId id = 0;
  St st = St::kNone;
  Version v = -1;
  uint64_t gen = 0;          // bumps when new data starts to overwrite the buffers
  Xfer x;
  std::map<RequestId, Out> out;
  std::set<Version> host;    // host copies (client view)
  std::set<Version> host_reg;  // host copies (registry view: OffloadDone accepted)
  Version offload_ordered = -1;  // registry view: Offload ordered, OffloadDone not yet taken
  Version reg_v = -1;        // complete holding in the registry's view
  Version keep = -1;         // re-publish after reconnect
  bool round_done = true;
  bool sending = false;      // a Replicate of this round is scheduled but not yet sent
  bool round_decided = false;  // its Replicate of the current round was answered
};

struct Actor {
  ClientId cid = 0;
  bool trainer = false, spot = false, alive = true, registered = false;
  int retain = 0, n = 1;
  std::string model, replica, dc;
  uint64_t session = 0;
  std::vector<Shard> sh;
  Version held = -1, update_from = -1;
  int round = 0;
  bool busy = false;         // a scheduled next phase is pending
  bool pending_update = false;  // unpublished for THUB_Update: replicate newer than `held`
  // transaction check for the current round
  bool has_first = false;
  bool in_place_round = false;  // an update in place: sources are chosen per shard
  Version first_v = -1;
  int first_src = -1;
  std::vector<std::pair<MemberId, uint64_t>> first_plan;  // source shards and their hidden_ count
};

class World {
 public:
  World(uint64_t seed, int steps) : seed_(seed), steps_(steps), rng_(seed) {
    cfg_.heartbeat_timeout = 300 * kMs;
    cfg_.max_readers_per_source = 1 + static_cast<int>(r(3));
    cfg_.pipeline = r(4) != 0;
    reg_ = std::make_unique<Registry>(cfg_);
  }

  SimResult run() {
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

 private:
  // ---- infrastructure
  uint64_t r(uint64_t n) { return rng_() % n; }
  bool chance(int per_mille) { return static_cast<int>(r(1000)) < per_mille; }
  void at(Time dt, std::function<void()> fn) { q_.emplace(std::make_pair(now_ + dt, seq_++), std::move(fn)); }
  void run_until(Time t) {
    while (!q_.empty() && q_.begin()->first.first <= t && res_.ok) {
      auto it = q_.begin();
      now_ = it->first.first;
      auto fn = std::move(it->second);
      q_.erase(it);
      fn();
    }
    now_ = std::max(now_, t);
  }
  void fail(const std::string& what) {
    if (!res_.ok) return;
    res_.ok = false;
    std::ostringstream os;
    os << "seed " << seed_ << " t=" << now_ << "us: " << what << "\nregistry:\n" << reg_->describe();
    res_.error = os.str();
  }
  void mix(const std::string& s) {
    for (unsigned char c : s) hash_ = (hash_ ^ c) * 1099511628211ull;
  }
  Time lat() { return (1 + static_cast<Time>(r(5))) * kMs; }

  // ---- the network to the registry
  void send(int i, int s, Op op, Event ev, RequestId req) {
    Actor& a = actors_[i];
    a.sh[s].out[req] = Out{op, ev, a.round};
    transmit(i, a.session, ev);
    retry_later(i, s, req, a.session);
  }
  void transmit(int i, uint64_t session, const Event& ev) {
    uint64_t epoch = epoch_;
    if (!quiet_ && chance(10)) {
      ++res_.lost;
      return;  // lost
    }
    at(lat(), [=] { deliver(ev, epoch); });
    if (!quiet_ && chance(10)) at(lat() + 3 * kMs, [=] { deliver(ev, epoch); });  // duplicated
  }
  void retry_later(int i, int s, RequestId req, uint64_t session) {
    at(150 * kMs, [=] {
      Actor& a = actors_[i];
      if (a.session != session || !a.alive) return;
      auto it = a.sh[s].out.find(req);
      if (it == a.sh[s].out.end()) return;
      transmit(i, session, it->second.ev);  // the same request id: the registry de-duplicates
      retry_later(i, s, req, session);
    });
  }
  RequestId next_req() { return ++req_; }

  void deliver(const Event& ev, uint64_t epoch) {
    if (epoch != epoch_ || !res_.ok) return;
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
            // Only its first delivery marks the source failed: the registry ignores a retry
            // while the regrant is deferred, and the source may hold something new by then.
            if (!first_delivery(e.client, e.req)) return;
            held_.erase(e.lease);  // ended at once, even when the regrant is deferred
            if (auto l = lease_src_.find(e.lease); l != lease_src_.end()) {
              const LeaseView& lv = l->second;
              if (lv.host) {  // the registry drops that host copy, the buffers are not touched
                if (Shard* t = reg_view(lv.src)) t->host_reg.erase(lv.v);
              } else {
                hide(lv.src);
                failed_.insert(lv.src);  // the registry now counts its data as lost
              }
            }
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
        if (t.id == u->member && t.st == St::kHolding && t.v == u->newer_than)
          in_place = {i, static_cast<int>(k)};
      }
    }
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

  // Host copies outside the retained window are dropped by the registry (for good).
  bool retained_now(const std::string& model, Version v) const {
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
  void sweep_host_copies() {
    auto sweep = [&](Actor& b) {
      for (Shard& t : b.sh)
        for (auto it = t.host_reg.begin(); it != t.host_reg.end();)
          it = retained_now(b.model, *it) ? std::next(it) : t.host_reg.erase(it);
    };
    for (Actor& b : actors_)
      if (b.registered) sweep(b);
    for (auto& [cid, z] : zombies_) sweep(z);
  }

  // ---- checks from outside the registry: the leases each simulated reader holds
  void mark_delivered(ClientId c, RequestId req) {
    int i = current(c);
    if (i < 0) return;
    for (Shard& t : actors_[i].sh)
      if (auto it = t.out.find(req); it != t.out.end()) it->second.delivered = true;
  }

  std::set<MemberId> members_of(ClientId c) const {
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
  void release_reads(const std::set<MemberId>& readers, Time until) {
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
  std::map<MemberId, int> outside_load(bool with_reservations) {
    for (auto it = held_.begin(); it != held_.end();)
      it = it->second.orphan_until && it->second.orphan_until <= now_ ? held_.erase(it) : std::next(it);
    std::map<MemberId, int> n;
    for (const auto& [l, h] : held_) ++n[h.src];
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

  void check_reader_limit() {
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
  bool complete_holder(const Shard& t, Version v) const {
    return t.id && ((t.reg_v == v && !suspect_.count(t.id)) || t.host_reg.count(v));
  }

  // A request the registry has seen but not answered must not wait while a source that is
  // surely eligible is idle. Checked for absolute versions (a relative spec may resolve to a
  // version this view cannot know) and for regrants; the first shard of a transaction only.
  void check_no_idle_wait() {
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
          std::string who;
          for_each_registered([&](const Actor& b) {
            if (!who.empty() || b.replica == a.replica || b.model != a.model || b.n != a.n) return;
            if (whole_replica) {
              for (const Shard& t : b.sh)
                if (!complete_holder(t, v) || !idle(t)) return;
              who = b.replica;
            } else if (complete_holder(b.sh[s], v) && idle(b.sh[s])) {
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

  // The actor whose current session is client `c` (-1: unknown, or an older session of an
  // actor that has rejoined since: what happens to that one must not touch the new one).
  int current(ClientId c) const {
    auto it = by_client_.find(c);
    return it == by_client_.end() || actors_[it->second].cid != c ? -1 : it->second;
  }

  // Is (client, req) a request of a current session that the registry has not answered yet?
  // Only then can its delivery change the registry's state.
  bool undecided(ClientId c, RequestId req) const {
    int i = current(c);
    if (i < 0) return false;
    for (const Shard& s : actors_[i].sh)
      if (auto it = s.out.find(req); it != s.out.end()) return !it->second.decided;
    return false;
  }

  // Is this the first time the registry sees (client, req), unanswered? A retry of a
  // request whose answer is deferred changes nothing in the registry.
  // A session the registry has removed (Disconnect, Drop) gets "unknown client" instead.
  bool first_delivery(ClientId c, RequestId req) const {
    int i = current(c);
    if (i < 0 || !actors_[i].registered) return false;
    for (const Shard& s : actors_[i].sh)
      if (auto it = s.out.find(req); it != s.out.end())
        return !it->second.decided && !it->second.delivered;
    return false;
  }

  // The registry-view record of member m: in its actor's current session, or in the zombie
  // of an older one.
  Shard* reg_view(MemberId m) {
    if (auto o = owner_.find(m); o != owner_.end()) {
      Shard& t = actors_[o->second.first].sh[o->second.second];
      if (t.id == m) return &t;
    }
    for (auto& [cid, z] : zombies_)
      for (Shard& t : z.sh)
        if (t.id == m) return &t;
    return nullptr;
  }

  void hide(MemberId m) {
    if (std::getenv("THUB_SIM_TRACE"))
      std::fprintf(stderr, "t=%lld member %llu hidden in the view\n", static_cast<long long>(now_),
                   static_cast<unsigned long long>(m));
    suspect_.insert(m);
    ++hidden_[m];
  }

  void forget_client(ClientId c) {
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

  // ---- what the registry decided, checked at the moment it decides
  void act(const Action& action) {
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

  // A deferred request of an old session (its actor crashed and rejoined) may still be
  // decided before the registry removes that session: nobody reads with a grant, but the
  // registry counts the lease (as an orphan after a Drop) and a restored holding.
  void zombie_decided(Actor& z, const Reply& rep) {
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
      }
      if (o->second.op == Op::kReplicate && rep.detail.find("still holding version") != std::string::npos) {
        t.reg_v = t.v;
        suspect_.erase(t.id);
      }
      if (std::getenv("THUB_SIM_TRACE"))
        std::fprintf(stderr, "t=%lld old session %llu of %s/%llu req %llu op%d -> %d v%lld src %llu\n",
                     static_cast<long long>(now_), static_cast<unsigned long long>(rep.client),
                     z.replica.c_str(), static_cast<unsigned long long>(t.id),
                     static_cast<unsigned long long>(rep.req), static_cast<int>(o->second.op),
                     static_cast<int>(rep.status), static_cast<long long>(rep.version),
                     static_cast<unsigned long long>(rep.source));
    }
  }

  void on_decided(int i, int s, const Out& out, const Reply& rep) {
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
      failed_.erase(sh.id);
    }
    if (out.op == Op::kDone && rep.status == Status::kOk) {
      sh.reg_v = rep.version;
      suspect_.erase(sh.id);
      failed_.erase(sh.id);
    }
    if (out.op == Op::kOffloadDone && rep.status == Status::kOk) {
      sh.host_reg.insert(std::get<OffloadDone>(out.ev).version);
      sh.offload_ordered = -1;
    }
    if ((out.op == Op::kReplicate || out.op == Op::kFailed) && rep.status == Status::kOk) {
      ++res_.grants;
      lease_src_[rep.lease] =
          LeaseView{rep.source, rep.version, rep.source_descriptor.rfind("host-", 0) == 0};
      held_[rep.lease] = Held{rep.source, sh.id, 0};
      if (out.op == Op::kReplicate && out.round == a.round) check_transaction(i, s, rep);
    }
    if (out.op == Op::kUnpublish && rep.status == Status::kOk) acks_.emplace_back(i, s);
    if (out.op == Op::kReplicate && rep.status != Status::kOk &&
        rep.detail.find("still holding version") != std::string::npos) {
      sh.reg_v = sh.v;  // an update in place that failed after the drain: h is served again
      suspect_.erase(sh.id);
    }
    if (out.op == Op::kReplicate && rep.status == Status::kOk)
      for (const Actor& b : actors_)  // the grantee's buffers are overwritten from now on
        for (const Shard& t : b.sh)
          if (t.x.reading && !t.x.host && t.x.src == sh.id)
            return fail("member " + std::to_string(sh.id) + " granted a new version while " +
                        b.replica + " still reads it (lease " + std::to_string(t.x.lease) + ")");
  }

  void check_transaction(int i, int s, const Reply& rep) {
    Actor& a = actors_[i];
    auto own = owner_.find(rep.source);
    int src = own == owner_.end() ? -1 : own->second.first;
    if (!a.has_first) {
      a.has_first = true;
      a.first_v = rep.version;
      a.first_src = src;
      a.first_plan.clear();
      if (src >= 0)
        for (const Shard& t : actors_[src].sh) a.first_plan.emplace_back(t.id, hidden_[t.id]);
      return;
    }
    if (rep.version != a.first_v)
      return fail("shards of replica " + a.replica + " got versions " + std::to_string(a.first_v) +
                  " and " + std::to_string(rep.version));
    if (src != a.first_src && a.first_src >= 0 && !a.in_place_round) {
      const Actor& fs = actors_[a.first_src];
      const Shard& ps = fs.sh[s];
      bool serves = ps.reg_v == a.first_v ||
                    (ps.st == St::kReceiving && ps.v == a.first_v && ps.x.active);
      // the planned shard served all along (a member unpublished and re-filled meanwhile
      // counts as vanished: the registry rightly chose anew)
      bool same = s < static_cast<int>(a.first_plan.size()) && a.first_plan[s].first == ps.id &&
                  a.first_plan[s].second == hidden_[ps.id];
      if (fs.registered && ps.id && !suspect_.count(ps.id) && serves && same)
        fail("shards of replica " + a.replica + " got different source replicas " + fs.replica +
             " and " + (src >= 0 ? actors_[src].replica : "?"));
    }
  }

  // Every session the registry still knows: current ones, and those of actors that crashed
  // silently and came back as a new client before the registry removed the old one.
  template <class F>
  void for_each_registered(F fn) const {
    for (const Actor& b : actors_)
      if (b.registered) fn(b);
    for (const auto& [cid, b] : zombies_) fn(b);
  }

  void check_unpublish_ack(int i, int s) {
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

  // ---- the client side
  void reply(int i, uint64_t session, const Reply& rep) {
    Actor& a = actors_[i];
    if (a.session != session || !a.alive) return;
    int s = -1;
    for (size_t k = 0; k < a.sh.size(); ++k)
      if (a.sh[k].out.count(rep.req)) s = static_cast<int>(k);
    if (s < 0) return;  // a duplicate answer
    Shard& sh = a.sh[s];
    Out out = sh.out.at(rep.req);
    sh.out.erase(rep.req);
    bool ok = rep.status == Status::kOk;
    if (rep.status == Status::kState && rep.detail.rfind("unknown client", 0) == 0) {
      ++a.session;  // our session is gone (e.g. the Connect went to a registry that died)
      at(lat(), [=] { rejoin(i); });
      return;
    }
    switch (out.op) {
      case Op::kOpen:
        if (ok) {
          sh.id = rep.member;
          sh.st = St::kEmpty;
          if (sh.keep >= 0) {
            publish(i, s, sh.keep);
            sh.keep = -1;
          }
        } else {
          at(50 * kMs, [=] {  // a stale member of a crashed session: wait for its removal
            if (actors_[i].session == session && actors_[i].alive) open(i, s);
          });
        }
        break;
      case Op::kPublish:
        if (ok) {
          sh.st = St::kHolding;
          sh.v = std::get<Publish>(out.ev).version;
        } else if (rep.status != Status::kLayout) {
          fail("publish refused: " + rep.detail);
        }
        break;
      case Op::kReplicate:
      case Op::kFailed:
        if (ok) {
          start_transfer(i, s, rep);
        } else if (out.op == Op::kFailed || rep.status == Status::kTransport) {
          cleanup(i, s);
        } else {
          sh.round_done = true;
          if (rep.status == Status::kNotUpdated && a.update_from >= 0) publish(i, s, a.update_from);
        }
        break;
      case Op::kDone:
        if (ok) {
          sh.st = St::kHolding;
          sh.v = rep.version;
          sh.round_done = true;
        } else {
          cleanup(i, s);
        }
        break;
      case Op::kUnpublish:
        sh.st = St::kEmpty;
        sh.round_done = true;
        break;
      case Op::kOffloadDone:
      case Op::kClose:
        break;
    }
    progress(i);
  }

  // After a failed transfer the buffers hold garbage: unpublish (drain chained readers).
  void cleanup(int i, int s) {
    Actor& a = actors_[i];
    a.sh[s].st = St::kReceiving;
    a.sh[s].x = Xfer{};
    RequestId q = next_req();
    send(i, s, Op::kUnpublish, Unpublish{a.cid, q, a.sh[s].id}, q);
  }

  void start_transfer(int i, int s, const Reply& rep) {
    Actor& a = actors_[i];
    Shard& sh = a.sh[s];
    ++sh.gen;
    sh.st = St::kReceiving;
    sh.v = rep.version;
    sh.x = Xfer{true, true, rep.source_descriptor.rfind("host-", 0) == 0, rep.lease, rep.source, 0,
                rep.version};
    auto own = owner_.find(rep.source);
    sh.x.src_gen = own == owner_.end() ? ~0ull : actors_[own->second.first].sh[own->second.second].gen;
    Time d = (1 + static_cast<Time>(r(30))) * kMs;
    if (!quiet_ && chance(50)) d += (200 + static_cast<Time>(r(600))) * kMs;  // a slow read
    uint64_t session = a.session;
    LeaseId lease = rep.lease;
    at(d, [=] { finish_transfer(i, s, session, lease); });
  }

  // Is the source still good, and how far is it? 1: complete, 0: partial (wait), -1: failed
  int source_state(const Xfer& x) {
    auto own = owner_.find(x.src);
    if (own == owner_.end()) return -1;
    const Actor& b = actors_[own->second.first];
    const Shard& t = b.sh[own->second.second];
    if (!b.alive || t.id != x.src) return -1;
    if (x.host) return t.host.count(x.v) ? 1 : -1;
    if (t.gen != x.src_gen) return -1;
    if (t.st == St::kHolding && t.v == x.v) return 1;
    if (t.st == St::kReceiving && t.x.active && t.v == x.v) return 0;
    return -1;
  }

  void finish_transfer(int i, int s, uint64_t session, LeaseId lease) {
    Actor& a = actors_[i];
    if (a.session != session || !a.alive) return;
    Shard& sh = a.sh[s];
    if (!sh.x.active || sh.x.lease != lease) return;
    int st = source_state(sh.x);
    if (st == 0) {
      at(5 * kMs, [=] { finish_transfer(i, s, session, lease); });  // chained on a partial
      return;
    }
    sh.x.reading = false;
    sh.x.active = false;
    RequestId q = next_req();
    if (st == 1)
      send(i, s, Op::kDone, TransferDone{a.cid, q, sh.id, lease}, q);
    else
      send(i, s, Op::kFailed, SourceFailed{a.cid, q, sh.id, lease, r(100)}, q);
  }

  void publish(int i, int s, Version v) {
    Actor& a = actors_[i];
    RequestId q = next_req();
    a.sh[s].v = v;
    send(i, s, Op::kPublish,
         Publish{a.cid, q, a.sh[s].id, v, 7 + static_cast<uint64_t>(s),
                 "live-" + std::to_string(a.sh[s].id)},
         q);
  }

  void open(int i, int s) {
    Actor& a = actors_[i];
    RequestId q = next_req();
    send(i, s, Op::kOpen, Open{a.cid, q, a.model, a.replica, s, a.n, a.retain, a.spot}, q);
  }

  bool idle(const Actor& a) const {
    for (const Shard& s : a.sh)
      if (!s.out.empty() || s.x.active || s.st == St::kNone || s.keep >= 0 || s.sending)
        return false;
    return true;
  }

  // The replica's loop: when nothing is outstanding, decide what to do next.
  void progress(int i) {
    Actor& a = actors_[i];
    if (!a.alive || a.busy || !idle(a) || quiet_) return;
    a.busy = true;
    uint64_t session = a.session;
    at((5 + static_cast<Time>(r(100))) * kMs, [=] {
      Actor& b = actors_[i];
      if (b.session != session || !b.alive) return;
      b.busy = false;
      if (!idle(b) || quiet_) return;
      next_phase(i);
    });
  }

  void next_phase(int i) {
    Actor& a = actors_[i];
    bool any_hold = false, all_hold = true;
    for (const Shard& s : a.sh) {
      any_hold = any_hold || s.st == St::kHolding;
      all_hold = all_hold && s.st == St::kHolding && s.v == a.sh[0].v;
    }
    a.update_from = -1;
    if (!a.trainer && all_hold && chance(300)) return update_in_place(i);
    if (any_hold) {
      bool update = !a.trainer && all_hold && chance(500);
      a.held = all_hold ? a.sh[0].v : -1;
      for (int s = 0; s < a.n; ++s) {
        if (a.sh[s].st != St::kHolding) continue;
        RequestId q = next_req();
        send(i, s, Op::kUnpublish, Unpublish{a.cid, q, a.sh[s].id}, q);
      }
      if (update) a.update_from = a.held;  // after the acks: Replicate(newer_than = held)
      a.pending_update = update;
      return;
    }
    if (a.trainer) {
      Version v = next_version_[a.model]++;
      for (int s = 0; s < a.n; ++s) publish(i, s, v);
      return;
    }
    ++a.round;
    a.has_first = false;
    a.in_place_round = false;
    for (Shard& t : a.sh) t.round_decided = false;
    Version spec = -1, newer = -1;
    if (a.pending_update) {
      newer = a.held;
      a.update_from = a.held;
    } else if (chance(200)) {
      spec = -2;
    } else if (chance(200) && next_version_[a.model] > 0) {
      spec = std::max<Version>(0, next_version_[a.model] - 1 - static_cast<Version>(r(3)));
    }
    a.pending_update = false;
    for (int s = 0; s < a.n; ++s) {
      uint64_t session = a.session;
      a.sh[s].sending = true;  // not idle: the next round must not start before this one
      at(static_cast<Time>(r(20)) * kMs, [=] {
        Actor& b = actors_[i];
        if (b.session != session || !b.alive) return;
        b.sh[s].sending = false;
        RequestId q = next_req();
        b.sh[s].round_done = false;
        send(i, s, Op::kReplicate,
             Replicate{b.cid, q, b.sh[s].id, spec, newer, 7 + static_cast<uint64_t>(s),
                       "live-" + std::to_string(b.sh[s].id)},
             q);
      });
    }
  }

  // THUB_Update in place: every shard asks for something newer than what it holds, without
  // unpublishing; an error leaves the holding as it is.
  void update_in_place(int i) {
    Actor& a = actors_[i];
    ++a.round;
    a.has_first = false;
    a.in_place_round = true;
    Version held = a.sh[0].v;
    Version spec = chance(200) ? -2 : -1;
    for (int s = 0; s < a.n; ++s) {
      a.sh[s].round_decided = false;
      a.sh[s].sending = true;
      uint64_t session = a.session;
      at(static_cast<Time>(r(20)) * kMs, [=] {
        Actor& b = actors_[i];
        if (b.session != session || !b.alive) return;
        b.sh[s].sending = false;
        RequestId q = next_req();
        b.sh[s].round_done = false;
        send(i, s, Op::kReplicate,
             Replicate{b.cid, q, b.sh[s].id, spec, held, 7 + static_cast<uint64_t>(s),
                       "live-" + std::to_string(b.sh[s].id)},
             q);
      });
    }
  }

  // ---- joining, crashing, restarting
  void add_actor() {
    Actor a;
    int k = static_cast<int>(actors_.size());
    a.trainer = k < 2 || chance(150);
    a.model = "m" + std::to_string(k % 2);
    a.replica = (a.trainer ? "train-" : "roll-") + std::to_string(k);
    a.dc = chance(300) ? "dc1" : "dc0";
    a.n = 1;  // replicas of one model must agree on num_shards: per-model choice
    a.n = model_shards(a.model);
    a.spot = !a.trainer && chance(400);
    a.retain = a.trainer ? static_cast<int>(r(3)) : 0;
    a.sh.resize(a.n);
    actors_.push_back(std::move(a));
  }
  int model_shards(const std::string& model) {
    auto it = shards_.find(model);
    if (it != shards_.end()) return it->second;
    int n = chance(500) ? 1 : 2 + static_cast<int>(r(3));
    shards_[model] = n;
    return n;
  }

  void join(int i, bool keep) {
    Actor& a = actors_[i];
    if (a.registered) zombies_[a.cid] = a;  // until the registry removes the old session
    a.cid = next_cid_++;
    by_client_[a.cid] = i;
    if (std::getenv("THUB_SIM_TRACE"))
      std::fprintf(stderr, "t=%lld %s joins as client %llu%s\n", static_cast<long long>(now_),
                   a.replica.c_str(), static_cast<unsigned long long>(a.cid), keep ? " (rejoin)" : "");
    a.alive = true;
    ++a.session;
    a.busy = false;
    a.registered = false;
    for (Shard& s : a.sh) {
      s.keep = keep && s.st == St::kHolding ? s.v : -1;
      if (s.st == St::kReceiving) ++s.gen;  // an aborted transfer left garbage
      s.id = 0;
      s.st = St::kNone;
      s.x = Xfer{};
      s.out.clear();
      s.host.clear();
      s.host_reg.clear();
      s.offload_ordered = -1;
      s.reg_v = -1;
      s.round_done = true;
      s.sending = false;
    }
    uint64_t epoch = epoch_;
    Event c = Connect{a.cid, a.dc};
    at(0, [=] { deliver(c, epoch); });  // a connection: Connect precedes every request
    heartbeat(i, a.session);
    for (int s = 0; s < a.n; ++s) open(i, s);
  }
  void rejoin(int i) { join(i, true); }

  void heartbeat(int i, uint64_t session) {
    Actor& a = actors_[i];
    if (a.session != session || !a.alive) return;
    transmit(i, session, Heartbeat{a.cid});
    at(100 * kMs, [=] { heartbeat(i, session); });
  }

  void crash(int i) {
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

  void restart_registry() {
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

  void chaos() {
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

  void liveness() {
    for (const Actor& a : actors_) {
      if (!a.alive) continue;
      for (size_t s = 0; s < a.sh.size(); ++s)
        for (const auto& [req, out] : a.sh[s].out)
          return fail("request " + std::to_string(req) + " of replica " + a.replica + " shard " +
                      std::to_string(s) + " (op " + std::to_string(static_cast<int>(out.op)) +
                      ") was never answered");
    }
  }

  uint64_t seed_;
  int steps_;
  std::mt19937_64 rng_;
  Config cfg_;
  std::unique_ptr<Registry> reg_;
  uint64_t epoch_ = 0;
  Time now_ = 0;
  uint64_t seq_ = 0;
  RequestId req_ = 0;
  bool quiet_ = false;
  std::map<std::pair<Time, uint64_t>, std::function<void()>> q_;
  std::vector<Actor> actors_;
  std::map<ClientId, Actor> zombies_;  // old sessions the registry has not removed yet
  std::map<ClientId, int> by_client_;
  ClientId next_cid_ = 1;
  std::map<MemberId, std::pair<int, int>> owner_;
  std::map<std::string, std::set<Version>> published_;
  std::map<std::string, Version> next_version_;
  std::map<std::string, int> shards_;
  std::set<MemberId> suspect_;
  std::map<MemberId, uint64_t> hidden_;  // how often a member was hidden (never reset)
  std::set<MemberId> failed_;  // named by a delivered SourceFailed
  struct LeaseView {
    MemberId src = 0;
    Version v = -1;
    bool host = false;  // reads a host copy
  };
  std::map<LeaseId, LeaseView> lease_src_;
  struct Held {             // a lease as the clients see it: granted, not yet reported
    MemberId src = 0, reader = 0;
    Time orphan_until = 0;  // its reader was dropped for silence: counted until then
  };
  std::map<LeaseId, Held> held_;
  std::vector<std::pair<int, int>> acks_;  // unpublish acks of the current step
  std::map<std::string, int> retain_before_;  // per model, before the current step
  SimResult res_;
  uint64_t hash_ = 1469598103934665603ull;
};

}  // namespace

SimResult run_simulation(uint64_t seed, int steps) { return World(seed, steps).run(); }

}  // namespace thub::sched::sim
