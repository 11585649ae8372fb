// The 8-byte progress counter every holder registers: a seqlock over its buffers. It holds
// the *fill epoch* (24 bits, 0 = invalid) and the bytes of the shard's stream that fill holds.
//
// A holder takes a new epoch for every fill of its buffers (a publish of new content, a
// transfer into them) and advertises it in its descriptor; it sets the counter to 0 before
// its buffers may change (before THUB_Unpublish returns, before a transfer overwrites them).
// A reader accepts bytes it read from a source only when a read of the source's counter,
// issued after those bytes landed, still shows the epoch of the descriptor it was granted
// with at least as many bytes (transfer.cc). So a reader the registry forgot about (stopped,
// cut off, or granted by a registry that has since died) never takes bytes of a later
// version for the one it asked for, and a pipeline source never passes on what it has not
// checked. Epochs are per process and never 0; a counter left from a holder's previous fill
// (an update in place is granted before the holder resets it) shows another epoch: 0 bytes.
#pragma once

#include <atomic>
#include <cstdint>

namespace thub::client {

constexpr int kCounterByteBits = 40;                         // up to 1 TiB per shard
constexpr uint64_t kMaxShardBytes = (1ull << kCounterByteBits) - 1;
constexpr uint64_t kCounterByteMask = kMaxShardBytes;
constexpr uint32_t kEpochMask = (1u << (64 - kCounterByteBits)) - 1;  // 24 bits
constexpr uint64_t kCounterInvalid = 0;

constexpr uint64_t counter_value(uint32_t epoch, uint64_t bytes) {
  return (static_cast<uint64_t>(epoch & kEpochMask) << kCounterByteBits) | (bytes & kCounterByteMask);
}
constexpr uint32_t counter_epoch(uint64_t value) { return static_cast<uint32_t>(value >> kCounterByteBits); }
// Bytes of fill `epoch` the counter shows (0 when it belongs to another fill or is invalid).
constexpr uint64_t counter_bytes_of(uint64_t value, uint32_t epoch) {
  return epoch != 0 && counter_epoch(value) == (epoch & kEpochMask) ? value & kCounterByteMask : 0;
}
constexpr uint64_t counter_bytes(uint64_t value) { return value & kCounterByteMask; }

// A new fill epoch of this process: never 0, wraps after 2^24 - 1 fills.
inline uint32_t next_fill_epoch() {
  static std::atomic<uint32_t> next{0};
  for (;;) {
    uint32_t e = (next.fetch_add(1, std::memory_order_relaxed) + 1) & kEpochMask;
    if (e != 0) return e;
  }
}

// A holder's own counter: registered memory (8 bytes, the atomic itself) that peers read with
// RMA gets. Its writers keep the seqlock's two rules: data first, then the counter; the
// counter invalidated before the data changes.
class ProgressCounter {
 public:
  // The buffers are about to change: readers of the current fill must not accept anything
  // they read from now on. Ordered before every later store of this thread (the overwrite).
  void invalidate() {
    v_.store(kCounterInvalid, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  // `bytes` of fill `epoch` are in place (written before this call).
  void store(uint32_t epoch, uint64_t bytes) { v_.store(counter_value(epoch, bytes), std::memory_order_release); }
  // The same, only while the counter still shows fill `epoch`: false (and nothing stored)
  // once it was invalidated or another fill began (staging behind publish stops then).
  bool advance(uint32_t epoch, uint64_t bytes) {
    uint64_t cur = v_.load(std::memory_order_acquire);
    while (counter_epoch(cur) == (epoch & kEpochMask) && epoch != 0) {
      if (v_.compare_exchange_weak(cur, counter_value(epoch, bytes), std::memory_order_acq_rel)) return true;
    }
    return false;
  }
  [[nodiscard]] uint64_t load() const { return v_.load(std::memory_order_acquire); }
  [[nodiscard]] void* address() { return &v_; }

 private:
  std::atomic<uint64_t> v_{kCounterInvalid};
};
static_assert(sizeof(ProgressCounter) == sizeof(uint64_t), "the counter is read remotely as 8 bytes");

}  // namespace thub::client
