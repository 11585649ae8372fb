// Clients and members: connect, heartbeat deadlines, open/close, publish/unpublish, and
// what a crash or a missed deadline removes.
#include <algorithm>

#include "sched/core.h"

namespace thub::sched::detail {

void Core::touch(ClientId c) {
  auto it = clients_.find(c);
  // Touched already at this time (a request is touched before and after its deadlines are
  // checked): nothing to move.
  if (it == clients_.end() || it->second.last_seen == now_) return;
  deadlines_.erase({it->second.last_seen, c});
  it->second.last_seen = now_;
  deadlines_.insert({now_, c});
}

bool Core::expire() {
  bool changed = false;
  while (!deadlines_.empty()) {
    auto [seen, c] = *deadlines_.begin();
    if (now_ - seen <= cfg_.heartbeat_timeout) break;
    out_.emplace_back(Drop{c});
    remove_client(c, /*orphan_reads=*/true);
    changed = true;
  }
  changed = expire_stalled_leases() || changed;
  return expire_orphans() || changed;
}

bool Core::expire_orphans() {
  bool changed = false;
  while (!orphans_.empty() && orphans_.begin()->first <= now_) {
    LeaseId l = orphans_.begin()->second;
    orphans_.erase(orphans_.begin());
    end_lease(l);
    changed = true;
  }
  return changed;
}

// ---- lease progress (Config::lease_progress_timeout)

void Core::on(const TransferProgress& e) {
  Member* m = owned(e.client, e.req, e.member);
  if (!m) return;
  Lease* lp = reading(e.client, e.req, *m, e.lease, /*active_only=*/true);
  if (!lp) return;
  Lease& l = *lp;
  if (!e.path.empty()) l.path = e.path;
  if (e.bytes > l.progress_bytes) {  // only more bytes are progress
    progress_.erase({l.progress_at, l.id});
    l.progress_at = now_;
    l.progress_bytes = e.bytes;
    progress_.insert({l.progress_at, l.id});
  }
  reply(make_reply(e.client, e.req));
}

bool Core::expire_stalled_leases() {
  if (cfg_.lease_progress_timeout <= 0) return false;
  bool changed = false;
  while (!progress_.empty() && now_ - progress_.begin()->first >= cfg_.lease_progress_timeout) {
    const LeaseId id = progress_.begin()->second;
    const ClientId c = leases_.at(id).reader_client;
    out_.emplace_back(Drop{c, "made no progress on read " + std::to_string(id) + " for lease_progress_timeout (" +
                                  std::to_string(cfg_.lease_progress_timeout / 1000) + " ms)"});
    remove_client(c);                      // its leases (this one among them) end now
    if (leases_.count(id)) end_lease(id);  // and so does this one, whatever else it was
    changed = true;
  }
  return changed;
}

bool Core::expire_grace() {
  if (grace_over_ || first_open_ < 0 || cfg_.takeover_grace <= 0 || in_takeover_grace()) return false;
  grace_over_ = true;
  return true;
}

bool Core::known_client(ClientId c, RequestId req) {
  if (clients_.count(c)) return true;
  Reply r = make_reply(c, req);
  r.status = Status::kState;
  r.detail = "unknown client: connect first";
  out_.emplace_back(std::move(r));  // not cached: there is no client record to hold it
  return false;
}

Member* Core::owned(ClientId c, RequestId req, MemberId id) {
  auto it = members_.find(id);
  if (it == members_.end() || it->second.client != c) {
    reply_err(c, req, Status::kArg, "member " + std::to_string(id) + " is not open by this client");
    return nullptr;
  }
  return &it->second;
}

Lease* Core::reading(ClientId c, RequestId req, const Member& m, LeaseId lease, bool active_only) {
  auto it = leases_.find(lease);
  if (it == leases_.end() || it->second.reader != m.id || (active_only && it->second.orphan_until)) {
    reply_err(c, req, Status::kState, "lease " + std::to_string(lease) + " is not active (cancelled or finished)");
    return nullptr;
  }
  return &it->second;
}

void Core::on(const Connect& e) {
  auto [it, fresh] = clients_.try_emplace(e.client);
  it->second.datacenter = e.datacenter;
  if (!fresh) deadlines_.erase({it->second.last_seen, e.client});
  it->second.last_seen = now_;
  deadlines_.insert({now_, e.client});
}

void Core::on(const Disconnect& e) { remove_client(e.client); }

void Core::remove_client(ClientId c, bool orphan_reads) {
  auto it = clients_.find(c);
  if (it == clients_.end()) return;
  deadlines_.erase({it->second.last_seen, c});
  std::set<MemberId> members = it->second.members;
  // Its deferred requests are discarded (nobody is left to answer).
  // (A request is its member's client's: owned().)
  for (MemberId m : members) undefer_member(m);
  // All its holdings go first: forgetting one member ends leases, and a drain that ends
  // then decides retention, which must not count the client's other copies any more.
  for (MemberId m : members) hide_leaving(members_.at(m));
  for (MemberId m : members) forget_member(m, orphan_reads);
  clients_.erase(c);
}

void Core::hide_leaving(Member& m) {
  unindex(m);
  m.leaving = true;
}

// A forgotten member's cached answers join those of its client's requests of no member (a
// retry of its Close, or of what came just before, is still answered the same).
void Core::forget_recent(ClientId client, MemberId id) {
  auto cit = clients_.find(client);
  if (cit == clients_.end()) return;
  Client& c = cit->second;
  auto q = c.recent_by_member.find(id);
  if (q == c.recent_by_member.end()) return;
  std::deque<RequestId>& rest = c.recent_by_member[0];
  rest.insert(rest.end(), q->second.begin(), q->second.end());
  c.recent_by_member.erase(q);
  while (rest.size() > kRecentPerClient) {
    c.recent.erase(rest.front());
    rest.pop_front();
  }
}

void Core::forget_member(MemberId id, bool orphan_reads) {
  auto it = members_.find(id);
  if (it == members_.end()) return;
  Member& m = it->second;
  hide_leaving(m);  // before its own lease ends (that may end a drain: see remove_client)
  undefer_member(id);
  forget_recent(m.client, id);
  // Chosen while m's own lease still says where it read from; held once that lease has
  // freed the slot (below), so the count never passes max_readers_per_source.
  auto splice = splice_candidate(m);
  // A seed's lease (Lease::seed) held no slot of its source: none is freed to hand on (the
  // reader's regrant across is a seed too, and takes none either).
  if (splice && m.own_lease && leases_.count(m.own_lease) && leases_.at(m.own_lease).seed) splice.reset();
  release_held(m);        // as a reader (a dropped one's lease turns orphan: no end_lease)
  release_held_on(id);    // as a source (its held readers were candidates above)
  if (orphan_reads && m.own_lease && leases_.count(m.own_lease)) {
    // It may still be reading: the source stays loaded and undrained until the grace ends.
    Lease& l = leases_.at(m.own_lease);
    if (!l.orphan_until && !l.seed) add_load(l.source, -1);  // an orphan holds no reader slot (load())
    l.orphan_until = now_ + cfg_.heartbeat_timeout;
    progress_.erase({l.progress_at, l.id});  // an orphan's own deadline ends it
    orphans_.insert({l.orphan_until, l.id});
    m.own_lease = 0;
    chains_changed();
  }
  cancel_own_lease(m);
  if (splice) hold_slot(members_.at(splice->first), splice->second);
  // Leases where it is the source stay counted until their readers report SourceFailed;
  // reserved transaction slots on it are given up (the joining shard gets another source).
  for (auto& [rname, r] : models_.at(m.model).replicas)
    for (auto& [round, t] : r.txns)
      for (const auto& [shard, src] : t.reserved)
        if (src == id) {
          const int s = shard;  // unreserve erases the node that `shard` refers to
          unreserve(t, s);
          t.reserved[s] = 0;
          break;
        }
  leave_active(m);
  leave_transaction(m);
  suspects_.erase(suspects_.lower_bound({id, false, INT64_MIN}),
                  suspects_.upper_bound({id, true, INT64_MAX}));
  std::string model = m.model;
  Model& md = models_.at(model);
  Replica& r = md.replicas.at(m.replica);
  r.shards.erase(m.shard);
  r.refused.erase(m.shard);
  if (r.shards.empty()) {
    // Its open rounds go with it: the slots they kept on sources (and the drains those
    // held) are freed, and nobody is owed a held answer any more.
    for (auto& [round, t] : r.txns) {
      for (auto rs = t.reserved.begin(); rs != t.reserved.end();) unreserve(t, (rs++)->first);
      for (const auto& [sh, hd] : t.done) held_reqs_.erase({hd.client, hd.req});
    }
    md.replicas.erase(m.replica);
  }
  md.retains.erase(md.retains.find(m.retain));
  clients_.at(m.client).members.erase(id);
  unstore(m.client, stored_by(m));
  members_.erase(it);
  ++member_changes_;
  chains_changed();
  maybe_erase_model(model);
  if (models_.count(model)) sweep_retention(model);
}

// Only a member that was itself reading (partial, a chain's middle) is spliced around: its
// source P is ahead of its readers. With max_readers_per_source > 1 only one slot is freed,
// so one reader gets it: one already held on the gone member (it was spliced once and P
// took its place), else the oldest lease. The reader must still be reading the gone
// member's version through that lease, not be leaving (its client may be the one going),
// and not have reported P in this transfer (it would refuse it). P must not be leaving. No
// datacenter rule: P is the place the gone member had in the chain, so a stream that
// crossed datacenters crosses them once still.
std::optional<std::pair<MemberId, MemberId>> Core::splice_candidate(const Member& gone) const {
  auto own = leases_.find(gone.own_lease);
  if (own == leases_.end() || own->second.orphan_until) return std::nullopt;
  const Lease& up = own->second;
  auto pit = members_.find(up.source);
  if (pit == members_.end() || pit->second.leaving) return std::nullopt;
  auto fits = [&](MemberId rid, LeaseId via) {
    auto rit = members_.find(rid);
    if (rit == members_.end() || rid == up.source) return false;
    const Member& r = rit->second;
    if (r.leaving || r.buf != Buf::kReceiving || r.version != up.version || r.shunned.count(up.source))
      return false;
    return via == 0 || (r.own_lease == via && r.held_slot == 0);
  };
  if (auto h = held_slots_.find(gone.id); h != held_slots_.end())
    for (MemberId rid : h->second)
      if (fits(rid, 0)) return std::make_pair(rid, up.source);
  if (auto rd = leases_by_source_.find(gone.id); rd != leases_by_source_.end())
    for (LeaseId lid : rd->second) {  // ascending: the oldest lease first
      const Lease& l = leases_.at(lid);
      if (l.orphan_until || l.from_offload || l.version != up.version) continue;
      if (fits(l.reader, lid)) return std::make_pair(l.reader, up.source);
    }
  return std::nullopt;
}

void Core::hold_slot(Member& reader, MemberId source) {
  reader.held_slot = source;
  held_slots_[source].insert(reader.id);
  add_load(source, 1);
}

void Core::release_held(Member& reader) {
  if (!reader.held_slot) return;
  auto h = held_slots_.find(reader.held_slot);
  h->second.erase(reader.id);
  if (h->second.empty()) held_slots_.erase(h);
  add_load(reader.held_slot, -1);
  reader.held_slot = 0;
}

void Core::release_held_on(MemberId source) {
  auto h = held_slots_.find(source);
  if (h == held_slots_.end()) return;
  std::set<MemberId> readers = h->second;
  for (MemberId rid : readers) release_held(members_.at(rid));
}

void Core::on(const Open& e) { open(e, /*wait=*/true); }

// The Opens that wait for another session's shard (open()), in arrival order: each goes on
// once the shard is free, or is refused once its wait ended; one whose client went is
// forgotten. True if one was answered.
bool Core::release_opens() {
  bool any = false;
  for (size_t i = 0; i < opening_.size();) {
    const Opening& o = opening_[i];
    const bool gone = !clients_.count(o.e.client);
    if (!gone && now_ < o.until && shard_taken(o.e)) {
      ++i;
      continue;
    }
    const Open e = o.e;
    opening_.erase(opening_.begin() + static_cast<std::ptrdiff_t>(i));
    held_reqs_.erase({e.client, e.req});
    if (!gone) {
      open(e, /*wait=*/false);
      any = true;
    }
  }
  return any;
}

bool Core::shard_taken(const Open& e) const {
  auto mit = models_.find(e.model);
  if (mit == models_.end()) return false;
  auto rit = mit->second.replicas.find(e.replica);
  return rit != mit->second.replicas.end() && rit->second.shards.count(e.shard);
}

void Core::open(const Open& e, bool wait) {
  if (e.model.empty() || e.replica.empty() || e.num_shards < 1 || e.shard < 0 ||
      e.shard >= e.num_shards || e.retain < 0)
    return reply_err(e.client, e.req, Status::kArg,
                     "bad open: model and replica must be named, 0 <= shard < num_shards");
  if (first_open_ < 0) first_open_ = now_;
  auto mit = models_.find(e.model);
  if (mit != models_.end()) {
    auto rit = mit->second.replicas.find(e.replica);
    if (rit != mit->second.replicas.end()) {
      if (auto sh = rit->second.shards.find(e.shard); sh != rit->second.shards.end()) {
        // Another session's: it may be this process's own before a reconnection, which the
        // registry has not dropped yet (it goes within heartbeat_timeout once it is silent).
        // The Open waits that long for it (release_opens()); then it is refused.
        // (At most kMaxWaitingOpens of one client wait: a peer cannot pile them up.)
        const auto waiting = std::count_if(opening_.begin(), opening_.end(),
                                           [&](const Opening& o) { return o.e.client == e.client; });
        if (wait && members_.at(sh->second).client != e.client && waiting < kMaxWaitingOpens) {
          opening_.push_back({e, now_ + cfg_.heartbeat_timeout});
          held_reqs_.insert({e.client, e.req});
          quiet_ = true;  // nothing changed that another request waits for
          return;
        }
        return reply_err(e.client, e.req, Status::kState,
                         "shard " + std::to_string(e.shard) + " of replica " + e.replica +
                             " is already open");
      }
      if (rit->second.num_shards != e.num_shards)
        return reply_err(e.client, e.req, Status::kState,
                         "replica " + e.replica + " has " +
                             std::to_string(rit->second.num_shards) + " shards");
    }
  }
  Member m;
  m.id = next_member_++;
  m.client = e.client;
  m.model = e.model;
  m.replica = e.replica;
  m.shard = e.shard;
  m.num_shards = e.num_shards;
  m.retain = e.retain;
  m.spot = e.spot;
  models_[e.model].retains.insert(e.retain);
  Replica& r = models_[e.model].replicas[e.replica];
  r.num_shards = e.num_shards;
  r.shards[e.shard] = m.id;
  m.rep = &r;
  clients_.at(e.client).members.insert(m.id);
  MemberId id = m.id;
  members_.emplace(id, std::move(m));
  ++member_changes_;
  chains_changed();
  take_round_report(members_.at(id), e.round, e.round_open, e.round_status, e.round_version, e.round_spec,
                    e.round_newer_than);
  Reply rep = make_reply(e.client, e.req);
  rep.member = id;
  reply(std::move(rep));
}

void Core::on(const Close& e) {
  if (!owned(e.client, e.req, e.member)) return;
  forget_member(e.member);
  reply(make_reply(e.client, e.req));
}

void Core::on(const Publish& e) {
  Member* m = owned(e.client, e.req, e.member);
  if (!m) return;
  if (e.version < 0)
    return reply_err(e.client, e.req, Status::kArg, "publish needs an absolute version >= 0");
  if (m->buf != Buf::kEmpty)
    return reply_err(e.client, e.req, Status::kState,
                     std::string("member is ") + buf_name(m->buf) + " version " +
                         std::to_string(m->version) + ": unpublish first");
  Model& md = *model_of(*m);
  auto [lit, fresh] = md.layout.try_emplace(m->shard, e.layout_hash);
  if (!fresh && lit->second != e.layout_hash)
    return reply_err(e.client, e.req, Status::kLayout,
                     "layout of shard " + std::to_string(m->shard) + " differs from model " +
                         m->model + "'s");
  if (std::string why = refused_descriptor(e.client, m->descriptor, e.descriptor); !why.empty())
    return reply_err(e.client, e.req, Status::kArg, "publish: " + why);
  unindex(*m);
  m->buf = Buf::kHolding;
  chains_changed();
  m->version = e.version;
  store(e.client, m->descriptor, e.descriptor);
  index(*m);
  bool is_new = md.published.insert(e.version).second;
  reply(make_reply(e.client, e.req));
  if (is_new) sweep_retention(m->model);
}

void Core::on(const Unpublish& e) {
  Member* m = owned(e.client, e.req, e.member);
  if (!m) return;
  // Whoever unpublishes has stopped reading: also a member that a reader reported failed
  // (draining or emptied while its own transfer went on) ends its own read here, else its
  // source would never drain.
  if (m->buf != Buf::kReceiving) cancel_own_lease(*m);
  // A shard that gives up its round's transfer (a local failure, a grant that crossed its
  // cancel or deadline, or buffers a reader reported failed) fails the round on every shard:
  // none commits without it. One that unpublishes while its update in place still waits for
  // its drain leaves the round (the others go on).
  Transaction* rt = round_of(*m);
  bool updating = false;
  if (PendingIt pit = first_pending(m->id); pit != pending_.end()) updating = pit->second.in_place;
  const bool gave_up = rt && rt->status == Status::kOk && rt->active.count(m->shard) && !updating;
  const std::string why = "a shard of this replica gave up its transfer of the round's version";
  if (m->buf == Buf::kEmpty || m->unpublish_pending) {
    if (gave_up)
      lose_round(*m, nullptr, Status::kTransport, why);
    else if (m->buf == Buf::kEmpty)
      leave_active(*m);
    return reply_err(e.client, e.req, Status::kState,
                     m->buf == Buf::kEmpty ? "nothing published" : "already unpublishing");
  }
  if (!gave_up) leave_active(*m);
  if (m->buf == Buf::kReceiving) {
    cancel_own_lease(*m);  // its transfer is abandoned; readers chained on it must drain
    leave_transaction(*m);
  }
  // An update in place still waiting for its drain is abandoned: the member is unpublished.
  if (auto bm = pending_by_member_.find(m->id); bm != pending_by_member_.end())
    for (uint64_t seq : bm->second)
      if (PendingIt it = pending_.find(seq); it->second.kind == Pending::Kind::kReplicate) {
        reply_err(it->second.client, it->second.req, Status::kState, "unpublished while updating");
        undefer(it);  // bm->second changed: stop here
        break;
      }
  m->unpublish_pending = true;
  m->unpublish_req = e.req;
  if (gave_up) lose_round(*m, nullptr, Status::kTransport, why);
  if (m->buf == Buf::kOffloading) return;  // the update's offload goes on; acked after the drain
  m->intact = m->intact || m->buf == Buf::kHolding;
  chains_changed();
  if (m->buf == Buf::kHolding && needs_offload(*m)) {
    unindex(*m);
    m->buf = Buf::kOffloading;
    index(*m);  // its host copies of other versions still serve
    out_.emplace_back(Offload{m->client, m->id, m->version});
    return;
  }
  begin_drain(*m);
}

}  // namespace thub::sched::detail
