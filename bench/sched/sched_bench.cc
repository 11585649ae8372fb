// Scheduling decisions per second with 1000 simulated clients: each iteration is one
// Replicate -> Grant -> TransferDone -> Unpublish cycle of one rollout client (3 decisions),
// or one trainer publish/unpublish pair (2 decisions), or one whole training step (a new
// version published, N rollouts replicate it through chains of partial sources, the old
// version withdrawn).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "sched/registry.h"

namespace {
using namespace thub::sched;

constexpr int kClients = 1000;

struct Fleet {
  Registry reg{Config{5'000'000, 1, true}};
  std::vector<MemberId> members;
  Time now = 0;
  RequestId req = 0;
  Fleet() {
    for (int c = 1; c <= kClients; ++c) {
      (void)reg.step(Connect{static_cast<ClientId>(c), c % 4 ? "dc0" : "dc1"}, now);
      auto a = reg.step(Open{static_cast<ClientId>(c), ++req, "policy", "r" + std::to_string(c), 0, 1},
                        now);
      members.push_back(std::get<Reply>(a.at(0)).member);
    }
    for (int c = 1; c <= 8; ++c)
      (void)reg.step(Publish{static_cast<ClientId>(c), ++req, members[c - 1], 1, 7, "d"}, now);
  }
};

void BM_ReplicateCycle(benchmark::State& state) {
  Fleet f;
  int c = 8;
  int64_t decisions = 0;
  for (auto _ : state) {
    ClientId cl = static_cast<ClientId>(c + 1);
    MemberId m = f.members[c];
    f.now += 10;
    auto g = f.reg.step(Replicate{cl, ++f.req, m, -1, -1, 7, "d"}, f.now);
    const Reply& r = std::get<Reply>(g.at(0));
    auto d = f.reg.step(TransferDone{cl, ++f.req, m, r.lease}, f.now);
    auto u = f.reg.step(Unpublish{cl, ++f.req, m}, f.now);
    benchmark::DoNotOptimize(d);
    benchmark::DoNotOptimize(u);
    decisions += 3;
    c = 8 + (c - 8 + 1) % (kClients - 8);
  }
  state.counters["decisions/s"] = benchmark::Counter(static_cast<double>(decisions), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReplicateCycle);

void BM_PublishUnpublish(benchmark::State& state) {
  Fleet f;
  int c = 8;
  int64_t decisions = 0;
  for (auto _ : state) {
    ClientId cl = static_cast<ClientId>(c + 1);
    MemberId m = f.members[c];
    f.now += 10;
    auto p = f.reg.step(Publish{cl, ++f.req, m, 1, 7, "d"}, f.now);
    auto u = f.reg.step(Unpublish{cl, ++f.req, m}, f.now);
    benchmark::DoNotOptimize(p);
    benchmark::DoNotOptimize(u);
    decisions += 2;
    c = 8 + (c - 8 + 1) % (kClients - 8);
  }
  state.counters["decisions/s"] = benchmark::Counter(static_cast<double>(decisions), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PublishUnpublish);

// One training step of N rollouts: the trainer publishes version v; every rollout asks for
// it (granted the trainer or a rollout still receiving: pipeline) and reports TransferDone;
// then every holder of v-1 unpublishes it. Decisions = 1 + 2N + (N + 1) per step.
void BM_VersionStep(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Registry reg{Config{5'000'000, 1, true}};
  Time now = 0;
  RequestId req = 0;
  std::vector<MemberId> m;  // [0] the trainer, then the rollouts
  for (int c = 0; c <= n; ++c) {
    (void)reg.step(Connect{static_cast<ClientId>(c + 1), "dc0"}, now);
    auto a = reg.step(Open{static_cast<ClientId>(c + 1), ++req, "policy", "r" + std::to_string(c), 0, 1}, now);
    m.push_back(std::get<Reply>(a.at(0)).member);
  }
  Version v = 0;
  int64_t decisions = 0;
  for (auto _ : state) {
    ++v;
    now += 100;
    if (v > 1) {  // withdraw the previous version everywhere (no reader left: no drain)
      for (int c = 0; c <= n; ++c) (void)reg.step(Unpublish{static_cast<ClientId>(c + 1), ++req, m[c]}, now);
    }
    (void)reg.step(Publish{1, ++req, m[0], v, 7, "d"}, now);
    for (int c = 1; c <= n; ++c) {
      auto g = reg.step(Replicate{static_cast<ClientId>(c + 1), ++req, m[c], v, -1, 7, "d"}, now);
      const Reply& r = std::get<Reply>(g.at(0));
      if (r.status != Status::kOk) state.SkipWithError("replicate not granted");
      benchmark::DoNotOptimize(r);
      (void)reg.step(TransferDone{static_cast<ClientId>(c + 1), ++req, m[c], r.lease}, now);
    }
    decisions += 1 + 2 * n + (v > 1 ? n + 1 : 0);
  }
  state.counters["decisions/s"] = benchmark::Counter(static_cast<double>(decisions), benchmark::Counter::kIsRate);
  state.counters["steps/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_VersionStep)->Arg(8)->Arg(64)->Arg(512)->Unit(benchmark::kMicrosecond);

}  // namespace
