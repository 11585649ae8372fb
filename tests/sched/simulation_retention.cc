// Retention, as the outside view checks it: which versions a model retains (its members'
// `retain`, the versions published to this registry), the models and host copies the
// registry forgets, the last non-spot holder's unpublish (a host copy first), and
// kVersionLost only when nothing is left (simulation_checks.cc has the other checks).
#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>

#include "tests/sched/simulation_world.h"

namespace thub::sched::sim::detail {

int World::model_retain(const std::string& model, bool before_opens) const {
  int k = 0;
  for (const auto& [cid, ss] : sessions_) {
    const Actor& b = actor_of(ss);
    if (b.name != model) continue;
    for (const ShardView& t : ss.sh)
      if (t.id && !(before_opens && opened_now_.count(t.id))) k = std::max(k, b.retain);
  }
  return k;
}

// Host copies outside the retained window are dropped by the registry (for good).
bool World::retained_now(const std::string& model, Version v) const {
  int k = model_retain(model);
  auto pit = published_.find(model);
  if (pit == published_.end()) return false;
  int j = 0;
  for (auto it = pit->second.rbegin(); it != pit->second.rend() && j < k; ++it, ++j)
    if (*it == v) return true;
  return false;
}

// The registry forgets a model whose last member is forgotten (Close, client removal), and
// with it the versions published (a new job may start the numbers again): retention then
// counts only what is published after (seed 7859 with THUB_SIM_OFFLOAD_FAILURES=1: the view
// kept v7 of a forgotten model and dropped the host copy of the newest v6 that the registry
// rightly kept).
void World::forget_models() {
  for (auto it = published_.begin(); it != published_.end();) {
    bool open = false;
    for (const auto& [cid, ss] : sessions_)
      if (actor_of(ss).name == it->first)
        for (const ShardView& t : ss.sh) open = open || t.id != 0;
    it = open ? std::next(it) : published_.erase(it);
  }
}

void World::sweep_host_copies() {
  for (auto& [cid, ss] : sessions_) {
    const std::string& model = actor_of(ss).name;
    for (ShardView& t : ss.sh)
      for (auto it = t.host_reg.begin(); it != t.host_reg.end();)
        it = retained_now(model, *it) ? std::next(it) : t.host_reg.erase(it);
  }
}

void World::check_unpublish_ack(ClientId c, int s) {
  auto sit = sessions_.find(c);
  if (sit == sessions_.end()) return;
  Session& ss = sit->second;
  const Actor& a = actors_[ss.actor];
  ShardView& sh = ss.sh[s];
  if (read_by_lease(sh.id, false, -1))
    return fail("unpublish of member " + std::to_string(sh.id) + " acknowledged while a lease reads it");
  // Retention: the last non-spot holder of a retained version never loses it by unpublish.
  Version v = sh.unpub_v;
  // (Not when a reader reported its copy failed: the version was lost by that, not by this.)
  if (a.spot || v < 0 || sh.host_reg.count(v) || failed_.count(sh.id) || failed_host_.count({sh.id, v})) return;
  // (Nor when its host copy could not be made: the registry had no copy to keep.)
  if (sh.copy_failed == v) return;
  // Within one step `retain` shrinks (removals: an expired session) and then grows (an
  // Open: the step's own, or one that waited for that session to go): the registry decided
  // with a value between before and after, or with the one in between; only the smallest
  // one is sure.
  int k = std::min({model_retain(a.name), retain_before_[a.name], model_retain(a.name, true)});
  const auto& pub = published_[a.name];
  bool retained = false;
  int j = 0;
  for (auto it = pub.rbegin(); it != pub.rend() && j < k; ++it, ++j) retained = retained || *it == v;
  if (!retained) return;
  bool kept = false;
  for (const auto& [bid, bs] : sessions_) {
    const Actor& b = actor_of(bs);
    if (bid == c || b.spot || b.model != a.model || b.n != a.n) continue;
    const ShardView& t = bs.sh[s];
    // a holder, a host copy, or an ordered offload (its buffers stay until OffloadDone)
    kept = kept || (t.id && t.reg_v == v && !suspect_.count(t.id)) || t.host_reg.count(v) || t.offload_ordered == v;
    // A resume of v by a shard that holds it whole, not answered yet: the registry counts it
    // as a holder from its receipt (its answer waits for the round's commit).
    for (const auto& [req, out] : bs.out)
      if (out.delivered && !out.decided && out.op == Op::kReplicate && out.shard == s) {
        const Replicate& e = std::get<Replicate>(out.ev);
        kept = kept || (e.whole && e.spec == v);
      }
  }
  // A copy that a Close, a client's removal or a failure report (confirm()) of this same
  // step took away: it was there when the registry ended this drain (deadlines first), and
  // the version went with it, not with this unpublish. Not one that was reading from this member: its leaving may be what ended
  // the drain, and then the registry must not count it (sched.md, "Membership").
  for (const Left& l : left_now_)
    kept = kept || (!l.spot && l.model == a.name && l.n == a.n && l.shard == s && !l.reading.count(sh.id) &&
                    ((l.reg_v == v && !l.suspect) || l.host.count(v)));
  if (kept) return;
  std::ostringstream os;
  for (const auto& [bid, bs] : sessions_)
    if (actor_of(bs).model == a.model)
      os << " [" << actor_of(bs).replica << " client " << bid << " spot=" << actor_of(bs).spot << " id=" << bs.sh[s].id
         << " reg_v=" << bs.sh[s].reg_v << " suspect=" << suspect_.count(bs.sh[s].id) << "]";
  fail("retained version " + std::to_string(v) + " of " + a.name + " lost its last non-spot holder " + a.replica +
       " by unpublish;" + os.str());
}

// kVersionLost is said only when nothing is left to read, and never to a request for the
// latest (latest-k): those resolve only among versions that are not lost. Single-shard
// replicas only: a shard of a larger one shares its transaction's answer, decided earlier.
void World::check_version_lost(ClientId c, int s, const Out& out, const Reply& rep) {
  const Session& ss = sessions_.at(c);
  const Actor& a = actor_of(ss);
  const ShardView& sh = ss.sh[s];
  if (a.n != 1) return;
  Version v = -1;
  if (out.op == Op::kReplicate) {
    const auto& e = std::get<Replicate>(out.ev);
    // A requester's own host copy is a holder of the version that it cannot read from.
    bool own_copies = !sh.host_reg.empty() || sh.offload_ordered >= 0 ||
                      (a.alive && a.conn.cid == c && s < static_cast<int>(a.sh.size()) && !a.sh[s].host.empty());
    // An update in place fixes its version when it begins and is granted after its drain:
    // the version may be lost meanwhile (the answer then says "still holding").
    if (e.spec < 0 && !own_copies && !out.in_place)
      return fail("request " + std::to_string(rep.req) + " of " + a.replica + " for spec " + std::to_string(e.spec) +
                  " was answered VERSION_LOST: a relative spec resolves only among versions that are not lost");
    v = e.spec;
  } else if (out.op == Op::kFailed) {
    auto l = lease_src_.find(std::get<SourceFailed>(out.ev).lease);
    if (l == lease_src_.end()) return;
    v = l->second.v;
  }
  if (v < 0) return;
  // Judged at the moment of the decision (a later answer of the same step may restore a
  // holding), but after the retention drops of this step: a Publish decided just before
  // may have dropped a host copy, and a waiter for its version is then told it is lost.
  // An update in place delivered in this step hides its holding before the waiters are
  // retried; the view hides it only after the step (unless it was refused at once).
  sweep_host_copies();
  std::string who;
  for (const auto& [bid, bs] : sessions_) {
    const Actor& b = actor_of(bs);
    const ShardView& t = bs.sh[0];
    if (who.empty() && b.model == a.model && b.n == 1 && t.id != sh.id && t.id != updating_now_ && complete_holder(t, v))
      who = b.replica;
  }
  if (!who.empty())
    fail("request " + std::to_string(rep.req) + " of " + a.replica + " was answered VERSION_LOST for v" +
         std::to_string(v) + " while " + who + " holds it");
}

}  // namespace thub::sched::sim::detail
