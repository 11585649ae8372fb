// The shard's stream: planning it (StreamPlan over the tensor table) and the copies between
// the tensors and the packed stream that publish (pack) and a reader (unpack) run, through
// StreamPlan::for_each_piece + memcpy (what Holding::stage/deliver do for host tensors).
// Layouts: 1,000 x 1 MiB and 8,192 x 8 KiB (both below the 2 MiB compaction threshold, so
// every byte is packed).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "src/client/layout.h"
#include "src/client/stream.h"

namespace {

using thub::client::StreamPlan;
using thub::client::TensorTable;

constexpr uint64_t kThreshold = 2u << 20;  // the default compaction_threshold

// N tensors of S bytes in one buffer (touched), and their table.
struct Tensors {
  std::unique_ptr<char[]> mem;
  TensorTable table;
  Tensors(int n, uint64_t s) : mem(new char[static_cast<size_t>(n) * s]) {
    std::memset(mem.get(), 1, static_cast<size_t>(n) * s);
    for (int i = 0; i < n; ++i) {
      table.add("model.layers." + std::to_string(i) + ".mlp.weight", mem.get() + static_cast<size_t>(i) * s, s, 0);
    }
  }
};

void BM_StreamPlan(benchmark::State& state) {
  Tensors t(static_cast<int>(state.range(0)), static_cast<uint64_t>(state.range(1)));
  for (auto _ : state) {
    StreamPlan plan(t.table, kThreshold);
    benchmark::DoNotOptimize(plan.total_bytes());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));  // tensors/s
}
BENCHMARK(BM_StreamPlan)->Args({1000, 1 << 20})->Args({8192, 8 << 10})->Unit(benchmark::kMicrosecond);

// Tensors -> packed stream (publish's pack) or back (a reader's unpack), in one call over
// the whole stream.
template <bool kPack>
void BM_Copy(benchmark::State& state) {
  Tensors t(static_cast<int>(state.range(0)), static_cast<uint64_t>(state.range(1)));
  StreamPlan plan(t.table, kThreshold);
  std::unique_ptr<char[]> stream(new char[plan.compact_bytes()]);
  std::memset(stream.get(), 2, plan.compact_bytes());
  const auto& ts = t.table.tensors();
  for (auto _ : state) {
    plan.for_each_piece(0, plan.compact_bytes(), [&](size_t i, uint64_t in, uint64_t soff, uint64_t n) {
      if (kPack) std::memcpy(stream.get() + soff, ts[i].addr + in, n);
      else std::memcpy(ts[i].addr + in, stream.get() + soff, n);
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(plan.compact_bytes()));
}
BENCHMARK_TEMPLATE(BM_Copy, true)->Name("BM_Pack")->Args({1000, 1 << 20})->Args({8192, 8 << 10})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Copy, false)->Name("BM_Unpack")->Args({1000, 1 << 20})->Args({8192, 8 << 10})->Unit(benchmark::kMillisecond)->UseRealTime();

// Unpacking as a reader does it, one received chunk at a time (256 KiB: the pipeline chunk):
// each call walks the plan from the start, so the walk's cost grows with tensors x chunks.
void BM_UnpackByChunk(benchmark::State& state) {
  Tensors t(static_cast<int>(state.range(0)), static_cast<uint64_t>(state.range(1)));
  StreamPlan plan(t.table, kThreshold);
  std::unique_ptr<char[]> stream(new char[plan.compact_bytes()]);
  std::memset(stream.get(), 2, plan.compact_bytes());
  const auto& ts = t.table.tensors();
  const uint64_t chunk = 256u << 10;
  for (auto _ : state) {
    for (uint64_t a = 0; a < plan.compact_bytes(); a += chunk) {
      plan.for_each_piece(a, std::min(a + chunk, plan.compact_bytes()), [&](size_t i, uint64_t in, uint64_t soff, uint64_t n) {
        std::memcpy(ts[i].addr + in, stream.get() + soff, n);
      });
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(plan.compact_bytes()));
}
BENCHMARK(BM_UnpackByChunk)->Args({1000, 1 << 20})->Args({8192, 8 << 10})->Unit(benchmark::kMillisecond)->UseRealTime();

// The plan walk alone, per 256 KiB chunk (no copy): the bookkeeping part of the above.
void BM_PieceWalkByChunk(benchmark::State& state) {
  Tensors t(static_cast<int>(state.range(0)), static_cast<uint64_t>(state.range(1)));
  StreamPlan plan(t.table, kThreshold);
  const uint64_t chunk = 256u << 10;
  uint64_t chunks = 0;
  for (auto _ : state) {
    uint64_t pieces = 0;
    for (uint64_t a = 0; a < plan.total_bytes(); a += chunk) {
      plan.for_each_piece(a, std::min(a + chunk, plan.total_bytes()), [&](size_t, uint64_t, uint64_t, uint64_t) { pieces++; });
      chunks++;
    }
    benchmark::DoNotOptimize(pieces);
  }
  state.counters["chunks/s"] = benchmark::Counter(static_cast<double>(chunks), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PieceWalkByChunk)->Args({1000, 1 << 20})->Args({8192, 8 << 10})->Unit(benchmark::kMicrosecond);

}  // namespace
