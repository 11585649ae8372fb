// The host shard that a transfer benchmark moves: one page-aligned buffer of S bytes, split
// into T tensors (views into it), touched on allocation so that page faults stay out of
// the timings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace thub::bench {

class Shard {
 public:
  Shard(size_t bytes, int tensors);  // throws std::bad_alloc
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  [[nodiscard]] char* data() const { return base_; }
  [[nodiscard]] size_t bytes() const { return bytes_; }
  [[nodiscard]] int tensors() const { return static_cast<int>(len_.size()); }
  [[nodiscard]] char* tensor(int i) const { return base_ + off_[i]; }
  [[nodiscard]] size_t tensor_bytes(int i) const { return len_[i]; }

  void fill(uint64_t seed);              // a pattern that depends on the seed and position
  void zero();
  [[nodiscard]] uint64_t checksum() const;  // position-dependent, over every byte

 private:
  char* base_ = nullptr;
  size_t bytes_ = 0;
  std::vector<size_t> off_, len_;
};

}  // namespace thub::bench
