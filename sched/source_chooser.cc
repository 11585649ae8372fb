// Source choice: among the replicas that serve the version in every shard, prefer the
// requester's datacenter, then the least loaded, then complete over partial, then the
// oldest member (smallest id; deterministic). A source serves at most max_readers_per_source
// readers; partial sources whose chain leads back to the requester, or no longer ends at a
// complete holder, are never chosen. Seeding (Config::seeding): a holder in another
// datacenter is chosen only while the requester's datacenter has no member that holds the
// version or will (its seeder, or the replicas reading behind it); the requester waits for a
// free slot there instead, so a version crosses into a datacenter once.
#include <tuple>

#include "sched/core.h"

namespace thub::sched::detail {

bool Core::may_pick(const Member& s, Version v, MemberId requester) const {
  if (s.id == requester || load(s.id) >= cfg_.max_readers_per_source) return false;
  return serves_live(s, v) || serves_offload(s, v);
}

std::optional<SourcePick> Core::pick_in(const Member& s, Version v, MemberId requester) const {
  if (s.id == requester || load(s.id) >= cfg_.max_readers_per_source) return std::nullopt;
  if (serves_live(s, v)) {
    bool partial = s.buf == Buf::kReceiving;
    if (partial && !grounded(s.id, requester)) {
      // reading it would close a cycle, or it will never complete (its chain's complete
      // holder is gone and it has not reported yet); its host copy (if any) is still fine
    } else {
      return SourcePick{s.id, false, partial};
    }
  }
  if (serves_offload(s, v)) return SourcePick{s.id, true, false};
  return std::nullopt;
}

namespace {
using Key = std::tuple<bool, int, bool>;  // (other datacenter, load, partial)
const Key kBest{false, 0, false};
}  // namespace

std::optional<std::string> Core::choose_replica(const Member& req, Version v) const {
  const Model* md = model_of(req);
  if (!md) return std::nullopt;
  // A busy holder is refused by pick_in whoever asks: only the free ones are scanned, in the
  // same (id) order (the checks below only skip too, so their order decides nothing).
  auto hit = md->shard_free.find({v, req.num_shards, req.shard});
  if (hit == md->shard_free.end()) return std::nullopt;
  const std::string& dc = clients_.at(req.client).datacenter;
  std::optional<bool> seeded_memo;  // asked once, and only if a holder elsewhere would do
  auto seeded = [&] {
    if (!seeded_memo) seeded_memo = cfg_.seeding && seeded_replica_here(req, v);
    return *seeded_memo;
  };
  std::optional<std::string> best;
  Key best_key;
  for (MemberId id : hit->second) {
    const Member& cand = members_.at(id);
    if (cand.shard != req.shard || cand.num_shards != req.num_shards) continue;
    // cand is its replica's shard req.shard (a holder is open; one member per shard).
    if (cand.replica == req.replica) continue;
    const Replica& r = md->replicas.at(cand.replica);
    if (static_cast<int>(r.shards.size()) != req.num_shards) continue;
    // every shard must be free and serve v; the requester replica's shard s reads shard s
    const Replica& mine = md->replicas.at(req.replica);
    auto requester = [&](int s) {  // the cycle check is per requester shard
      auto rq = mine.shards.find(s);
      return rq == mine.shards.end() ? MemberId{0} : rq->second;
    };
    // A shard that pick_in refuses whatever its chain (busy, or serving nothing of v) rules
    // the replica out: look for one before any pick_in walks a chain (grounded()). The same
    // pass bounds the key from below (a partial holder without a host copy of v is picked
    // partial or not at all), so that a replica that cannot beat the best is not walked.
    bool ok = true, partial = false;
    int load_sum = 0;
    for (const auto& [s, sid] : r.shards) {
      const Member& sm = members_.at(sid);
      if (!may_pick(sm, v, requester(s))) {
        ok = false;
        break;
      }
      load_sum += load(sid);
      partial = partial || (serves_live(sm, v) && sm.buf == Buf::kReceiving && !serves_offload(sm, v));
    }
    if (!ok) continue;
    const bool away = clients_.at(cand.client).datacenter != dc;
    if (best && !(Key{away, load_sum, partial} < best_key)) continue;
    if (away && seeded()) continue;
    partial = false;
    load_sum = 0;
    for (const auto& [s, sid] : r.shards) {
      auto pick = pick_in(members_.at(sid), v, requester(s));
      if (!pick) {
        ok = false;
        break;
      }
      partial = partial || pick->partial;
      load_sum += load(sid);
    }
    if (!ok) continue;
    Key key{away, load_sum, partial};
    if (!best || key < best_key) {  // ids ascend: the first of equals is the oldest
      best = cand.replica;
      best_key = key;
      if (key == kBest) break;
    }
  }
  return best;
}

std::optional<SourcePick> Core::choose_member(const Member& req, Version v) const {
  const Model* md = model_of(req);
  if (!md) return std::nullopt;
  auto hit = md->shard_holders.find({v, req.num_shards, req.shard});
  if (hit == md->shard_holders.end()) return std::nullopt;
  const std::string& dc = clients_.at(req.client).datacenter;
  std::optional<bool> seeded_memo;
  auto seeded = [&] {
    if (!seeded_memo) seeded_memo = cfg_.seeding && seeded_here(req, v);
    return *seeded_memo;
  };
  std::optional<SourcePick> best;
  Key best_key;
  for (MemberId id : hit->second) {
    const Member& cand = members_.at(id);
    if (cand.shard != req.shard || cand.num_shards != req.num_shards) continue;
    if (req.shunned.count(id)) continue;  // it reported this one during this transfer
    const bool away = clients_.at(cand.client).datacenter != dc;
    if (best && !(Key{away, load(id), false} < best_key)) continue;  // (partial only adds)
    auto pick = pick_in(cand, v, req.id);
    if (!pick) continue;
    if (away && seeded()) continue;
    Key key{away, load(id), pick->partial};
    if (!best || key < best_key) {  // ids ascend: the first of equals is the oldest member
      best = pick;
      best_key = key;
      if (key == kBest) break;
    }
  }
  return best;
}

// h (a shard of replica r) serves v now or will (will_serve), or r's round at v keeps a
// source slot for it (it has not asked yet: it will read v).
bool Core::will_hold(const Replica& r, const Member& h, Version v, MemberId requester) const {
  if (will_serve(h, v, requester)) return true;
  if (h.seeding == v && has_pending(h.id)) return true;  // a seed whose old holding drains
  for (const auto& [round, t] : r.txns)
    if (t.version == v && t.status == Status::kOk && t.reserved.count(h.shard)) return true;
  return false;
}

// A member of req's datacenter that serves shard req.shard of v now or will (will_hold:
// complete, a grounded partial, a receiver without pipelining, a host copy, a shard its round
// keeps a slot for), of another replica and not one req reported in this transfer. Only such a member: one whose chain
// leads back to req, or that req reported, could leave req waiting for nothing.
bool Core::seeded_here(const Member& req, Version v) const {
  const Model* md = model_of(req);
  if (!md) return false;
  const std::string& dc = dc_of(req);
  for (const auto& [name, r] : md->replicas) {
    if (name == req.replica || r.num_shards != req.num_shards) continue;
    auto it = r.shards.find(req.shard);
    if (it == r.shards.end() || req.shunned.count(it->second)) continue;
    const Member& h = members_.at(it->second);
    if (dc_of(h) == dc && will_hold(r, h, v, req.id)) return true;
  }
  return false;
}

// The same for a whole replica (choose_replica): every shard of one replica of req's
// datacenter serves v or will, for the shard of req's replica that reads it.
bool Core::seeded_replica_here(const Member& req, Version v, bool whole_only) const {
  const Model* md = model_of(req);
  if (!md) return false;
  const std::string& dc = dc_of(req);
  const Replica& mine = md->replicas.at(req.replica);
  for (const auto& [name, r] : md->replicas) {
    if (name == req.replica || r.num_shards != req.num_shards || static_cast<int>(r.shards.size()) != r.num_shards)
      continue;
    bool all = true;
    for (const auto& [s, id] : r.shards) {
      const Member& h = members_.at(id);
      auto rq = mine.shards.find(s);
      all = dc_of(h) == dc && (whole_only ? serves_offload(h, v) || (h.buf == Buf::kHolding && h.version == v)
                                          : will_hold(r, h, v, rq == mine.shards.end() ? MemberId{0} : rq->second));
      if (!all) break;
    }
    if (all) return true;
  }
  return false;
}

// Offload seeding: a seed buffer carries v across only where it would be the seeder, and
// only with seeding and smart skipping (without skipping, the datacenter's updates would
// read behind it at the WAN's pace, and nothing is gained for the memory).
std::string Core::nothing_to_seed(const Member& req, Version v, Version newer_than) const {
  const std::string dc = "datacenter " + dc_of(req);
  if (!cfg_.seeding || !cfg_.skipping)
    return "offload seeding needs the registry's seeding and smart_skipping: nothing seeded";
  if (seeded_replica_here(req, v))
    return "version " + std::to_string(v) + " is in " + dc + " or on its way: nothing to seed";
  if (skip_to_local(req, v, newer_than, /*in_place=*/false) != v)
    return "an older version is on its way to " + dc + " (smart skipping): nothing to seed";
  return "";
}

// The versions between newer_than and v that a replica of req's datacenter holds or
// receives are candidates; one that a whole replica there will hold but none holds whole
// yet is a seeding in flight. A replicate skips v only while one is, and takes the newest
// version its datacenter will hold (it reads behind the seeder). An update in place (which
// the rollout wants without a stall) takes the newest version its datacenter holds whole,
// else none (-1: THUB_NOT_UPDATED) while a seeding is in flight, else v: the replica that
// asks then is the datacenter's seeder of v.
Version Core::skip_to_local(const Member& req, Version v, Version newer_than, bool in_place) const {
  if (!cfg_.seeding || !cfg_.skipping) return v;
  const Model* md = model_of(req);
  if (!md) return v;
  // v itself on its way here: a replicate reads it behind the seeder; an update in place
  // does not wait at the WAN's pace for it (the paper's smart skipping: a version being
  // seeded is not available yet), it takes what is whole here or keeps what it has.
  bool in_flight = false;
  if (seeded_replica_here(req, v)) {
    if (!in_place || seeded_replica_here(req, v, /*whole_only=*/true)) return v;
    in_flight = true;
  }
  const std::string& dc = dc_of(req);
  std::set<Version> near;
  for (const auto& [name, r] : md->replicas) {
    if (name == req.replica || r.num_shards != req.num_shards) continue;
    for (const auto& [s, id] : r.shards) {
      const Member& h = members_.at(id);
      if (dc_of(h) != dc) break;
      if (h.buf != Buf::kEmpty && h.version > newer_than && h.version < v) near.insert(h.version);
      for (const auto& [u, c] : h.offloaded)
        if (u > newer_than && u < v) near.insert(u);
    }
  }
  Version will = -1, whole = -1;
  for (auto it = near.rbegin(); it != near.rend(); ++it) {
    if (!seeded_replica_here(req, *it)) continue;
    if (will < 0) will = *it;
    if (seeded_replica_here(req, *it, /*whole_only=*/true)) {
      if (whole < 0) whole = *it;
    } else {
      in_flight = true;
    }
  }
  if (in_place) return whole >= 0 ? whole : in_flight ? -1 : v;
  return in_flight ? will : v;
}

}  // namespace thub::sched::detail
