// The simulated client: a replica's loop (publish, unpublish, replicate, update in place),
// its answers to the registry's replies, its transfers (chained on partial sources, slow
// reads), and joining and heartbeats. Behaves like the real client: one outstanding request
// per operation, leases held while reading, TransferDone/SourceFailed.
#include "tests/sched/simulation_world.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace thub::sched::sim::detail {

void World::reply(int i, uint64_t session, const Reply& rep) {
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
      } else if (reask_lost(i, s, out.op, rep)) {
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
      if (sh.reask_after_unpublish) {
        sh.reask_after_unpublish = false;
        reask(i, s, -1);
      }
      break;
    case Op::kOffloadDone:
    case Op::kClose:
      break;
  }
  progress(i);
}

// The real client's rule (Model::transfer): a single-shard request for latest or latest-k
// whose version is lost is asked once more. Lost during the transfer: the partial buffers
// are given up first (Unpublish), then the spec is resolved again, newer_than -1 (nothing is
// held any more). Lost at the answer (an update in place: h is still held): asked again as
// it was.
bool World::reask_lost(int i, int s, Op op, const Reply& rep) {
  Actor& a = actors_[i];
  Shard& sh = a.sh[s];
  if (rep.status != Status::kVersionLost || a.n != 1 || sh.spec >= 0 || sh.reasked) return false;
  sh.reasked = true;
  ++res_.moved_on;
  if (op == Op::kFailed) {
    sh.reask_after_unpublish = true;
    cleanup(i, s);
  } else {
    reask(i, s, sh.st == St::kHolding ? sh.v : -1);
  }
  return true;
}

void World::reask(int i, int s, Version newer_than) {
  Actor& a = actors_[i];
  ++a.round;  // a new resolution: its version may differ from the lost one
  a.has_first = false;
  a.in_place_round = newer_than >= 0;
  a.sh[s].round_decided = false;
  a.sh[s].round_done = false;
  RequestId q = next_req();
  send(i, s, Op::kReplicate,
       Replicate{a.cid, q, a.sh[s].id, a.sh[s].spec, newer_than, 7 + static_cast<uint64_t>(s),
                 "live-" + std::to_string(a.sh[s].id)},
       q);
}

// After a failed transfer the buffers hold garbage: unpublish (drain chained readers).
void World::cleanup(int i, int s) {
  Actor& a = actors_[i];
  a.sh[s].st = St::kReceiving;
  a.sh[s].x = Xfer{};
  RequestId q = next_req();
  send(i, s, Op::kUnpublish, Unpublish{a.cid, q, a.sh[s].id}, q);
}

void World::start_transfer(int i, int s, const Reply& rep) {
  Actor& a = actors_[i];
  Shard& sh = a.sh[s];
  ++sh.gen;
  sh.st = St::kReceiving;
  sh.v = rep.version;
  sh.x = Xfer{true, true, rep.source_descriptor.rfind("host-", 0) == 0, rep.lease, rep.source, 0,
              rep.version, now_};
  auto own = owner_.find(rep.source);
  sh.x.src_gen = own == owner_.end() ? ~0ull : actors_[own->second.first].sh[own->second.second].gen;
  Time d = (1 + static_cast<Time>(r(30))) * kMs;
  if (!quiet_ && chance(50)) d += (200 + static_cast<Time>(r(600))) * kMs;  // a slow read
  uint64_t session = a.session;
  LeaseId lease = rep.lease;
  at(d, [=] { finish_transfer(i, s, session, lease); });
}

// Is the source still good, and how far is it? 1: complete, 0: partial (wait), -1: failed
int World::source_state(const Xfer& x) {
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

void World::finish_transfer(int i, int s, uint64_t session, LeaseId lease) {
  Actor& a = actors_[i];
  if (a.session != session || !a.alive) return;
  Shard& sh = a.sh[s];
  if (!sh.x.active || sh.x.lease != lease) return;
  int st = source_state(sh.x);
  // Reader-side failures of a healthy source: the reader gives up on a partial source that
  // has kept it waiting (its stall watchdog), or its own link breaks (2% of reads).
  if (st == 0 && now_ - sh.x.started > 600 * kMs) st = -1;
  if (st == 1 && !quiet_ && chance(20)) st = -1;
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

void World::publish(int i, int s, Version v) {
  Actor& a = actors_[i];
  RequestId q = next_req();
  a.sh[s].v = v;
  send(i, s, Op::kPublish,
       Publish{a.cid, q, a.sh[s].id, v, 7 + static_cast<uint64_t>(s),
               "live-" + std::to_string(a.sh[s].id)},
       q);
}

void World::open(int i, int s) {
  Actor& a = actors_[i];
  RequestId q = next_req();
  send(i, s, Op::kOpen, Open{a.cid, q, a.model, a.replica, s, a.n, a.retain, a.spot}, q);
}

bool World::idle(const Actor& a) const {
  for (const Shard& s : a.sh)
    if (!s.out.empty() || s.x.active || s.st == St::kNone || s.keep >= 0 || s.sending)
      return false;
  return true;
}

// The replica's loop: when nothing is outstanding, decide what to do next.
void World::progress(int i) {
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

void World::next_phase(int i) {
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
    a.sh[s].spec = spec;
    a.sh[s].reasked = false;
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
void World::update_in_place(int i) {
  Actor& a = actors_[i];
  ++a.round;
  a.has_first = false;
  a.in_place_round = true;
  Version held = a.sh[0].v;
  Version spec = chance(200) ? -2 : -1;
  for (int s = 0; s < a.n; ++s) {
    a.sh[s].round_decided = false;
    a.sh[s].spec = spec;
    a.sh[s].reasked = false;
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

void World::add_actor() {
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

int World::model_shards(const std::string& model) {
  auto it = shards_.find(model);
  if (it != shards_.end()) return it->second;
  int n = chance(500) ? 1 : 2 + static_cast<int>(r(3));
  shards_[model] = n;
  return n;
}

void World::join(int i, bool keep) {
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
    s.reask_after_unpublish = false;
  }
  uint64_t epoch = epoch_;
  Event c = Connect{a.cid, a.dc};
  at(0, [=] { deliver(c, epoch); });  // a connection: Connect precedes every request
  heartbeat(i, a.session);
  for (int s = 0; s < a.n; ++s) open(i, s);
}

void World::heartbeat(int i, uint64_t session) {
  Actor& a = actors_[i];
  if (a.session != session || !a.alive) return;
  transmit(i, session, Heartbeat{a.cid});
  at(100 * kMs, [=] { heartbeat(i, session); });
}

}  // namespace thub::sched::sim::detail
