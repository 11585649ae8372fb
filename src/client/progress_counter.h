// The 8-byte progress counter every holder registers: which version its buffers are filling
// with (low 24 bits of it) and how many bytes of the shard's stream it holds. Readers of a
// partial source count only bytes of the version they were granted, so a counter left from
// the holder's previous version (an update in place is granted before the holder has reset
// its counter) never passes for new data.
#pragma once

#include <cstdint>

namespace thub::client {

constexpr int kCounterByteBits = 40;                         // up to 1 TiB per shard
constexpr uint64_t kMaxShardBytes = (1ull << kCounterByteBits) - 1;
constexpr uint64_t kCounterByteMask = kMaxShardBytes;

constexpr uint64_t counter_value(int64_t version, uint64_t bytes) {
  return ((static_cast<uint64_t>(version) & 0xffffff) << kCounterByteBits) | (bytes & kCounterByteMask);
}
// Bytes of `version` the counter shows (0 when it belongs to another version).
constexpr uint64_t counter_bytes_of(uint64_t value, int64_t version) {
  return (value >> kCounterByteBits) == (static_cast<uint64_t>(version) & 0xffffff) ? value & kCounterByteMask : 0;
}
constexpr uint64_t counter_bytes(uint64_t value) { return value & kCounterByteMask; }

}  // namespace thub::client
