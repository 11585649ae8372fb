// The world of the at-scale simulation: the event queue, the registry behind its channel
// (latency both ways, one server stepping one event at a time), the script of a fan-out
// (setup, t0, joins, deaths) and the result.
#include "tests/scale/scale_world.h"

#include "src/client/progress_counter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace thub::scale {

namespace {
constexpr int kMaxRetries = 3;     // a rollout's THUB_Replicate is retried after an error
constexpr double kRetryMs = 10;
Ns ms(double x) { return static_cast<Ns>(std::llround(x * 1e6)); }
Ns us(double x) { return static_cast<Ns>(std::llround(x * 1e3)); }
const char* const kEventNames[] = {"connect", "disconnect", "heartbeat", "tick", "open", "close",
                                   "publish", "replicate", "transfer_done", "source_failed",
                                   "unpublish", "offload_done", "cancel", "transfer_progress"};
static_assert(sizeof(kEventNames) / sizeof(kEventNames[0]) == std::variant_size_v<sched::Event>);
}  // namespace

double ideal_seconds(const ScaleConfig& cfg) {
  const double shard = cfg.model_bytes / cfg.shards;
  const double member_bps = cfg.nic_gbit * 1e9 / 8 * cfg.nics_per_host / cfg.gpus_per_host;
  double t = shard / member_bps;
  const bool remote = cfg.datacenters > 1 && cfg.replicas + cfg.joins >= 2;
  if (remote) t = std::max(t, cfg.model_bytes / (cfg.wan_gbit * 1e9 / 8));
  const double ctl = cfg.ctl_latency_us + (remote ? cfg.wan_latency_us : 0);
  const double rtt = cfg.data_rtt_us + (remote ? 2 * cfg.wan_latency_us : 0);
  return t + (4 * ctl + rtt) * 1e-6;
}

namespace detail {

sched::Config registry_config(const ScaleConfig& cfg) {
  sched::Config c{static_cast<sched::Time>(std::llround(cfg.heartbeat_timeout_ms * 1000)), cfg.max_readers_per_source,
                  cfg.pipeline};
  c.seeding = cfg.seeding;
  return c;
}

World::World(const ScaleConfig& cfg)
    : cfg_(cfg),
      rng_(cfg.seed),
      topo_(cfg_, net_),
      reg_(registry_config(cfg)) {
  if (cfg.shards < 1 || cfg.replicas < 0 || cfg.model_bytes <= 0) throw std::invalid_argument("bad fleet");
  shard_bytes_ = std::floor(cfg.model_bytes / cfg.shards);
  // The transfer machines count a shard's bytes in a progress counter (progress_counter.h).
  if (shard_bytes_ > static_cast<double>(client::kMaxShardBytes)) throw std::invalid_argument("a shard over 1 TiB");
  if (!(cfg.machine_chunk_bytes >= 1) || cfg.max_inflight < 1) throw std::invalid_argument("bad machine chunk");
  ideal_ns_ = ideal_seconds(cfg) * 1e9;
}

void World::at(Ns t, std::function<void()> fn) { q_.push(Ev{std::max(t, now_), seq_++, std::move(fn)}); }

void World::fail(const std::string& what) {
  if (failed_) return;
  failed_ = true;
  res_.ok = false;
  res_.error = "t=" + std::to_string(static_cast<double>(now_) * 1e-9) + " s: " + what;
}

void World::hash(uint64_t x) {
  for (int i = 0; i < 8; ++i) {
    hash_ ^= (x >> (8 * i)) & 0xff;
    hash_ *= 1099511628211ull;
  }
}

int World::add_replica(bool joiner) {
  const int r = static_cast<int>(replicas_.size());
  SimReplica rep;
  rep.joiner = joiner;
  rep.joined = now_;
  replicas_.push_back(rep);
  for (int s = 0; s < cfg_.shards; ++s) {
    auto m = std::make_unique<SimMember>();
    m->idx = static_cast<int>(members_.size());
    m->replica = r;
    m->shard = s;
    m->place = topo_.place(r, s);
    m->node = net_.add_node(shard_bytes_);
    if (m->node != m->idx) throw std::logic_error("network nodes follow member indices");
    m->client = static_cast<sched::ClientId>(m->idx + 1);
    client::MemberIdentity id;
    id.model = "policy";
    char name[32];
    std::snprintf(name, sizeof name, "rollout-%05d", r);
    id.replica = r == 0 ? "trainer" : name;
    id.shard = s;
    id.num_shards = cfg_.shards;
    m->m = std::make_unique<client::MemberMachine>(id);
    members_.push_back(std::move(m));
  }
  return r;
}

// Every member is its own process (one rank per GPU): it connects, then opens its shard.
void World::connect_and_open(int replica) {
  for (int s = 0; s < cfg_.shards; ++s) {
    SimMember& m = *members_[static_cast<size_t>(replica * cfg_.shards + s)];
    to_registry(m.idx, sched::Connect{m.client, "dc" + std::to_string(m.place.dc)});
    feed(m.idx, client::OpOpen{m.next_op++});
    const int mi = m.idx;
    std::uniform_int_distribution<Ns> phase(0, ms(cfg_.heartbeat_ms) - 1);
    at(now_ + phase(rng_), [this, mi] { heartbeat(mi); });
  }
}

void World::start_fanout() {
  t0_ = now_;
  std::uniform_int_distribution<Ns> spread(0, std::max<Ns>(0, us(cfg_.start_spread_us) - 1));
  for (int r = 1; r <= cfg_.replicas; ++r)
    for (int s = 0; s < cfg_.shards; ++s) {
      const int mi = r * cfg_.shards + s;
      ++outstanding_;
      at(t0_ + spread(rng_), [this, mi] { replicate(mi); });
    }
  auto when = [&](double from, double to) {
    std::uniform_real_distribution<double> u(from, to);
    return t0_ + static_cast<Ns>(u(rng_) * ideal_ns_);
  };
  for (int j = 0; j < cfg_.joins; ++j) {
    ++faults_left_;
    at(when(cfg_.join_from, cfg_.join_to), [this] {
      --faults_left_;
      const int r = add_replica(true);
      res_.replicas_joined++;
      outstanding_ += cfg_.shards;
      connect_and_open(r);
    });
  }
  std::vector<int> victims;
  for (int r = 1; r <= cfg_.replicas; ++r) victims.push_back(r);
  std::shuffle(victims.begin(), victims.end(), rng_);
  for (int d = 0; d < std::min(cfg_.deaths, cfg_.replicas); ++d) {
    ++faults_left_;
    const int r = victims[static_cast<size_t>(d)];
    at(when(cfg_.death_from, cfg_.death_to), [this, r] {
      --faults_left_;
      kill_replica(r);
    });
  }
}

void World::replicate(int mi) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  if (!m.alive) return;
  m.asked = now_;
  m.replicate_op = m.next_op++;
  feed(mi, client::OpReplicate{m.replicate_op, -1, false});  // THUB_Replicate(THUB_LATEST)
}

// Killed: the kernel closes its connections (readers' gets fail, the registry sees a
// disconnect). Silent: the host is gone; readers notice a stall, the registry a deadline.
void World::kill_replica(int replica) {
  SimReplica& rep = replicas_[static_cast<size_t>(replica)];
  rep.killed = true;
  rep.killed_at = now_;
  if (cfg_.trace) std::fprintf(stderr, "t=%.6f replica %d dies\n", static_cast<double>(now_) * 1e-9, replica);
  res_.replicas_killed++;
  for (int s = 0; s < cfg_.shards; ++s) {
    SimMember& m = *members_[static_cast<size_t>(replica * cfg_.shards + s)];
    m.alive = false;
    if (m.replicate_op && m.done < 0) --outstanding_;
    if (!m.replicate_op && !rep.joiner) --outstanding_;  // its replicate was still to come
    drop_transfer(m.idx);
    source_died(m.idx);
    hash(0xdead0000u + static_cast<uint64_t>(m.idx));
    if (!cfg_.silent_deaths) {
      res_.requests["disconnect"]++;
      sched::Event ev = sched::Disconnect{m.client};
      at(now_ + ms(cfg_.disconnect_ms), [this, ev] { registry_arrival(ev); });
    }
  }
}

void World::heartbeat(int mi) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  if (!m.alive) return;
  to_registry(mi, sched::Heartbeat{m.client});
  at(now_ + ms(cfg_.heartbeat_ms), [this, mi] { heartbeat(mi); });
}

void World::tick() {
  registry_arrival(sched::Tick{});
  at(now_ + ms(cfg_.tick_ms), [this] { tick(); });
}

void World::to_registry(int mi, sched::Event ev) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  std::visit(
      [&](auto& e) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(e)>, sched::Tick>) e.client = m.client;
      },
      ev);
  if (t0_ >= 0) {
    if (std::holds_alternative<sched::Heartbeat>(ev))
      res_.heartbeats++;
    else
      res_.requests[kEventNames[ev.index()]]++;
  }
  at(now_ + topo_.ctl_one_way(m.place.dc), [this, ev = std::move(ev)] { registry_arrival(ev); });
}

void World::registry_arrival(sched::Event ev) {
  inbox_.push_back(std::move(ev));
  if (serving_) return;
  serving_ = true;
  at(std::max(now_, busy_until_), [this] { serve_registry(); });
}

// One event at a time, each holding the registry for its service time; replies leave when
// it is done.
void World::serve_registry() {
  sched::Event ev = std::move(inbox_[inbox_head_++]);
  if (inbox_head_ == inbox_.size()) {
    inbox_.clear();
    inbox_head_ = 0;
  }
  const sched::Time t = now_ / 1000;
  if (cfg_.record_registry_trace) res_.trace.push_back(RegistryStep{ev, t, t0_ >= 0});
  if (t0_ >= 0) res_.registry_events++;
  hash(static_cast<uint64_t>(now_));
  hash(ev.index());
  std::vector<sched::Action> out = reg_.step(ev, t);
  // A request that got no reply now waits in the registry (deferred).
  auto deferred = [&](sched::ClientId c, sched::RequestId req) {
    for (const auto& a : out)
      if (const auto* r = std::get_if<sched::Reply>(&a); r && r->client == c && r->req == req) return false;
    return true;
  };
  if (const auto* e = std::get_if<sched::Replicate>(&ev); e && deferred(e->client, e->req)) res_.deferred++;
  if (const auto* e = std::get_if<sched::SourceFailed>(&ev); e && deferred(e->client, e->req)) res_.deferred++;
  const bool beat = std::holds_alternative<sched::Heartbeat>(ev) || std::holds_alternative<sched::Tick>(ev);
  const bool choice = std::holds_alternative<sched::Replicate>(ev) || std::holds_alternative<sched::SourceFailed>(ev);
  const Ns service =
      us(beat ? cfg_.registry_heartbeat_us : choice ? cfg_.registry_replicate_us : cfg_.registry_request_us);
  busy_until_ = now_ + service;
  if (t0_ >= 0) busy_ns_ += service;
  for (const auto& a : out) deliver(a, busy_until_);
  if (inbox_head_ < inbox_.size()) {
    at(busy_until_, [this] { serve_registry(); });
  } else {
    serving_ = false;
  }
}

void World::deliver(const sched::Action& a, Ns when) {
  if (const auto* d = std::get_if<sched::Drop>(&a)) {
    const SimMember& m = *members_.at(static_cast<size_t>(d->client - 1));
    if (m.alive) fail("the registry dropped live client " + std::to_string(d->client));
    return;
  }
  const auto* r = std::get_if<sched::Reply>(&a);
  if (!r) return fail("an Offload or Discard: retention is not modelled here");
  const int mi = static_cast<int>(r->client - 1);
  SimMember& m = *members_.at(static_cast<size_t>(mi));
  hash(r->client);
  hash(r->req);
  hash(static_cast<uint64_t>(static_cast<int>(r->status)));
  hash(r->lease);
  hash(r->source);
  if (r->status == sched::Status::kOk && r->member) by_registry_id_[r->member] = mi;
  if (t0_ >= 0) {
    res_.replies++;
    if (r->status != sched::Status::kOk) res_.errors++;
    if (r->status == sched::Status::kOk && r->lease) {
      res_.grants++;
      if (r->source_partial) res_.partial_grants++;
      if (auto src = by_registry_id_.find(r->source);
          src != by_registry_id_.end() && members_[static_cast<size_t>(src->second)]->place.dc != m.place.dc)
        res_.cross_grants++;
    }
  }
  sched::Reply copy = *r;
  at(when + topo_.ctl_one_way(m.place.dc), [this, mi, copy] {
    if (members_[static_cast<size_t>(mi)]->alive) feed(mi, client::RegistryReply{copy.req, copy});
  });
}

void World::on_complete(int mi, const client::CompleteOp& c) {
  SimMember& m = *members_[static_cast<size_t>(mi)];
  SimReplica& rep = replicas_[static_cast<size_t>(m.replica)];
  if (c.op == 1) {  // THUB_Open
    if (c.code != Code::kSuccess) return fail("open failed: " + c.detail);
    if (m.replica == 0) return feed(mi, client::OpPublish{m.next_op++, 1});
    if (rep.joiner) return replicate(mi);
    if (--setup_left_ == 0) start_fanout();
    return;
  }
  if (c.op != m.replicate_op) {  // the trainer's THUB_Publish
    if (c.code != Code::kSuccess) return fail("publish failed: " + c.detail);
    if (--setup_left_ == 0) start_fanout();
    return;
  }
  if (c.code != Code::kSuccess && m.retries < kMaxRetries) {
    // A rollout loop asks again (from scratch: a new operation refills the buffers).
    ++m.retries;
    res_.retries++;
    hash(0x2e000000u + static_cast<uint64_t>(mi));
    at(now_ + ms(kRetryMs), [this, mi] { replicate(mi); });
    return;
  }
  m.done = now_;
  m.version = c.version;
  --outstanding_;
  if (c.code != Code::kSuccess) {
    m.failed = true;
    rep.failed = true;
    if (res_.error.empty()) res_.error = "replicate of member " + std::to_string(mi) + ": " + c.detail;
  }
  if (++rep.members_done == cfg_.shards) rep.done = now_;
}

bool World::finished() const { return t0_ >= 0 && outstanding_ == 0 && faults_left_ == 0; }

ScaleResult World::run() {
  add_replica(false);  // the trainer
  for (int r = 1; r <= cfg_.replicas; ++r) add_replica(false);
  setup_left_ = cfg_.replicas * cfg_.shards + cfg_.shards;  // opens of the rollouts, publishes
  for (int r = 0; r <= cfg_.replicas; ++r) connect_and_open(r);
  at(ms(cfg_.tick_ms), [this] { tick(); });
  // Nothing may take longer than this in virtual time: a hang is a failure, not a loop.
  const Ns limit = static_cast<Ns>(20 * ideal_ns_) + ms(4 * cfg_.stall_timeout_ms + 4 * cfg_.heartbeat_timeout_ms);
  while (!q_.empty() && !failed_) {
    Ev e = q_.top();
    q_.pop();
    now_ = e.t;
    e.fn();
    res_.sim_events++;
    if (q_.empty() || q_.top().t > now_) settle_network();
    if (finished()) break;
    if (now_ > limit) fail("the fan-out did not finish (outstanding " + std::to_string(outstanding_) + ")");
  }
  if (!failed_ && !finished()) fail("the event queue ran dry");
  if (std::string bad = reg_.check_invariants(); !bad.empty()) fail("registry invariants: " + bad);
  collect(res_);
  res_.trace_hash = hash_;
  return std::move(res_);
}

void World::collect(ScaleResult& r) const {
  r.ideal_s = ideal_ns_ * 1e-9;
  r.net_recomputes = net_.recomputes();
  r.registry_busy_s = static_cast<double>(busy_ns_) * 1e-9;
  std::vector<double> done;
  for (size_t i = 1; i < replicas_.size(); ++i) {
    const SimReplica& rep = replicas_[i];
    if (rep.killed) continue;
    if (rep.failed || rep.done < 0) {
      r.replicas_failed++;
      continue;
    }
    r.replicas_done++;
    if (rep.joiner) {
      r.joiner_worst_ratio = std::max(r.joiner_worst_ratio, static_cast<double>(rep.done - rep.joined) / ideal_ns_);
    } else {
      done.push_back(static_cast<double>(rep.done - t0_) * 1e-9);
    }
  }
  std::sort(done.begin(), done.end());
  if (!done.empty()) {
    r.completion_s = done.back();
    r.p50_s = done[(done.size() - 1) / 2];
    r.p99_s = done[static_cast<size_t>(std::ceil(0.99 * static_cast<double>(done.size()))) - 1];
    r.ratio = r.completion_s / r.ideal_s;
  }
  int64_t depth_sum = 0, depth_n = 0;
  for (const auto& mp : members_) {
    const SimMember& m = *mp;
    if (!m.alive) continue;
    if (m.replica > 0 && m.done >= 0 && !m.failed) {
      if (m.version != 1) r.wrong_version++;
      r.depth_max = std::max(r.depth_max, m.depth);
      depth_sum += m.depth;
      ++depth_n;
    }
    auto it = readers_granted_.find(m.idx);
    r.fanout[it == readers_granted_.end() ? 0 : it->second]++;
    r.source_failures += m.m->counters().source_failures;
  }
  if (depth_n) r.depth_mean = static_cast<double>(depth_sum) / static_cast<double>(depth_n);
}

}  // namespace detail

ScaleResult run_scale(const ScaleConfig& cfg) {
  detail::World w(cfg);
  return w.run();
}

}  // namespace thub::scale
