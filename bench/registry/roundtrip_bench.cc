// Control-plane round trip: a client's request to the registry service over TCP loopback
// and its reply, through the real server (sched/ inside) and connection.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "src/registry/connection.h"
#include "src/registry/server.h"

namespace {

struct Fixture {
  std::unique_ptr<thub::registry::Server> server;
  std::unique_ptr<thub::registry::Connection> conn;
  thub::sched::MemberId member = 0;
  Fixture() {
    thub::registry::ServerOptions so;
    so.listen = "127.0.0.1:0";
    server = std::make_unique<thub::registry::Server>(so);
    server->start();
    thub::registry::ConnectionOptions co;
    co.addresses = {server->address()};
    conn = std::make_unique<thub::registry::Connection>(co);
    member = conn->call(thub::sched::Open{0, 0, "bench", "r0", 0, 1, 0, false}).member;
  }
};

// A request answered at once (NOT_FOUND for a version nobody published): the pure round trip.
void BM_RoundTripNotFound(benchmark::State& state) {
  Fixture f;
  thub::sched::Replicate ev{0, 0, f.member, 12345, -1, 1, std::string(64, 'd')};
  for (auto _ : state) {
    auto r = f.conn->call(ev);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RoundTripNotFound)->UseRealTime();

// Publish + Unpublish of a descriptor the size of a 300-tensor shard's (about 40 KiB).
void BM_PublishUnpublish(benchmark::State& state) {
  Fixture f;
  std::string desc(static_cast<size_t>(state.range(0)), 'x');
  int64_t v = 0;
  for (auto _ : state) {
    auto p = f.conn->call(thub::sched::Publish{0, 0, f.member, v++, 7, desc});
    auto u = f.conn->call(thub::sched::Unpublish{0, 0, f.member});
    benchmark::DoNotOptimize(p);
    benchmark::DoNotOptimize(u);
  }
  state.SetItemsProcessed(2 * state.iterations());
}
BENCHMARK(BM_PublishUnpublish)->Arg(1024)->Arg(40 << 10)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
