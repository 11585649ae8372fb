// Failure judgment, mirrored from sched/transaction.cc (report_failure, judge_silent): which
// reports confirm a source failed in the view, and the copies that leaves behind
// (simulation_checks.cc has the checks that use it).
#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>

#include "tests/sched/simulation_world.h"

namespace thub::sched::sim::detail {

ClientId World::session_of(MemberId m) const {
  auto o = owner_.find(m);
  if (o == owner_.end()) return 0;
  auto ss = sessions_.find(o->second.first);
  if (ss == sessions_.end() || ss->second.sh[o->second.second].id != m) return 0;
  return o->second.first;
}

bool World::silent_view(ClientId c) const {
  Time silence = cfg_.failure_silence > 0 ? cfg_.failure_silence : cfg_.heartbeat_timeout / 2;
  auto it = last_seen_.find(c);
  return it == last_seen_.end() || now_ - it->second > silence;
}

// The registry refreshes the sender's deadline clock, then judges every reported copy whose
// source's client is silent, before it decides anything in the step.
void World::judge_silent_view(const Event& ev) {
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (!std::is_same_v<E, Tick> && !std::is_same_v<E, Disconnect>) last_seen_[e.client] = now_;
      },
      ev);
  for (auto it = reports_.begin(); it != reports_.end();) {
    auto [m, host, v] = it->first;
    ClientId c = session_of(m);
    if (c && !silent_view(c)) {
      ++it;
      continue;
    }
    it = reports_.erase(it);
    if (c) confirm(m, host, v);
  }
}

void World::reported(const SourceFailed& e) {
  auto l = lease_src_.find(e.lease);
  if (l == lease_src_.end()) return;
  const LeaseView lv = l->second;
  shunned_[e.member].emplace(lv.src, now_);
  ClientId c = session_of(lv.src);
  if (!c) return;  // gone: hidden already
  if (lv.host) {
    const ShardView* t = reg_view(lv.src);
    if (!t || !t->host_reg.count(lv.v)) return;  // dropped already
  }
  ++res_.reports;
  auto key = std::make_tuple(lv.src, lv.host, lv.v);
  std::set<ClientId>& reps = reports_[key];
  reps.insert(e.client);
  if (static_cast<int>(reps.size()) < cfg_.failure_reports && !silent_view(c)) return;
  reports_.erase(key);
  confirm(lv.src, lv.host, lv.v);
}

void World::confirm(MemberId m, bool host, Version v) {
  trace("member " + std::to_string(m) + (host ? " host copy" : "") + " v" + std::to_string(v) +
        " confirmed failed in the view");
  ++res_.confirmed;
  // Gone with this step's report, as a copy of a member leaving in this step: the registry
  // may have ended a drain before it (deadlines first) and counted it then.
  if (auto o = owner_.find(m); o != owner_.end())
    if (auto ss = sessions_.find(o->second.first); ss != sessions_.end()) {
      const Actor& b = actor_of(ss->second);
      const ShardView& t = ss->second.sh[o->second.second];
      Left l{b.name, b.n, o->second.second, b.spot, false, host ? -1 : t.reg_v, {}, {}};
      if (host) l.host.insert(v);
      if (host || t.reg_v == v) left_now_.push_back(std::move(l));
    }
  if (host) {
    if (ShardView* t = reg_view(m)) t->host_reg.erase(v);
    failed_host_.insert({m, v});
  } else {
    hide(m);
    failed_.insert(m);  // the registry now counts its data as lost
  }
}

void World::forget_reports(MemberId m, bool host, Version v) { reports_.erase({m, host, v}); }

void World::new_fill(MemberId m) {
  for (auto it = reports_.lower_bound({m, false, INT64_MIN});
       it != reports_.end() && std::get<0>(it->first) == m && !std::get<1>(it->first);)
    it = reports_.erase(it);
  failed_.erase(m);
  shunned_.erase(m);
}

}  // namespace thub::sched::sim::detail
