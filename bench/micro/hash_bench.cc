// End-to-end integrity: XXH3 per 1 MiB block (src/common/hash.h), as THUB_Publish computes
// with verify=true and every reader checks: one call per block, and the streaming hasher fed
// in tensor-sized pieces (a block that spans many small tensors).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "src/common/hash.h"

namespace {

constexpr size_t kBlock = 1u << 20;  // kHashBlock in src/client/layout.h

void BM_Hash64Block(benchmark::State& state) {
  std::vector<char> buf(kBlock * 64, 3);  // 64 MiB: out of the caches, like a shard
  size_t b = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(thub::hash64(buf.data() + (b++ % 64) * kBlock, kBlock));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBlock));
}
BENCHMARK(BM_Hash64Block);

// One 1 MiB block through BlockHasher in pieces of range(0) bytes (8 KiB: norms and biases).
void BM_BlockHasherPieces(benchmark::State& state) {
  std::vector<char> buf(kBlock * 64, 5);
  const size_t piece = static_cast<size_t>(state.range(0));
  thub::BlockHasher h;
  size_t b = 0;
  for (auto _ : state) {
    const char* p = buf.data() + (b++ % 64) * kBlock;
    h.reset();
    for (size_t off = 0; off < kBlock; off += piece) h.update(p + off, piece);
    benchmark::DoNotOptimize(h.digest());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBlock));
}
BENCHMARK(BM_BlockHasherPieces)->Arg(8 << 10)->Arg(kBlock);

}  // namespace
