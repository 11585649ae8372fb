#include "bench/transfer/shard.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace thub::bench {

namespace {
constexpr size_t kPage = 4096;

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

Shard::Shard(size_t bytes, int tensors) : bytes_(bytes) {
  size_t alloc = (bytes + kPage - 1) / kPage * kPage;
  base_ = static_cast<char*>(std::aligned_alloc(kPage, alloc ? alloc : kPage));
  if (!base_) throw std::bad_alloc();
  std::memset(base_, 0, alloc);
  // Equal tensors rounded down to whole pages; the last one takes the rest.
  size_t each = bytes / static_cast<size_t>(tensors) / kPage * kPage;
  if (each == 0) each = bytes / static_cast<size_t>(tensors);
  size_t off = 0;
  for (int i = 0; i < tensors; ++i) {
    size_t len = i + 1 == tensors ? bytes - off : each;
    off_.push_back(off);
    len_.push_back(len);
    off += len;
  }
}

Shard::~Shard() { std::free(base_); }

void Shard::fill(uint64_t seed) {
  size_t words = bytes_ / 8;
  auto* w = reinterpret_cast<uint64_t*>(base_);
  for (size_t i = 0; i < words; ++i) w[i] = mix(seed ^ (i * 0x9E3779B97F4A7C15ull));
  for (size_t i = words * 8; i < bytes_; ++i) base_[i] = static_cast<char>(mix(seed + i));
}

void Shard::zero() { std::memset(base_, 0, bytes_); }

uint64_t Shard::checksum() const {
  size_t words = bytes_ / 8;
  const auto* w = reinterpret_cast<const uint64_t*>(base_);
  uint64_t a = 0, b = 0;
  for (size_t i = 0; i < words; ++i) {
    a += w[i];
    b ^= w[i] + i;  // position-dependent: catches shifted or swapped blocks
  }
  for (size_t i = words * 8; i < bytes_; ++i) a += static_cast<unsigned char>(base_[i]) * (i + 1);
  return mix(a) ^ b;
}

}  // namespace thub::bench
