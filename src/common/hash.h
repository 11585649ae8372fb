// End-to-end integrity: XXH3 over fixed-size blocks of a shard's byte stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace thub {

uint64_t hash64(const void* p, size_t n, uint64_t seed = 0);

// Streaming hash of one block that may span several tensors.
class BlockHasher {
 public:
  BlockHasher();
  ~BlockHasher();
  BlockHasher(const BlockHasher&) = delete;
  BlockHasher& operator=(const BlockHasher&) = delete;
  void reset();
  void update(const void* p, size_t n);
  [[nodiscard]] uint64_t digest() const;

 private:
  void* state_;
};

}  // namespace thub
