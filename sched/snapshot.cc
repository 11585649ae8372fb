// The introspection query: the registry's models, holders and leases as values (snapshot.h).
// Const all the way: it reads the state and changes nothing. Holders are gathered as
// references, ordered and cut to the limits before any name is copied, so that a request
// costs the registry what it returns, not a copy of everything.
#include <algorithm>

#include "sched/core.h"

namespace thub::sched {

const char* holding_name(Holding h) {
  switch (h) {
    case Holding::kComplete: return "complete";
    case Holding::kPartial: return "partial";
    case Holding::kDraining: return "draining";
    case Holding::kOffloading: return "offloading";
    case Holding::kHostCopy: return "host-copy";
    case Holding::kHostDropping: return "host-copy-dropping";
  }
  return "?";
}

namespace detail {
namespace {

Holding holding_of(Buf b) {
  switch (b) {
    case Buf::kReceiving: return Holding::kPartial;
    case Buf::kDraining: return Holding::kDraining;
    case Buf::kOffloading: return Holding::kOffloading;
    default: return Holding::kComplete;
  }
}

struct HolderRef {
  uint32_t model;
  Version version;
  const Member* m;
  Holding state;
  bool operator<(const HolderRef& o) const {
    if (model != o.model) return model < o.model;
    if (version != o.version) return version > o.version;  // newest first
    if (m->shard != o.m->shard) return m->shard < o.m->shard;
    if (m->replica != o.m->replica) return m->replica < o.m->replica;
    return state < o.state;
  }
};

}  // namespace

Snapshot Core::snapshot(const SnapshotLimits& limits) const {
  Snapshot s;
  s.now = now_;
  s.clients = clients_.size();
  s.members = members_.size();
  s.leases = leases_.size();
  s.waiting = pending_.size();
  s.models_total = models_.size();

  std::map<std::string, uint32_t> index_of;  // model name -> index in s.models
  std::vector<HolderRef> refs;
  for (const auto& [name, md] : models_) {
    if (s.models.size() >= limits.max_models) break;
    auto at = static_cast<uint32_t>(s.models.size());
    index_of.emplace(name, at);
    ModelView mv;
    mv.name = name;
    mv.retain = retain_of(name);
    mv.versions_published = md.published.size();
    mv.latest = md.published.empty() ? -1 : *md.published.rbegin();
    for (auto it = md.published.rbegin(); it != md.published.rend(); ++it) {
      if (!retained(name, *it)) break;  // the retained window is the newest `retain`
      mv.retained.push_back(*it);
    }
    for (const auto& [rname, r] : md.replicas) {
      for (const auto& [shard, id] : r.shards) {
        const Member& m = members_.at(id);
        ++mv.members;
        if (m.buf != Buf::kEmpty) refs.push_back({at, m.version, &m, holding_of(m.buf)});
        for (const auto& [v, c] : m.offloaded)
          refs.push_back({at, v, &m, c.dropping ? Holding::kHostDropping : Holding::kHostCopy});
      }
    }
    s.models.push_back(std::move(mv));
  }
  // Holders of models left out are not counted: the model's absence already says so.
  s.holders_total = refs.size();
  std::sort(refs.begin(), refs.end());
  if (refs.size() > limits.max_holders) refs.resize(limits.max_holders);
  for (const HolderRef& r : refs) {
    HolderView h;
    h.model = r.model;
    h.version = r.version;
    h.shard = r.m->shard;
    h.num_shards = r.m->num_shards;
    h.replica = r.m->replica;
    h.member = r.m->id;
    h.client = r.m->client;
    h.state = r.state;
    h.spot = r.m->spot;
    h.load = load(r.m->id);
    if (r.state == Holding::kPartial) {
      h.bytes_reported = r.m->bytes_reported;
      h.reported_at = r.m->reported_at;
    }
    s.holders.push_back(std::move(h));
  }

  s.transfers_total = leases_.size();
  for (const auto& [id, l] : leases_) {
    if (s.transfers.size() >= limits.max_transfers) break;
    TransferView t;
    t.lease = id;
    t.version = l.version;
    t.source = l.source;
    t.reader = l.reader;
    t.from_host_copy = l.from_offload;
    t.path = l.path;
    t.orphan = l.orphan_until > 0;
    t.granted_at = l.granted_at;
    auto model_index = [&](const Member& m) {
      auto it = index_of.find(m.model);
      return it == index_of.end() ? TransferView::kNoModel : it->second;
    };
    if (auto it = members_.find(l.source); it != members_.end()) {
      const Member& m = it->second;
      t.source_replica = m.replica;
      t.source_shard = m.shard;
      t.source_partial = !l.from_offload && m.buf == Buf::kReceiving;
      t.model = model_index(m);
    }
    if (auto it = members_.find(l.reader); it != members_.end()) {
      const Member& m = it->second;
      t.reader_replica = m.replica;
      t.reader_shard = m.shard;
      t.bytes_reported = m.bytes_reported;
      t.reported_at = m.reported_at;
      t.model = model_index(m);
    }
    s.transfers.push_back(std::move(t));
  }
  s.truncated = s.models.size() < s.models_total || s.holders.size() < s.holders_total ||
                s.transfers.size() < s.transfers_total;
  return s;
}

}  // namespace detail
}  // namespace thub::sched
