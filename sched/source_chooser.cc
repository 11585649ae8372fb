// Source choice: among the replicas that serve the version in every shard, prefer the
// requester's datacenter, then the least loaded, then complete over partial, then the
// oldest member (smallest id; deterministic). A source serves at most max_readers_per_source
// readers; partial sources whose chain leads back to the requester, or no longer ends at a
// complete holder, are never chosen.
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
    if (best && !(Key{clients_.at(cand.client).datacenter != dc, load_sum, partial} < best_key)) continue;
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
    Key key{clients_.at(cand.client).datacenter != dc, load_sum, partial};
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
  std::optional<SourcePick> best;
  Key best_key;
  for (MemberId id : hit->second) {
    const Member& cand = members_.at(id);
    if (cand.shard != req.shard || cand.num_shards != req.num_shards) continue;
    if (req.shunned.count(id)) continue;  // it reported this one during this transfer
    auto pick = pick_in(cand, v, req.id);
    if (!pick) continue;
    Key key{clients_.at(cand.client).datacenter != dc, load(id), pick->partial};
    if (!best || key < best_key) {  // ids ascend: the first of equals is the oldest member
      best = pick;
      best_key = key;
      if (key == kBest) break;
    }
  }
  return best;
}

}  // namespace thub::sched::detail
