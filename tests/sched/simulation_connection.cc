// The simulated registry connection of a process (what src/registry/connection.cc does): it
// gives the registry the client id and request ids, maps them back to the machines' request
// ids, sends a request again with the same id while unanswered, drops duplicate answers,
// fails requests past their deadline (RegistryNoReply kTimeout), heartbeats and watches the
// registry for silence, and on a lost connection fails every pending request (kRegistry),
// tells the machines RegistryLost, reconnects (a new client id, RegistryBack with the next
// generation) or gives up after kReconnectFor (RegistryGone). The network under it loses,
// duplicates and reorders messages; a partition cuts a process off from the registry.
#include <algorithm>
#include <string>
#include <type_traits>
#include <variant>

#include "tests/sched/simulation_world.h"

namespace thub::sched::sim::detail {

namespace {
// Requests the registry may answer much later (a drain, a busy source) have no deadline of
// their own (connection.cc: deferrable()).
bool deferrable(const Event& ev) {
  return std::holds_alternative<Replicate>(ev) || std::holds_alternative<SourceFailed>(ev) ||
         std::holds_alternative<Unpublish>(ev);
}

Op op_of(const Event& ev) {
  if (std::holds_alternative<Open>(ev)) return Op::kOpen;
  if (std::holds_alternative<Publish>(ev)) return Op::kPublish;
  if (std::holds_alternative<Replicate>(ev)) return Op::kReplicate;
  if (std::holds_alternative<TransferDone>(ev)) return Op::kDone;
  if (std::holds_alternative<SourceFailed>(ev)) return Op::kFailed;
  if (std::holds_alternative<Unpublish>(ev)) return Op::kUnpublish;
  if (std::holds_alternative<OffloadDone>(ev)) return Op::kOffloadDone;
  if (std::holds_alternative<Cancel>(ev)) return Op::kCancel;
  return Op::kClose;
}
}  // namespace

// A new process connects (the Context's constructor); its program starts once the registry
// answered. An unreachable registry: the program tries again a little later.
void World::connect(int i, uint64_t proc) {
  Actor& a = actors_[i];
  if (!a.alive || a.proc != proc) return;
  if (!reachable(i)) {
    at(100 * kMs, [=] { connect(i, proc); });
    return;
  }
  a.conn = Conn{};
  a.conn.serial = ++serial_;
  a.conn.cid = next_cid_++;
  cid_actor_[a.conn.cid] = i;
  trace(a.replica + " connects as client " + std::to_string(a.conn.cid));
  uint64_t epoch = epoch_, serial = a.conn.serial;
  const ClientId cid = a.conn.cid;
  hello(cid, epoch, [=] {
    Actor& b = actors_[i];
    if (!b.alive || b.proc != proc || b.conn.serial != serial) return;
    if (epoch != epoch_) return connect(i, proc);  // the registry restarted meanwhile
    b.conn.st = Conn::St::kUp;
    b.conn.last_rx = now_;
    b.conn.up_since = now_;
    heartbeat(i, serial);
    start_process(i);
  }, [=] { connect(i, proc); });
}

// HELLO: the connection is up once the registry has taken its Connect and answered (a
// stalled registry answers late); no answer within the connect timeout: try again.
void World::hello(ClientId cid, uint64_t epoch, std::function<void()> up, std::function<void()> again) {
  hello_[cid] = std::move(up);
  Event c = Connect{cid, actors_[cid_actor_.at(cid)].dc};
  at(lat(), [=] { deliver(c, epoch); });
  at(kConnectTimeout, [=] {
    if (hello_.erase(cid)) again();
  });
}

void World::send(int i, int s, const client::SendRequest& a) {
  Actor& actor = actors_[i];
  Conn& c = actor.conn;
  if (c.st != Conn::St::kUp || a.generation != c.gen) {
    // connection.cc answers at once: not connected, or meant for an earlier registry (the
    // callback runs on the engine later)
    uint64_t reg = actor.sh[s].reg, mreq = a.req;
    at(0, [=] {
      if (actors_[i].alive && s < static_cast<int>(actors_[i].sh.size()) && actors_[i].sh[s].reg == reg)
        feed(i, s, client::RegistryNoReply{mreq, Code::kRegistry, "not connected to that registry"});
    });
    return;
  }
  RequestId q = ++req_;
  Event ev = a.event;
  std::visit(
      [&](auto& e) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(e)>, Tick>) e.client = c.cid;
        if constexpr (std::is_same_v<std::decay_t<decltype(e)>, Tick> || std::is_same_v<std::decay_t<decltype(e)>, Connect> ||
                      std::is_same_v<std::decay_t<decltype(e)>, Disconnect> ||
                      std::is_same_v<std::decay_t<decltype(e)>, Heartbeat>) {
        } else {
          e.req = q;
        }
      },
      ev);
  c.pending[q] = Conn::Pending{s, a.req, actor.sh[s].reg, ev};
  // The outside view records what was sent (its session exists once Connect was delivered;
  // without it nothing of this connection reaches the registry any more).
  if (auto ss = sessions_.find(c.cid); ss != sessions_.end()) {
    // A Replicate of an operation from before this session: the round's answer of the other
    // shards came from the registry before, unless they, too, still wait for it.
    if (std::holds_alternative<Replicate>(ev) && actor.n > 1 && !ss->second.skewed) {
      auto waits_first_answer = [&](const Shard& t) {
        for (const auto& [op, rec] : t.ops)
          if (rec.started < c.up_since && t.m->receiving() < 0 && t.m->held() == rec.before) return true;
        return false;
      };
      bool old_op = false, all_ask = true;
      for (const auto& [op, rec] : actor.sh[s].ops) old_op = old_op || rec.started < c.up_since;
      for (int k = 0; k < actor.n; ++k)
        if (k != s) all_ask = all_ask && waits_first_answer(actor.sh[k]);
      if (old_op && !all_ask) mark_skewed(c.cid, "a shard asks again alone");
    }
    Out o;
    o.shard = s;
    o.op = op_of(ev);
    o.ev = ev;
    o.round = actor.round;
    ss->second.waiting.erase(q);
    ss->second.out[q] = std::move(o);
  }
  transmit(i, c.serial, ev);
  retry_later(i, c.serial, q);
  Time deadline = !a.deadline ? 0 : actor.timeout > 0 ? actor.timeout : deferrable(ev) ? 0 : kRequestTimeout;
  if (deadline > 0) {
    uint64_t serial = c.serial;
    at(deadline, [=] { expire_request(i, serial, q); });
  }
}

// Requests travel in order on the stream (a partition holds them back until it heals); the
// registry reads them one after the other. What the client had not handed over when it
// closed the connection is lost with it. A request may also arrive twice (a retry crossing
// its answer), out of order.
void World::transmit(int i, uint64_t serial, const Event& ev) {
  Conn& c = actors_[i].conn;
  Time arrive = now_ + lat();
  if (cut(i)) arrive = std::max(arrive, actors_[i].cut_until + lat());
  arrive = std::max(arrive, c.last_arrival);
  c.last_arrival = arrive;
  uint64_t epoch = epoch_;
  auto on_stream = [=] { return actors_[i].conn.serial == serial; };
  at(arrive - now_, [=] {
    if (on_stream()) deliver(ev, epoch);
  });
  if (!calm() && chance(10)) {  // duplicated
    at(arrive - now_ + 3 * kMs, [=] {
      if (on_stream()) deliver(ev, epoch);
    });
  }
}

// The same request id again: the registry answers a repeat from its reply cache and ignores
// one whose answer is still deferred.
void World::retry_later(int i, uint64_t serial, RequestId q) {
  at(kRetryEvery, [=] {
    Conn& c = actors_[i].conn;
    if (c.serial != serial || c.st != Conn::St::kUp || !actors_[i].alive) return;
    auto it = c.pending.find(q);
    if (it == c.pending.end()) return;
    transmit(i, serial, it->second.ev);
    retry_later(i, serial, q);
  });
}

void World::expire_request(int i, uint64_t serial, RequestId q) {
  Conn& c = actors_[i].conn;
  if (c.serial != serial || !actors_[i].alive) return;
  auto it = c.pending.find(q);
  if (it == c.pending.end()) return;
  Conn::Pending p = it->second;
  c.pending.erase(it);
  if (actors_[i].sh[p.shard].reg != p.reg) return;
  ++res_.timeouts;
  trace(actors_[i].replica + "/" + std::to_string(p.shard) + " request " + std::to_string(q) + " timed out");
  feed(i, p.shard, client::RegistryNoReply{p.mreq, Code::kTimeout, "no reply from the registry within its deadline"});
}

// A reply of the registry travels back over the client's connection, if that is still open.
void World::reply_to(int i, const Reply& rep) {
  const Actor& a = actors_[i];
  if (!a.alive || a.conn.cid != rep.client || a.conn.st != Conn::St::kUp || cut(i)) return;
  if (!calm() && chance(10)) {
    ++res_.lost;
    return;  // the reply is lost: the connection sends the request again
  }
  uint64_t serial = a.conn.serial;
  at(lat(), [=] { on_reply(i, serial, rep); });
  if (!calm() && chance(10)) at(lat() + 3 * kMs, [=] { on_reply(i, serial, rep); });  // duplicated
}

void World::on_reply(int i, uint64_t serial, const Reply& rep) {
  Actor& a = actors_[i];
  if (!a.alive || a.conn.serial != serial || a.conn.st != Conn::St::kUp) return;
  a.conn.last_rx = now_;
  auto it = a.conn.pending.find(rep.req);
  if (it == a.conn.pending.end()) return;  // a duplicate (or an answer past its deadline)
  Conn::Pending p = it->second;
  a.conn.pending.erase(it);
  const uint64_t reg = p.reg;
  if (a.sh[p.shard].reg != reg) return;
  feed(i, p.shard, client::RegistryReply{p.mreq, rep});
  if (!res_.ok || !a.alive || a.sh[p.shard].reg != reg) return;
  on_grant_seen(i, p.shard, rep);
  // A fault past the connection: the machine itself must ignore an answer it already had.
  if (!calm() && chance(5)) {
    at(lat(), [=] {
      Actor& b = actors_[i];
      if (b.alive && p.shard < static_cast<int>(b.sh.size()) && b.sh[p.shard].reg == reg)
        feed(i, p.shard, client::RegistryReply{p.mreq, rep});
    });
  }
}

// Offload / Discard orders go to every machine of the connection (context.cc dispatches to
// all models; each machine checks the member id).
void World::order_to(ClientId c, MemberId m, const MachineEvent& ev) {
  int i = cid_actor_.at(c);
  const Actor& a = actors_[i];
  if (!a.alive || a.conn.cid != c || a.conn.st != Conn::St::kUp) return;
  uint64_t serial = a.conn.serial;
  // Orders are not asked for again: the stream delivers them once a partition heals (if the
  // connection survives it).
  at(std::max<Time>(0, a.cut_until - now_) + lat(), [=] {
    Actor& b = actors_[i];
    if (!b.alive || b.conn.serial != serial || b.conn.st != Conn::St::kUp) return;
    for (size_t s = 0; s < b.sh.size() && res_.ok; ++s)
      if (b.sh[s].m && b.sh[s].m->member() == m) feed(i, static_cast<int>(s), ev);
  });
}

// The connection is lost: every pending request fails, then every machine hears RegistryLost
// (connection.cc: fail_pending, then notify(kLost)), and reconnecting begins.
void World::lose(int i, const std::string& why, bool tell_registry) {
  Actor& a = actors_[i];
  Conn& c = a.conn;
  if (!a.alive || c.st != Conn::St::kUp) return;
  trace(a.replica + " loses client " + std::to_string(c.cid) + ": " + why);
  ClientId old = c.cid;
  c.st = Conn::St::kLost;
  c.lost_at = now_;
  c.backoff = 20 * kMs;
  c.serial = ++serial_;
  const uint64_t serial = c.serial;
  if (tell_registry && !cut(i)) {  // the server sees the socket close
    uint64_t epoch = epoch_;
    Event d = Disconnect{old};
    at(lat(), [=] { deliver(d, epoch); });
  }
  std::map<RequestId, Conn::Pending> pending;
  pending.swap(c.pending);
  for (const auto& [q, p] : pending) {
    if (!res_.ok || a.conn.serial != serial) return;
    if (a.sh[p.shard].reg != p.reg) continue;
    feed(i, p.shard, client::RegistryNoReply{p.mreq, Code::kRegistry, why});
  }
  for (size_t s = 0; s < a.sh.size() && res_.ok && a.conn.serial == serial; ++s)
    feed(i, static_cast<int>(s), client::RegistryLost{});
  at(0, [=] { reconnect(i, serial); });
}

void World::reconnect(int i, uint64_t serial) {
  Actor& a = actors_[i];
  Conn& c = a.conn;
  if (!a.alive || c.serial != serial || c.st != Conn::St::kLost) return;
  if (now_ - c.lost_at >= kReconnectFor) {
    c.st = Conn::St::kGone;
    ++res_.gone;
    trace(a.replica + " gives up reconnecting");
    for (size_t s = 0; s < a.sh.size() && res_.ok && c.serial == serial; ++s)
      feed(i, static_cast<int>(s), client::RegistryGone{"reconnecting gave up"});
    progress(i);
    return;
  }
  if (!reachable(i)) {
    at(c.backoff, [=] { reconnect(i, serial); });
    c.backoff = std::min<Time>(c.backoff * 2, 500 * kMs);
    return;
  }
  ClientId cid = next_cid_++;
  cid_actor_[cid] = i;
  uint64_t epoch = epoch_;
  hello(cid, epoch, [=] {
    Actor& b = actors_[i];
    if (!b.alive || b.conn.serial != serial || b.conn.st != Conn::St::kLost) return;
    if (epoch != epoch_) return reconnect(i, serial);  // that registry is gone already
    b.conn.st = Conn::St::kUp;
    b.conn.cid = cid;
    b.conn.last_rx = now_;
    b.conn.up_since = now_;
    ++b.conn.gen;
    ++res_.reconnects;
    trace(b.replica + " is back as client " + std::to_string(cid) + " (generation " + std::to_string(b.conn.gen) + ")");
    const uint64_t gen = b.conn.gen;
    for (size_t s = 0; s < b.sh.size() && res_.ok && b.conn.serial == serial; ++s)
      feed(i, static_cast<int>(s), client::RegistryBack{gen});
    heartbeat(i, serial);
    progress(i);
  }, [=] { reconnect(i, serial); });
}

// Heartbeats keep the registry from dropping us; its answers (and replies) show it alive.
// A registry silent for kRegistryTimeout is lost (stopped, hung or cut off).
void World::heartbeat(int i, uint64_t serial) {
  Actor& a = actors_[i];
  if (!a.alive || a.conn.serial != serial || a.conn.st != Conn::St::kUp) return;
  if (now_ - a.conn.last_rx >= kRegistryTimeout) return lose(i, "the registry sent nothing (registry_timeout_ms)", true);
  transmit(i, serial, Heartbeat{a.conn.cid});
  at(kHeartbeatEvery, [=] { heartbeat(i, serial); });
}

void World::echo(ClientId c) {
  int i = cid_actor_.at(c);
  const Actor& a = actors_[i];
  if (!a.alive || a.conn.cid != c || a.conn.st != Conn::St::kUp) return;
  uint64_t serial = a.conn.serial;
  // Orders are not asked for again: the stream delivers them once a partition heals (if the
  // connection survives it).
  at(std::max<Time>(0, a.cut_until - now_) + lat(), [=] {
    Actor& b = actors_[i];
    if (b.alive && b.conn.serial == serial && !cut(i)) b.conn.last_rx = now_;
  });
}

}  // namespace thub::sched::sim::detail
