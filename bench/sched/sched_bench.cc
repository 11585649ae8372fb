// Scheduling decisions per second with 1000 simulated clients: each iteration is one
// Replicate -> Grant -> TransferDone -> Unpublish cycle of one rollout client (3 decisions),
// or one trainer publish/unpublish pair (2 decisions).
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

}  // namespace
