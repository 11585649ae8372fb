// Registry: dispatches events to the Core operations, de-duplicates requests, and owns the
// helpers shared by all concepts (replies, model lookup, describe, invariants).
#include "sched/registry.h"

#include <algorithm>
#include <sstream>
#include <type_traits>

#include "sched/core.h"

namespace thub::sched {

struct Registry::State {
  explicit State(Config cfg) : core(cfg) {}
  detail::Core core;
};

Registry::Registry(Config cfg) : s_(std::make_unique<State>(cfg)) {}
Registry::~Registry() = default;
Registry::Registry(Registry&&) noexcept = default;
Registry& Registry::operator=(Registry&&) noexcept = default;
std::vector<Action> Registry::step(const Event& ev, Time now) { return s_->core.step(ev, now); }
std::string Registry::describe() const { return s_->core.describe(); }
Time Registry::quiet_until() const { return s_->core.quiet_until(); }
std::string Registry::check_invariants() const { return s_->core.check_invariants(); }
Snapshot Registry::snapshot(const SnapshotLimits& limits) const { return s_->core.snapshot(limits); }

namespace detail {

const char* buf_name(Buf b) {
  switch (b) {
    case Buf::kEmpty: return "empty";
    case Buf::kReceiving: return "receiving";
    case Buf::kHolding: return "holding";
    case Buf::kOffloading: return "offloading";
    case Buf::kDraining: return "draining";
  }
  return "?";
}

namespace {
template <class E>
constexpr bool kIsRequest = !std::is_same_v<E, Connect> && !std::is_same_v<E, Disconnect> &&
                            !std::is_same_v<E, Heartbeat> && !std::is_same_v<E, Tick>;
template <class E, class = void>
constexpr bool kHasMember = false;  // a request about one member (all but Open)
template <class E>
constexpr bool kHasMember<E, std::void_t<decltype(std::declval<E>().member)>> = true;
}  // namespace

std::vector<Action> Core::step(const Event& ev, Time now) {
  now_ = now > now_ ? now : now_;
  out_.clear();
  // Deadlines first, so that every decision at `now` sees who is still alive; the sender is
  // alive (its message is the proof) and refreshed before.
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (!std::is_same_v<E, Tick> && !std::is_same_v<E, Connect> &&
                      !std::is_same_v<E, Disconnect>)
          touch(e.client);
      },
      ev);
  quiet_ = false;
  bool expired = expire();
  expired = judge_silent() || expired;  // a confirmed failure may let a deferred request on
  expired = expire_holds() || expired;  // a round's hold on a drain ended
  expired = expire_grace() || expired;  // requests held for the takeover grace are answered
  if (now_ < promised_quiet_ && (expired || !out_.empty()) && broken_quiet_.empty())
    broken_quiet_ = "a deadline passed at " + std::to_string(now_) + ", before quiet_until() promised (" +
                    std::to_string(promised_quiet_) + ")";
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, Tick>) {
          quiet_ = true;
        } else if constexpr (std::is_same_v<E, Heartbeat>) {
          touch(e.client);
          quiet_ = true;
        } else if constexpr (std::is_same_v<E, Connect> || std::is_same_v<E, Disconnect>) {
          on(e);
        } else if constexpr (kIsRequest<E>) {
          if (!known_client(e.client, e.req)) return;
          touch(e.client);
          Client& c = clients_.at(e.client);
          // A retried or duplicated request: answer again with the same reply, or, when its
          // reply is still deferred, let the original answer it.
          if (auto it = c.recent.find(e.req); it != c.recent.end()) {
            out_.emplace_back(it->second);
            return;
          }
          if (has_pending(e.client, e.req) || held_reqs_.count({e.client, e.req})) return;
          for (MemberId id : c.members) {
            const Member& m = members_.at(id);
            if (m.unpublish_pending && m.unpublish_req == e.req) return;
          }
          MemberId of = 0;
          if constexpr (kHasMember<E>) of = e.member;
          c.asked[e.req] = of;
          if (c.asked.size() > kAskedPerClient) c.asked.erase(c.asked.begin());
          on(e);
        }
      },
      ev);
  // Deferred requests are retried only after a step that may have let one proceed: with
  // thousands waiting in a large fan-out, retrying them after every heartbeat and every
  // deferral made the registry's work per version superlinear (docs/scale.md).
  // While a failure report stands, time alone changes answers: a reporter waiting for the
  // judgment of its only holder is answered once that holder has been heard past
  // failure_silence (SourceFailureTest), so quiet steps retry then too.
  // A slot released by the event (a round's shard joined or left) may end its source's drain.
  // A Replicate held for its replica's other shards goes on once they opened (or its hold ended).
  expired = release_opens() || expired;  // an Open waiting for another session's shard
  expired = release_assembled() || expired;
  expired = recheck_drains() || expired;
  if (expired || !quiet_ || !suspects_.empty()) wake();
  while (recheck_drains()) wake();  // ... and one released by a deferred request's answer
  promised_quiet_ = quiet_until();
  return std::move(out_);
}

// Each deadline as expire(), expire_holds() and expire_grace() test it, the earliest first.
// What is retried at every step (deferred requests, held Opens and Replicates, reports
// awaiting judgment) may be answered at any tick: then no sleep past now_.
Time Core::quiet_until() const {
  if (!pending_.empty() || !suspects_.empty() || !opening_.empty() || !assembling_.empty() ||
      !drain_recheck_.empty())
    return now_;
  Time t = Registry::kNever;
  auto earliest = [&t](Time d) { t = std::min(t, d); };
  if (!deadlines_.empty()) earliest(deadlines_.begin()->first + cfg_.heartbeat_timeout + 1);
  if (cfg_.lease_progress_timeout > 0 && !progress_.empty())
    earliest(progress_.begin()->first + cfg_.lease_progress_timeout);
  if (!orphans_.empty()) earliest(orphans_.begin()->first);
  if (!round_ends_.empty()) earliest(std::get<0>(*round_ends_.begin()));
  if (!hold_ends_.empty()) earliest(hold_ends_.begin()->first);
  if (!grace_over_ && first_open_ >= 0 && cfg_.takeover_grace > 0) earliest(first_open_ + cfg_.takeover_grace);
  return std::max(t, now_);
}

void Core::reply(Reply r) {
  auto it = clients_.find(r.client);
  if (it == clients_.end()) return;  // the client is gone: the reply is discarded
  Client& c = it->second;
  MemberId of = 0;
  if (auto a = c.asked.find(r.req); a != c.asked.end()) {
    of = a->second;
    c.asked.erase(a);
  }
  if (!c.members.count(of)) of = 0;  // (a closed member's last answers go with the client's)
  c.recent[r.req] = r;
  std::deque<RequestId>& order = c.recent_by_member[of];
  order.push_back(r.req);
  while (order.size() > (of ? kRecentPerMember : kRecentPerClient)) {
    c.recent.erase(order.front());
    order.pop_front();
  }
  out_.emplace_back(std::move(r));
}

void Core::reply_err(ClientId c, RequestId req, Status s, std::string detail) {
  Reply r = make_reply(c, req);
  r.status = s;
  r.detail = std::move(detail);
  reply(std::move(r));
}

Model* Core::model_of(const Member& m) {
  auto it = models_.find(m.model);
  return it == models_.end() ? nullptr : &it->second;
}
const Model* Core::model_of(const Member& m) const {
  auto it = models_.find(m.model);
  return it == models_.end() ? nullptr : &it->second;
}

void Core::maybe_erase_model(const std::string& model) {
  auto it = models_.find(model);
  if (it == models_.end()) return;
  for (const auto& [name, r] : it->second.replicas)
    if (!r.shards.empty()) return;
  // No member left: forget the model, so that a new job may use another layout.
  models_.erase(it);
}

std::string Core::describe() const {
  std::ostringstream os;
  os << "clients " << clients_.size() << ", members " << members_.size() << ", leases "
     << leases_.size() << ", pending " << pending_.size() << "\n";
  for (const auto& [seq, p] : pending_)
    os << "  pending " << (p.kind == Pending::Kind::kRegrant ? "regrant" : "replicate")
       << " client " << p.client << " req " << p.req << " member " << p.member << " spec "
       << p.spec << " newer_than " << p.newer_than << " version " << p.version << " round " << p.round << "\n";
  for (const auto& [id, l] : leases_)
    os << "  lease " << id << " reader " << l.reader << " source " << l.source << " v"
       << l.version << (l.from_offload ? " host" : "")
       << (l.orphan_until ? " orphan until " + std::to_string(l.orphan_until) : "") << "\n";
  for (const auto& [name, md] : models_) {
    os << "model " << name << " published {";
    for (Version v : md.published) os << " " << v;
    os << " } retain " << retain_of(name) << "\n";
    for (const auto& [rname, r] : md.replicas) {
      os << "  replica " << rname << " (" << r.num_shards << " shards)";
      for (const auto& [round, t] : r.txns)
        os << " txn round " << round << " v" << t.version << " from " << t.source_replica;
      os << "\n";
      for (const auto& [shard, id] : r.shards) {
        const Member& m = members_.at(id);
        os << "    shard " << shard << " member " << id << " client " << m.client << " "
           << buf_name(m.buf);
        if (m.buf != Buf::kEmpty) os << " v" << m.version;
        if (m.spot) os << " spot";
        for (const auto& [v, c] : m.offloaded) {
          os << " host:v" << v << (c.dropping ? "(dropping)" : "");
          if (!c.reports.empty()) os << "(reported by " << c.reports.size() << ")";
        }
        if (!m.reports.empty()) os << " reported by " << m.reports.size();
        os << " load " << load(id) << "\n";
      }
    }
  }
  return os.str();
}

std::string Core::over_budget(ClientId c, size_t old_size, size_t new_size) const {
  if (new_size <= old_size) return "";
  const uint64_t grow = new_size - old_size;
  const uint64_t mine = clients_.at(c).stored_bytes;
  if (cfg_.max_descriptor_bytes_per_client > 0 && mine + grow > cfg_.max_descriptor_bytes_per_client)
    return "descriptor of " + std::to_string(new_size) + " bytes refused: this client's stored descriptors (" +
           std::to_string(mine) + " bytes) would pass max_descriptor_bytes_per_client (" +
           std::to_string(cfg_.max_descriptor_bytes_per_client) + ")";
  if (cfg_.max_descriptor_bytes > 0 && stored_bytes_ + grow > cfg_.max_descriptor_bytes)
    return "descriptor of " + std::to_string(new_size) + " bytes refused: the registry's stored descriptors (" +
           std::to_string(stored_bytes_) + " bytes) would pass max_descriptor_bytes (" +
           std::to_string(cfg_.max_descriptor_bytes) + ")";
  return "";
}

std::string Core::refused_descriptor(ClientId c, const std::string& old, const std::string& d) const {
  if (d.empty()) return "an empty descriptor: nothing to read this member by";
  return over_budget(c, old.size(), d.size());
}

void Core::store(ClientId c, std::string& slot, const std::string& d) {
  Client& cl = clients_.at(c);
  cl.stored_bytes = cl.stored_bytes - slot.size() + d.size();
  stored_bytes_ = stored_bytes_ - slot.size() + d.size();
  slot = d;
}

void Core::unstore(ClientId c, uint64_t bytes) {
  clients_.at(c).stored_bytes -= bytes;
  stored_bytes_ -= bytes;
}

uint64_t Core::stored_by(const Member& m) {
  uint64_t n = m.descriptor.size();
  for (const auto& [v, copy] : m.offloaded) n += copy.descriptor.size();
  return n;
}

std::string Core::check_invariants() const {
  std::ostringstream err;
  if (!broken_quiet_.empty()) err << broken_quiet_ << "\n";
  {
    std::unordered_map<ClientId, uint64_t> per_client;
    uint64_t all = 0;
    for (const auto& [id, m] : members_) {
      per_client[m.client] += stored_by(m);
      all += stored_by(m);
    }
    if (all != stored_bytes_) err << "stored descriptor bytes " << stored_bytes_ << ", counted " << all << "\n";
    for (const auto& [c, n] : per_client)
      if (auto it = clients_.find(c); it != clients_.end() && it->second.stored_bytes != n)
        err << "client " << c << " stores " << it->second.stored_bytes << " descriptor bytes, counted " << n << "\n";
  }
  {  // every lease but the orphans has its progress deadline, and only they
    std::set<std::pair<Time, LeaseId>> want;
    for (const auto& [id, l] : leases_)
      if (!l.orphan_until) want.insert({l.progress_at, id});
    if (want != progress_) err << "the leases' progress deadlines differ from the leases\n";
  }
  for (const auto& [id, l] : leases_) {
    auto it = members_.find(l.source);
    if (it == members_.end()) continue;  // a closed/crashed source: the reader will report
    const Member& s = it->second;
    if (!l.from_offload && s.buf == Buf::kEmpty)
      err << "lease " << id << " reads the empty buffers of member " << l.source << "\n";
    if (l.from_offload && !s.offloaded.count(l.version))
      err << "lease " << id << " reads a freed host copy of member " << l.source << "\n";
  }
  for (const auto& [name, md] : models_) {
    std::map<std::tuple<Version, int, int>, std::set<MemberId>> by_shard;
    for (const auto& [v, ids] : md.holders)
      for (MemberId id : ids)
        if (auto it = members_.find(id); it != members_.end())
          by_shard[{v, it->second.num_shards, it->second.shard}].insert(id);
    if (by_shard != md.shard_holders) err << "model " << name << ": shard_holders differs from holders\n";
    for (auto kv = by_shard.begin(); kv != by_shard.end();) {
      for (auto it = kv->second.begin(); it != kv->second.end();)
        it = load(*it) < cfg_.max_readers_per_source ? std::next(it) : kv->second.erase(it);
      kv = kv->second.empty() ? by_shard.erase(kv) : std::next(kv);
    }
    if (by_shard != md.shard_free) err << "model " << name << ": shard_free differs from the free holders\n";
  }
  // load() is its leases that are not orphans, its reserved slots and the slots it holds
  // for spliced readers; a slot is held only for a reader still reading, through its own
  // lease, from a member that is gone (until that read ends, the reader or the source goes).
  std::map<MemberId, int> counted;
  for (const auto& [id, l] : leases_)
    if (!l.orphan_until && !l.seed) ++counted[l.source];
  for (const auto& [src, n] : reserved_) counted[src] += n;
  for (const auto& [src, readers] : held_slots_) {
    counted[src] += static_cast<int>(readers.size());
    if (!members_.count(src)) err << "a slot is held on gone member " << src << "\n";
    for (MemberId rid : readers) {
      auto rit = members_.find(rid);
      if (rit == members_.end() || rit->second.held_slot != src) {
        err << "a slot of member " << src << " is held for " << rid << ", which does not hold it\n";
        continue;
      }
      auto lit = leases_.find(rit->second.own_lease);
      if (lit == leases_.end() || members_.count(lit->second.source))
        err << "member " << rid << " holds a slot of " << src << " but reads no gone source\n";
    }
  }
  // A round's hold on a drain: one per reserved slot whose source's buffers held its version.
  std::map<MemberId, std::multiset<Time>> holds;
  for (const auto& [name, md] : models_)
    for (const auto& [rname, r] : md.replicas)
      for (const auto& [round, t] : r.txns)
        for (int s : t.holding) {
          auto it = t.reserved.find(s);
          if (it == t.reserved.end() || !it->second)
            err << "replica " << rname << " round " << round << ": shard " << s << " holds a drain without a slot\n";
          else
            holds[it->second].insert(t.hold_until);
        }
  if (holds != drain_holds_) {
    err << "the rounds' holds on drains differ from drain_holds_:";
    for (const auto& [id, ts] : holds) err << " counted " << id << "x" << ts.size();
    for (const auto& [id, ts] : drain_holds_) err << " recorded " << id << "x" << ts.size();
    err << "\n";
  }
  for (const auto& [id, m] : members_)
    if (m.buf == Buf::kDraining && !m.leaving && live_leases(id) == 0 && !drain_held(m) && !drain_recheck_.count(id))
      err << "member " << id << " drains with no reader and no hold\n";
  for (const auto& [id, m] : members_)
    if (m.held_slot && !(held_slots_.count(m.held_slot) && held_slots_.at(m.held_slot).count(id)))
      err << "member " << id << "'s held slot on " << m.held_slot << " is not recorded\n";
  for (const auto& [id, n] : counted)
    if (n && load(id) != n) err << "member " << id << " has load " << load(id) << ", counted " << n << "\n";
  for (const auto& [id, n] : load_)
    if (!counted.count(id)) err << "member " << id << " has load " << n << ", counted 0\n";
  for (const auto& [id, m] : members_) {
    if (load(id) > cfg_.max_readers_per_source)
      err << "member " << id << " has load " << load(id) << " > max\n";
    bool waits = has_pending(id);
    if (m.buf == Buf::kReceiving && !leases_.count(m.own_lease) && !waits)
      err << "member " << id << " receives without a lease\n";
  }
  // A deferred request with an idle eligible source is a lost wake-up.
  for (const auto& [seq, p] : pending_) {
    auto it = members_.find(p.member);
    if (it == members_.end()) {
      err << "pending request of a gone member " << p.member << "\n";
      continue;
    }
    const Member& m = it->second;
    if (p.in_place) {
      if (m.buf == Buf::kEmpty && choose_member(m, p.spec))
        err << "update of member " << p.member << " could proceed\n";
      continue;
    }
    if (p.kind == Pending::Kind::kRegrant) {
      if (choose_member(m, p.version)) err << "regrant of member " << p.member << " could proceed\n";
      continue;
    }
    const Replica& r = models_.at(m.model).replicas.at(m.replica);
    if (!r.txns.empty()) continue;  // waits for its replica's transaction
    Version v = -1;
    std::string detail;
    const bool ok = resolve(m, p.spec, &v, &detail) == Status::kOk;
    if (ok && p.spec < 0)
      if (Version local = skip_to_local(m, v, p.newer_than, false); local >= 0) v = local;  // as try_replicate
    if (ok && m.buf == Buf::kEmpty && choose_replica(m, v))
      err << "replicate of member " << p.member << " v" << v << " could proceed\n";
  }
  err << check_deferred();
  return err.str();
}

}  // namespace detail
}  // namespace thub::sched
