// Holdings and versions: who serves what (with an index per model and version), which
// versions are available, how a spec (absolute, latest, latest-k) resolves, and how loaded
// a source is.
#include <algorithm>
#include <iterator>

#include "sched/core.h"

namespace thub::sched::detail {

bool Core::serves_live(const Member& m, Version v) const {
  if (m.version != v) return false;
  if (m.buf == Buf::kHolding) return true;
  return m.buf == Buf::kReceiving && cfg_.pipeline;
}

bool Core::serves_offload(const Member& m, Version v) const {
  auto it = m.offloaded.find(v);
  return it != m.offloaded.end() && !it->second.dropping;
}

// The keys unindex() drops m from: a superset of those index() added it under.
template <class F>
void Core::for_each_index_key(const Member& m, F f) const {
  if (m.buf != Buf::kEmpty) f(std::tuple<Version, int, int>{m.version, m.num_shards, m.shard});
  for (const auto& [v, c] : m.offloaded) f(std::tuple<Version, int, int>{v, m.num_shards, m.shard});
}

void Core::unindex(const Member& m) {
  Model* md = model_of(m);
  if (!md) return;
  auto drop = [&](const std::tuple<Version, int, int>& key) {
    auto it = md->holders.find(std::get<0>(key));
    if (it == md->holders.end()) return;
    it->second.erase(m.id);
    if (it->second.empty()) md->holders.erase(it);
    for (auto* index : {&md->shard_holders, &md->shard_free}) {
      auto sit = index->find(key);
      if (sit == index->end()) continue;
      sit->second.erase(m.id);
      if (sit->second.empty()) index->erase(sit);
    }
  };
  for_each_index_key(m, drop);
}

void Core::index(const Member& m) {
  if (m.rep) expose(*m.rep);  // its buffers or host copies changed (deferred.cc)
  Model* md = model_of(m);
  if (!md || m.leaving) return;
  bool free = load(m.id) < cfg_.max_readers_per_source;
  auto add = [&](Version v) {
    md->holders[v].insert(m.id);
    md->shard_holders[{v, m.num_shards, m.shard}].insert(m.id);
    if (free) md->shard_free[{v, m.num_shards, m.shard}].insert(m.id);
  };
  if (serves_live(m, m.version)) add(m.version);
  for (const auto& [v, c] : m.offloaded)
    if (!c.dropping) add(v);
}

void Core::reserve(Transaction& t, int shard, MemberId source) {
  t.reserved[shard] = source;
  if (source) {
    ++reserved_[source];
    add_load(source, 1);
    // A slot on buffers that hold the round's version holds off their drain (round_hold).
    const Member& s = members_.at(source);
    if (t.hold_until > now_ && s.version == t.version && (s.buf == Buf::kHolding || s.buf == Buf::kReceiving)) {
      t.holding.insert(shard);
      drain_holds_[source].insert(t.hold_until);
      hold_ends_.insert({t.hold_until, source});
    }
  }
}

void Core::unreserve(Transaction& t, int shard) {
  auto it = t.reserved.find(shard);
  if (it == t.reserved.end()) return;
  if (it->second) {
    add_load(it->second, -1);
    if (--reserved_[it->second] == 0) reserved_.erase(it->second);
    if (t.holding.erase(shard)) {
      auto h = drain_holds_.find(it->second);
      h->second.erase(h->second.find(t.hold_until));
      if (h->second.empty()) drain_holds_.erase(h);
      drain_recheck_.insert(it->second);
    }
  }
  t.reserved.erase(it);
}

bool Core::drain_held(const Member& m) const {
  if (!m.intact || (m.buf != Buf::kDraining && m.buf != Buf::kOffloading)) return false;
  auto it = drain_holds_.find(m.id);
  return it != drain_holds_.end() && *it->second.rbegin() > now_;
}

bool Core::expire_holds() {
  bool any = false;
  while (!round_ends_.empty() && std::get<0>(*round_ends_.begin()) <= now_) {
    const auto [until, id, round] = *round_ends_.begin();
    round_ends_.erase(round_ends_.begin());
    if (auto it = members_.find(id); it != members_.end()) {
      settle(*it->second.rep, round);  // commits what it has, if nothing is under way
      any = true;
    }
  }
  while (!hold_ends_.empty() && hold_ends_.begin()->first <= now_) {
    drain_recheck_.insert(hold_ends_.begin()->second);
    hold_ends_.erase(hold_ends_.begin());
    any = true;
  }
  return any;
}

bool Core::recheck_drains() {
  if (drain_recheck_.empty()) return false;
  std::set<MemberId> ids;
  ids.swap(drain_recheck_);
  for (MemberId id : ids)
    if (auto it = members_.find(id); it != members_.end()) check_drain(it->second);
  return true;
}

bool Core::lasting(const Member& m, Version v) const {
  if (!holds(m, v)) return false;
  return serves_offload(m, v) || m.buf == Buf::kHolding || grounded(m.id, 0);
}

namespace {
// Does some replica with `num_shards` shards serve v in every shard, and will each of them
// complete it (`lasting`)? A version without such a replica is lost, even while partial
// holders whose source died are still indexed (they have not reported yet).
bool complete_replica(const Core& c, const Model& md, Version v, int num_shards) {
  auto hit = md.holders.find(v);
  if (hit == md.holders.end()) return false;
  for (MemberId id : hit->second) {
    const Member& m = c.members_.at(id);
    if (m.num_shards != num_shards) continue;
    const Replica& r = md.replicas.at(m.replica);
    if (static_cast<int>(r.shards.size()) != num_shards) continue;
    bool all = true;
    for (const auto& [s, sid] : r.shards) all = all && c.lasting(c.members_.at(sid), v);
    if (all) return true;
  }
  return false;
}
}  // namespace

std::vector<Version> Core::available(const std::string& model, int num_shards) const {
  std::vector<Version> vs;
  auto mit = models_.find(model);
  if (mit == models_.end()) return vs;
  for (const auto& [v, ids] : mit->second.holders)
    if (complete_replica(*this, mit->second, v, num_shards)) vs.push_back(v);
  return vs;
}

Status Core::resolve(const Member& m, Version spec, Version* out, std::string* detail) const {
  const Model* md = model_of(m);
  if (spec >= 0) {
    if (!md || !md->published.count(spec)) {
      *detail = "version " + std::to_string(spec) + " of model " + m.model + " was never published";
      return Status::kNotFound;
    }
    *out = spec;
    return Status::kOk;  // whether it can be served is the caller's question (lost / busy)
  }
  uint64_t k = static_cast<uint64_t>(-1 - spec);
  uint64_t seen = 0;
  if (md)
    for (auto it = md->holders.rbegin(); it != md->holders.rend(); ++it) {
      if (!complete_replica(*this, *md, it->first, m.num_shards)) continue;
      if (seen++ == k) {
        *out = it->first;
        return Status::kOk;
      }
    }
  *detail = seen == 0 ? "no version of model " + m.model + " is available"
                      : "only " + std::to_string(seen) + " versions of model " + m.model +
                            " are available";
  return Status::kNotFound;
}

Version Core::older_servable(const Member& m, Version v, Version newer_than) const {
  const Model* md = model_of(m);
  if (!md) return -1;
  for (auto it = std::make_reverse_iterator(md->holders.lower_bound(v)); it != md->holders.rend(); ++it) {
    if (it->first <= newer_than) break;
    if (complete_replica(*this, *md, it->first, m.num_shards) && replica_will_serve(m, it->first)) return it->first;
  }
  return -1;
}

int Core::live_leases(MemberId id) const {
  int n = 0;
  auto it = leases_by_source_.find(id);
  if (it == leases_by_source_.end()) return 0;
  for (LeaseId l : it->second)
    if (!leases_.at(l).from_offload) ++n;
  return n;
}

int Core::load(MemberId id) const {
  // An orphan (its reader's client was dropped for silence) still holds off the source's
  // drain, but no longer a reader slot: a stopped or cut-off reader moves no bytes, and the
  // readers it would keep waiting are usually the ones replacing it.
  // A seed (a reader in another datacenter, Lease::seed) holds no slot either.
  // load_ counts, per source, its leases that are not orphans or seeds and its reserved slots: kept
  // where leases start, end and turn orphan, and where slots are reserved, so that the source
  // choice, which asks for every holder, does one lookup instead of walking its leases.
  auto it = load_.find(id);
  return it == load_.end() ? 0 : it->second;
}

void Core::add_load(MemberId id, int d) {
  auto it = load_.try_emplace(id, 0).first;
  bool was_free = it->second < cfg_.max_readers_per_source;
  it->second += d;
  bool free = it->second < cfg_.max_readers_per_source;
  if (it->second == 0) load_.erase(it);
  if (free == was_free) return;
  // The slot filled or freed: the holder enters or leaves shard_free under every key it is
  // indexed under now (none between an unindex() and its index(), which decides then).
  auto mit = members_.find(id);
  if (mit == members_.end()) return;
  Model* md = model_of(mit->second);
  if (!md) return;
  for_each_index_key(mit->second, [&](const std::tuple<Version, int, int>& key) {
    auto hit = md->shard_holders.find(key);
    if (hit == md->shard_holders.end() || !hit->second.count(id)) return;
    if (free) {
      md->shard_free[key].insert(id);
    } else if (auto fit = md->shard_free.find(key); fit != md->shard_free.end()) {
      fit->second.erase(id);
      if (fit->second.empty()) md->shard_free.erase(fit);
    }
  });
}

}  // namespace thub::sched::detail
