// The registry's CPU per version at scale. The at-scale simulation (tests/scale/) runs one
// version's fan-out from a trainer of 8 shards to N rollout replicas against the real
// sched::Registry and records every event the registry stepped, with its time. Here a fresh
// Registry is brought to t0 (connects, opens, the publish: untimed) and then the version is
// replayed (timed): every Replicate, TransferDone, Heartbeat and Tick of the fan-out, in
// order, at its virtual time. The registry is deterministic, so the replay makes the same
// decisions as the simulation did. CPU time per iteration = registry CPU per version; linear in
// N means the time per replica (the "per_replica" counter) stays flat as N grows.
//
// Arguments: N, and the spread of the rollouts' start (0: every rank asks at t0; 1000 us:
// the default of thub_scale, where the shards of different replicas interleave and many
// transactions wait for a whole source replica).
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <memory>
#include <utility>

#include "sched/registry.h"
#include "tests/scale/scale_sim.h"

namespace {
using namespace thub;

struct Recorded {
  scale::ScaleConfig cfg;
  scale::ScaleResult res;
  size_t first_version_step = 0;
};

const Recorded& recorded(int n, int spread_us) {
  static std::map<std::pair<int, int>, std::unique_ptr<Recorded>> cache;
  auto& slot = cache[{n, spread_us}];
  if (!slot) {
    slot = std::make_unique<Recorded>();
    slot->cfg.replicas = n;
    slot->cfg.start_spread_us = spread_us;
    slot->cfg.record_registry_trace = true;
    slot->res = scale::run_scale(slot->cfg);
    const auto& t = slot->res.trace;
    while (slot->first_version_step < t.size() && !t[slot->first_version_step].in_version) ++slot->first_version_step;
  }
  return *slot;
}

sched::Config registry_config(const scale::ScaleConfig& c) {
  return sched::Config{static_cast<sched::Time>(c.heartbeat_timeout_ms * 1000), c.max_readers_per_source, c.pipeline};
}

void BM_FanoutVersion(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const Recorded& rec = recorded(n, static_cast<int>(state.range(1)));
  if (!rec.res.ok) {
    state.SkipWithError(rec.res.error.c_str());
    return;
  }
  const auto& trace = rec.res.trace;
  // Each step is also timed alone (a steady_clock read is ~20 ns, against microseconds per
  // step), by kind: source choices (Replicate, SourceFailed), other requests, heartbeats and
  // ticks: thub_scale's service-time model (--registry-*-us). Wall time per step: run it on
  // a quiet machine.
  using Clock = std::chrono::steady_clock;
  enum { kChoice, kRequest, kBeat };
  double ns_by[3] = {0, 0, 0}, n_by[3] = {0, 0, 0};
  for (auto _ : state) {
    state.PauseTiming();
    auto reg = std::make_unique<sched::Registry>(registry_config(rec.cfg));
    for (size_t i = 0; i < rec.first_version_step; ++i) (void)reg->step(trace[i].event, trace[i].now);
    state.ResumeTiming();
    for (size_t i = rec.first_version_step; i < trace.size(); ++i) {
      const auto& ev = trace[i].event;
      auto t = Clock::now();
      auto out = reg->step(ev, trace[i].now);
      const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t).count();
      benchmark::DoNotOptimize(out);
      const int kind = std::holds_alternative<sched::Heartbeat>(ev) || std::holds_alternative<sched::Tick>(ev) ? kBeat
                       : std::holds_alternative<sched::Replicate>(ev) || std::holds_alternative<sched::SourceFailed>(ev)
                           ? kChoice
                           : kRequest;
      ns_by[kind] += ns;
      n_by[kind] += 1;
    }
    state.PauseTiming();
    reg.reset();  // freeing the registry is not part of the version's work
    state.ResumeTiming();
  }
  auto mean_us = [&](int k) { return n_by[k] ? ns_by[k] / n_by[k] / 1e3 : 0.0; };
  state.counters["us_per_replicate"] = mean_us(kChoice);
  state.counters["us_per_request"] = mean_us(kRequest);
  state.counters["us_per_heartbeat"] = mean_us(kBeat);
  state.counters["requests"] = (n_by[kChoice] + n_by[kRequest]) / static_cast<double>(state.iterations());
  const double events = static_cast<double>(trace.size() - rec.first_version_step);
  state.counters["replicas"] = n;
  state.counters["events"] = events;
  state.counters["per_replica"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["per_event"] =
      benchmark::Counter(events, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_FanoutVersion)
    ->ArgNames({"N", "spread_us"})
    ->Args({10, 0})
    ->Args({100, 0})
    ->Args({300, 0})
    ->Args({1000, 0})
    ->Args({10, 1000})
    ->Args({100, 1000})
    ->Args({300, 1000})
    ->Args({1000, 1000})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
