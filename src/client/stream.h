// The byte stream a shard travels as, with tiny-tensor compaction: first the compact
// segment (every tensor of 1 byte up to below the threshold, packed back to back in
// registration order), then every other tensor in registration order. Every holder of a
// (layout, threshold) agrees on it byte for byte, whatever memory it serves from; progress
// counters and integrity blocks are offsets into it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/client/layout.h"

namespace thub::client {

class StreamPlan {
 public:
  StreamPlan() = default;
  StreamPlan(const TensorTable& table, uint64_t threshold);
  [[nodiscard]] uint64_t threshold() const { return threshold_; }
  [[nodiscard]] uint64_t compact_bytes() const { return compact_bytes_; }
  [[nodiscard]] uint64_t total_bytes() const { return total_; }
  [[nodiscard]] size_t packed_count() const { return packed_count_; }
  [[nodiscard]] bool packed(size_t tensor) const { return packed_[tensor] != 0; }
  [[nodiscard]] uint64_t offset(size_t tensor) const { return offset_[tensor]; }
  // Tensor indices in stream order (0-byte tensors left out).
  [[nodiscard]] const std::vector<size_t>& order() const { return order_; }
  // True when both plans pack the same tensors (so the streams are the same bytes).
  [[nodiscard]] bool same_packing(const StreamPlan& o) const { return packed_ == o.packed_; }
  // Calls fn(tensor, offset in tensor, stream offset, n) for each piece of stream [a, b).
  template <typename Fn>
  void for_each_piece(uint64_t a, uint64_t b, Fn&& fn) const;
  // The tensor at stream offset `off`, for messages.
  [[nodiscard]] size_t tensor_at(uint64_t off) const;

 private:
  uint64_t threshold_ = 0;
  uint64_t compact_bytes_ = 0;
  uint64_t total_ = 0;
  size_t packed_count_ = 0;
  std::vector<char> packed_;
  std::vector<uint64_t> offset_;
  std::vector<uint64_t> bytes_;
  std::vector<size_t> order_;
};

template <typename Fn>
void StreamPlan::for_each_piece(uint64_t a, uint64_t b, Fn&& fn) const {
  // The tensors' stream ranges are disjoint and sorted in order_.
  for (size_t i : order_) {
    uint64_t lo = offset_[i];
    uint64_t hi = lo + bytes_[i];
    if (hi <= a) continue;
    if (lo >= b) break;
    uint64_t s = lo > a ? lo : a;
    uint64_t e = hi < b ? hi : b;
    fn(i, s - lo, s, e - s);
  }
}

// One contiguous piece of local memory holding stream [offset, offset + bytes).
struct Segment {
  char* addr = nullptr;
  uint64_t bytes = 0;
  uint64_t offset = 0;
  bool mergeable = false;  // host memory of the user's tensors: a contiguous next one joins it
};

// The local memory a holder serves its stream from, as segments in stream order.
class Stream {
 public:
  // Appends [addr, addr + bytes) to the stream. `merge`: host memory that may share a segment
  // (and so one registration) with the previous one when that one is mergeable and ends
  // exactly at `addr` (tensors laid out back to back, as in one allocation); never across a
  // gap, whose bytes would then be served too.
  void add(char* addr, uint64_t bytes, bool merge = false);
  [[nodiscard]] const std::vector<Segment>& segments() const { return segs_; }
  [[nodiscard]] uint64_t total_bytes() const { return total_; }
  [[nodiscard]] size_t find(uint64_t off) const;  // the segment holding `off` (< total)
  [[nodiscard]] uint64_t hash_blocks() const { return (total_ + kHashBlock - 1) / kHashBlock; }
  [[nodiscard]] uint64_t hash_block(uint64_t b) const;  // XXH3 of integrity block b (host memory)

 private:
  std::vector<Segment> segs_;
  uint64_t total_ = 0;
};

}  // namespace thub::client
