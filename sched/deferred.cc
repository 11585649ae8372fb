// The deferred requests' bookkeeping. wake() (transaction.cc) retries them in arrival order
// after each step that may let one proceed; with thousands waiting in a fan-out, visiting
// every one per step made the registry's work per version superlinear (docs/scale.md). So
// besides their arrival order they are indexed by what they wait for: a Replicate of a
// replica that holds nothing and has no transaction waits for the model's state alone, the
// same for every request of its key (waits_for_model_only), and wake() visits such requests
// through their key's queue only while the key is not known to wait; every other request
// is in exposed_, which wake() always visits. Nothing here decides anything: the requests
// wake() tries, and their order, are those it tried before (docs/sched.md).
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "sched/core.h"

namespace thub::sched::detail {

void Core::defer(Pending p) {
  p.seq = next_seq_++;
  p.keyed = p.kind == Pending::Kind::kReplicate && !p.in_place;
  if (p.keyed) {
    const Member& m = members_.at(p.member);
    p.key = deferred_keys_.try_emplace({m.model, m.num_shards, p.spec, p.newer_than, dc_of(m), p.seed_only}).first;
    p.key->second.seqs.insert(p.seq);
  }
  // Exposed until a visit finds it waiting for the model alone (a superset is always safe).
  exposed_.insert(p.seq);
  pending_by_member_[p.member].insert(p.seq);
  pending_reqs_.insert({p.client, p.req});
  pending_.emplace(p.seq, std::move(p));
}

Core::PendingIt Core::undefer(PendingIt it) {
  const Pending& p = it->second;
  if (p.keyed) {
    p.key->second.seqs.erase(p.seq);
    if (p.key->second.seqs.empty()) deferred_keys_.erase(p.key);
  }
  exposed_.erase(p.seq);
  if (auto bm = pending_by_member_.find(p.member); bm != pending_by_member_.end()) {
    bm->second.erase(p.seq);
    if (bm->second.empty()) pending_by_member_.erase(bm);
  }
  if (auto rq = pending_reqs_.find({p.client, p.req}); rq != pending_reqs_.end()) pending_reqs_.erase(rq);
  return pending_.erase(it);
}

void Core::undefer_member(MemberId m) {
  for (PendingIt it = first_pending(m); it != pending_.end(); it = first_pending(m)) undefer(it);
}

bool Core::has_pending(MemberId m) const { return pending_by_member_.count(m) > 0; }

Core::PendingIt Core::first_pending(MemberId m) {
  auto bm = pending_by_member_.find(m);
  return bm == pending_by_member_.end() ? pending_.end() : pending_.find(*bm->second.begin());
}

bool Core::has_pending(ClientId c, RequestId req) const { return pending_reqs_.count({c, req}) > 0; }

// Called where a replica may stop waiting for the model alone: a transaction starts
// (start_transaction) or a shard's buffers or host copies change (index(), which every such
// change ends with). A member has at most a request or two deferred, so this is cheap.
void Core::expose(const Replica& r) {
  for (const auto& [s, id] : r.shards)
    if (auto bm = pending_by_member_.find(id); bm != pending_by_member_.end())
      exposed_.insert(bm->second.begin(), bm->second.end());
}

void Core::check_skipped(uint64_t from, uint64_t to, uint64_t answered) const {
  for (auto it = pending_.upper_bound(from); it != pending_.end() && it->first < to; ++it) {
    const Pending& q = it->second;
    auto mit = members_.find(q.member);
    bool skip = mit != members_.end() && waits_for_model_only(q, mit->second) &&
                q.key->second.blocked_wake == wakes_ && q.key->second.blocked_at == answered;
    if (!skip) {
      std::fprintf(stderr, "wake() skipped request %llu of member %llu, which it should have tried\n",
                   static_cast<unsigned long long>(it->first), static_cast<unsigned long long>(q.member));
      std::abort();
    }
  }
}

std::string Core::check_deferred() const {
  std::ostringstream err;
  size_t keyed = 0;
  std::multiset<std::pair<ClientId, RequestId>> reqs;
  std::map<MemberId, std::set<uint64_t>> by_member;
  for (const auto& [seq, p] : pending_) {
    if (p.seq != seq) err << "pending request " << seq << " has seq " << p.seq << "\n";
    reqs.insert({p.client, p.req});
    by_member[p.member].insert(seq);
    auto mit = members_.find(p.member);
    if (mit == members_.end()) continue;  // reported by check_invariants()
    const Member& m = mit->second;
    bool has_key = p.kind == Pending::Kind::kReplicate && !p.in_place;
    auto kit = deferred_keys_.find({m.model, m.num_shards, p.spec, p.newer_than, dc_of(m), p.seed_only});
    if (has_key) {
      ++keyed;
      if (!p.keyed || kit == deferred_keys_.end() || kit != p.key || !kit->second.seqs.count(seq))
        err << "pending request " << seq << " is not in its key's queue\n";
    } else if (p.keyed) {
      err << "pending request " << seq << " has a key\n";
    }
    // Not exposed: it must wait for the model alone (what waits_for_model_only computes).
    if (exposed_.count(seq)) continue;
    bool only = has_key && m.rep && m.rep->txns.empty();
    if (only)
      for (const auto& [s, id] : m.rep->shards) {
        const Member& x = members_.at(id);
        only = only && x.buf == Buf::kEmpty && x.offloaded.empty();
      }
    if (!only) err << "pending request " << seq << " of member " << p.member << " is not exposed\n";
  }
  size_t in_keys = 0;
  for (const auto& [k, dk] : deferred_keys_) {
    in_keys += dk.seqs.size();
    if (dk.seqs.empty()) err << "an empty key queue is kept\n";
  }
  if (in_keys != keyed) err << "the key queues hold " << in_keys << " requests, not " << keyed << "\n";
  for (uint64_t seq : exposed_)
    if (!pending_.count(seq)) err << "exposed request " << seq << " is not pending\n";
  if (reqs != pending_reqs_) err << "pending_reqs_ differs from the pending requests\n";
  std::map<MemberId, std::set<uint64_t>> kept(pending_by_member_.begin(), pending_by_member_.end());
  if (by_member != kept) err << "pending_by_member_ differs from the pending requests\n";
  return err.str();
}

}  // namespace thub::sched::detail
