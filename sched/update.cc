// THUB_Update in place: a member holding h asks for a version newer than h. In one step the
// registry checks that something newer can be served, hides the holding of h from new
// source choices, and defers the grant of the newer version until no lease reads the
// member's buffers any more (the drain of h); then it grants as for any Replicate.
#include "sched/core.h"

namespace thub::sched::detail {

void Core::begin_update(const Replicate& e, Member& m) {
  if (has_pending(m.id))
    return reply_err(e.client, e.req, Status::kState, "a replicate of this member is in progress");
  if (std::string why = refused_descriptor(e.client, m.descriptor, e.descriptor); !why.empty()) {
    leave_round(m, e.round);  // as any refusal before the round: its siblings do not wait for it
    return reply_err(e.client, e.req, Status::kArg, "update: " + why);
  }
  m.shunned.clear();  // a new transfer (if any): what the last one reported no longer applies
  Replica& r = models_.at(m.model).replicas.at(m.replica);
  Version v = -1;
  Status st = Status::kOk;
  std::string detail;
  bool release = false;
  enter_round(m, e.round);
  if (Transaction* tp = transaction(r, e.round)) {
    // The replica's shards share one answer: the first shard's version (or error).
    Transaction& t = *tp;
    if (t.joined.count(m.shard) && e.round == 0)
      return reply_err(e.client, e.req, Status::kState,
                       "the previous replicate of this replica has not finished in every shard");
    st = t.status;
    detail = t.detail;
    v = t.version;
    // In the round's transfer from its drain on; its reserved source stays kept for it.
    const bool commit = t.commit && !t.committed && st == Status::kOk && v > e.newer_than;
    // The round failed after a grant of it overwrote a sibling's holding: this shard gives h
    // up too (drained, then answered with the round's error, released: fail_replicate), so
    // that the shards hold the same after the round. In the round until then.
    release = t.commit && st != Status::kOk && round_overwritten(m, e.round);
    if (commit || release) {
      t.active.insert(m.shard);
      m.round = e.round;
    }
    finish_shard(r, e.round, m.shard, commit);
  } else {
    st = resolve(m, e.spec, &v, &detail);
    if (st == Status::kNotFound && e.spec < 0) {
      // No version is available in every shard (e.g. at a registry that just took over,
      // before this replica's other shards published their holdings again): nothing newer
      // than what this shard holds, which it keeps (THUB_NOT_UPDATED, as the header says).
      st = Status::kNotUpdated;
      v = e.newer_than;
      detail = "nothing newer than " + std::to_string(e.newer_than) + " is available (" + detail + ")";
    }
    if (st == Status::kOk && e.seed_only && v > e.newer_than) {
      // Offload seeding: a seed buffer moves on only as its datacenter's seeder.
      if (std::string why = nothing_to_seed(m, v, e.newer_than); !why.empty()) {
        st = Status::kNotUpdated;
        detail = std::move(why);
        v = e.newer_than;
      }
    } else if (st == Status::kOk && e.spec < 0 && v > e.newer_than) {
      // Smart skipping: its datacenter receives an older version; nothing crosses meanwhile.
      // It takes the newest version held whole there, or none while one is on its way.
      if (Version local = skip_to_local(m, v, e.newer_than, /*in_place=*/true); local >= 0) {
        v = local;
      } else {
        st = Status::kNotUpdated;
        detail = "version " + std::to_string(v) + " is not in this datacenter yet, and an older one is on its way (smart skipping)";
        v = e.newer_than;
      }
    }
    if (st == Status::kOk && v > e.newer_than && !replica_will_serve(m, v)) {
      // As a replicate (transaction.cc): a relative spec takes the newest version that stays.
      if (Version older = e.spec < 0 ? older_servable(m, v, e.newer_than) : -1; older >= 0) {
        v = older;
      } else {
        st = Status::kVersionLost;
        detail = "every holder of version " + std::to_string(v) + " of model " + m.model + " is gone";
      }
    }
    if (m.num_shards > 1) {
      Transaction t;  // fixes the version for the other shards; the source comes later
      t.round = e.round;
      t.status = st == Status::kOk && v <= e.newer_than ? Status::kNotUpdated : st;
      t.detail = detail;
      t.version = v;
      t.commit = e.round > 0 && t.status == Status::kOk;
      t.spec = e.spec;
      t.newer_than = e.newer_than;
      if (cfg_.round_hold > 0) t.hold_until = now_ + cfg_.round_hold;
      // A source replica free now is kept for every shard (each takes it once its own old
      // holding has drained); without one, each shard chooses its own then.
      std::optional<std::string> src;
      if (t.commit) src = choose_replica(m, v);
      if (src) t.source_replica = *src;
      start_transaction(r, std::move(t));
      Transaction& opened = *transaction(r, e.round);
      if (src) {
        const Replica& sr = models_.at(m.model).replicas.at(*src);
        for (int s = 0; s < m.num_shards; ++s)
          if (s == m.shard || !opened.joined.count(s)) reserve(opened, s, sr.shards.at(s));
      }
      if (opened.commit) {
        opened.active.insert(m.shard);
        m.round = e.round;
        round_ends_.insert({opened.hold_until, m.id, e.round});
      }
      finish_shard(r, e.round, m.shard, opened.commit);
    }
  }
  if (st == Status::kOk && v <= e.newer_than) {
    st = Status::kNotUpdated;
    detail = "nothing newer than " + std::to_string(e.newer_than);
  }
  if (st != Status::kOk && !release) return reply_err(e.client, e.req, st, detail);  // h stays served
  // Hide h now; its readers finish; retention may first want a host copy of h.
  const Version held = m.version;  // before the drain: an unread member is emptied at once
  store(e.client, m.descriptor, e.descriptor);
  // Hidden already (a reader's report of it was confirmed): it drains, and cannot be given
  // back. Its update goes on as any other (it used to be refused kState, alone in its round).
  const bool judged = m.buf == Buf::kDraining;
  if (!judged) {
    m.intact = true;
    chains_changed();
    if (needs_offload(m)) {
      unindex(m);
      m.buf = Buf::kOffloading;
      chains_changed();
      index(m);
      out_.emplace_back(Offload{m.client, m.id, m.version});
    } else {
      begin_drain(m);
    }
  }
  Pending p;
  p.kind = Pending::Kind::kReplicate;
  p.client = e.client;
  p.req = e.req;
  p.member = m.id;
  p.spec = v;  // absolute: every shard replicates the version fixed above
  p.newer_than = e.newer_than;
  p.in_place = true;
  p.asked = e.spec;
  p.restorable = !judged && !release;
  p.held = held;
  p.round = e.round;
  p.seed_only = e.seed_only;
  // Its datacenter waits for it from now (will_hold); not for the version of a failed round.
  if (e.seed_only && !release) m.seeding = v;
  defer(p);  // granted by wake() once the buffers are empty
}

// Whether a grant of round `round` of m's replica overwrote a shard other than m's.
bool Core::round_overwritten(const Member& m, uint64_t round) {
  if (round == 0 || m.num_shards < 2 || !m.rep) return false;
  const Transaction* t = transaction(*m.rep, round);
  if (!t) return false;
  for (int s : t->overwritten)
    if (s != m.shard) return true;
  return false;
}

// After the drain: the version was fixed for the whole replica when the update began; the
// source is chosen per member (the shards drain at different times, so one source replica
// cannot be reserved for all of them), as for a regrant.
bool Core::try_grant_update(const Pending& p, Member& m) {
  Version v = p.spec;
  if (Transaction* t = round_of(m)) {
    if (t->status != Status::kOk) {  // the round failed in another shard meanwhile
      const uint64_t round = t->round;
      t->active.erase(m.shard);
      m.round = 0;
      fail_replicate(p, m, t->status, t->detail);
      settle(*m.rep, round);
      return true;
    }
    v = t->version;  // a moved round's (lose_round changed p.spec too)
    // The source the round kept for this shard, if it still has it (even while it drains).
    if (auto rs = t->reserved.find(m.shard); rs != t->reserved.end()) {
      const MemberId src = rs->second;
      const bool held = t->holding.count(m.shard) > 0;
      unreserve(*t, m.shard);
      if (auto sit = members_.find(src); src && sit != members_.end()) {
        const Member& s = sit->second;
        std::optional<SourcePick> pick = pick_in(s, v, m.id);
        if (!pick && held && s.intact && s.version == v && (s.buf == Buf::kDraining || s.buf == Buf::kOffloading))
          pick = SourcePick{src, false, false};
        if (pick) {
          grant(p, m, v, *pick);
          return true;
        }
      }
    }
  }
  std::optional<SourcePick> pick = choose_member(m, v);
  if (auto inside = newer_inside(p, m, v, pick)) std::tie(v, pick) = *inside;
  if (pick) {
    grant(p, m, v, *pick);
    return true;
  }
  if (has_holder(m, v, m.shard) || waits_for_takeover(m, round_of(m), v)) return false;
  const std::string lost = "every holder of version " + std::to_string(v) + " of model " + m.model + " is gone";
  if (round_of(m)) {
    lose_round(m, &p, Status::kVersionLost, lost);
    return true;
  }
  fail_replicate(p, m, Status::kVersionLost, lost);
  return true;
}

// Smart skipping after the drain: the version of an update in place was fixed when it began,
// while a holder of its datacenter had it; if meanwhile every holder there unpublished it (a
// trainer moving on while the update waited for a slot or for its own drain), it would now
// read that version across the WAN, at the WAN's pace, and keep the replica it reads there
// from updating in place until it ends. With a relative spec (one shard: a round's version is
// every shard's) it takes instead the newest version it asked for that a source of its own
// datacenter serves whole and free now. Nothing (nullopt) where v's source is inside, or
// where a holder inside will serve v.
std::optional<std::pair<Version, SourcePick>> Core::newer_inside(const Pending& p, const Member& m, Version v,
                                                                 const std::optional<SourcePick>& pick) const {
  if (p.asked >= 0 || p.seed_only || !cfg_.seeding || !cfg_.skipping || m.num_shards > 1) return std::nullopt;
  const std::string& dc = dc_of(m);
  if (pick ? dc_of(members_.at(pick->member)) == dc : seeded_here(m, v)) return std::nullopt;
  Version newest = -1;
  std::string detail;
  const Model* md = model_of(m);
  if (!md || resolve(m, p.asked, &newest, &detail) != Status::kOk || newest <= v) return std::nullopt;
  for (auto it = std::make_reverse_iterator(md->holders.upper_bound(newest)); it != md->holders.rend(); ++it) {
    if (it->first <= v) break;
    std::optional<SourcePick> near = choose_member(m, it->first);
    if (near && !near->partial && dc_of(members_.at(near->member)) == dc) return std::make_pair(it->first, *near);
  }
  return std::nullopt;
}

// An error answer to a Replicate. An update in place whose version became unservable while
// h drained gets h back (its buffers were never overwritten), so that an error always means
// "still holding h", unless a reader reported h broken meanwhile.
void Core::fail_replicate(const Pending& p, Member& m, Status s, std::string detail) {
  if (p.in_place && m.buf == Buf::kEmpty && round_overwritten(m, p.round)) {
    // A shard of its round gave h up for the round's version (a grant overwrote it), which is
    // lost now: h is not served again here either, so that the replica's shards hold the
    // same after the round (nothing), and the next round asks the same of every shard.
    Reply r = make_reply(p.client, p.req);
    r.status = s;
    r.detail = std::move(detail) + "; holding nothing: a shard of round " + std::to_string(p.round) +
               " gave its version up for it";
    r.released = true;
    return reply(std::move(r));
  }
  if (p.in_place && p.restorable && m.buf == Buf::kEmpty) {
    unindex(m);
    m.buf = Buf::kHolding;
    chains_changed();
    m.version = p.held;
    index(m);
    detail += "; still holding version " + std::to_string(p.held);
  }
  reply_err(p.client, p.req, s, std::move(detail));
}

}  // namespace thub::sched::detail
