#include "bench/transfer/shard.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "bench/common/llama_layout.h"

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

size_t round_up(size_t n) { return (n + kPage - 1) / kPage * kPage; }
}  // namespace

uint64_t Layout::bytes() const {
  uint64_t n = 0;
  for (size_t s : sizes) n += s;
  return n;
}

uint64_t parse_size(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string unit = end ? end : "";
  uint64_t mul = 1;
  if (unit == "K" || unit == "KiB") mul = 1ull << 10;
  else if (unit == "M" || unit == "MiB") mul = 1ull << 20;
  else if (unit == "G" || unit == "GiB") mul = 1ull << 30;
  else if (!unit.empty()) throw std::runtime_error("bad size '" + s + "' (use e.g. 64M, 1G, 1048576)");
  if (!(v > 0)) throw std::runtime_error("bad size '" + s + "'");
  return static_cast<uint64_t>(v * static_cast<double>(mul));
}

std::string size_text(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) std::snprintf(buf, sizeof buf, "%lluG", (unsigned long long)(b >> 30));
  else if (b >= (1ull << 20) && b % (1ull << 20) == 0) std::snprintf(buf, sizeof buf, "%lluM", (unsigned long long)(b >> 20));
  else if (b >= (1ull << 10) && b % (1ull << 10) == 0) std::snprintf(buf, sizeof buf, "%lluK", (unsigned long long)(b >> 10));
  else std::snprintf(buf, sizeof buf, "%llu", (unsigned long long)b);
  return buf;
}

bool layout_fixes_size(const std::string& spec) { return spec.find('x') != std::string::npos; }

Layout make_layout(const std::string& spec, uint64_t bytes) {
  Layout l;
  l.spec = spec;
  if (spec == "7b") {
    LlamaConfig c;
    for (const auto& t : llama_layout(c, llama_divisor(c, bytes))) l.sizes.push_back(t.bytes);
    return l;
  }
  size_t x = spec.find('x');
  if (x != std::string::npos) {
    long n = std::strtol(spec.substr(0, x).c_str(), nullptr, 10);
    uint64_t each = parse_size(spec.substr(x + 1));
    if (n < 1) throw std::runtime_error("bad layout '" + spec + "' (NxS: N >= 1 tensors of S bytes)");
    l.sizes.assign(static_cast<size_t>(n), each);
    return l;
  }
  char* end = nullptr;
  long t = std::strtol(spec.c_str(), &end, 10);
  if (t < 1 || (end && *end)) throw std::runtime_error("bad layout '" + spec + "' (T, NxS or 7b)");
  if (bytes < static_cast<uint64_t>(t)) throw std::runtime_error("a size is smaller than the tensor count");
  // Equal tensors rounded down to whole pages; the last one takes the rest.
  size_t each = bytes / static_cast<size_t>(t) / kPage * kPage;
  if (each == 0) each = bytes / static_cast<size_t>(t);
  size_t off = 0;
  for (long i = 0; i < t; ++i) {
    size_t len = i + 1 == t ? bytes - off : each;
    l.sizes.push_back(len);
    off += len;
  }
  return l;
}

Shard::Shard(const Layout& layout, THUB_Context alloc_ctx, bool huge_pages) : alloc_ctx_(alloc_ctx) {
  size_t off = 0;
  for (size_t len : layout.sizes) {
    off_.push_back(off);
    len_.push_back(len);
    bytes_ += len;
    off += round_up(len);  // every tensor starts on a page, as separate allocations would
  }
  alloc_ = off ? off : kPage;
  if (alloc_ctx_ != THUB_CONTEXT_NULL) {
    void* p = nullptr;
    if (THUB_Alloc_mem(alloc_ctx_, alloc_, THUB_INFO_NULL, &p) != THUB_SUCCESS) throw std::bad_alloc();
    base_ = static_cast<char*>(p);
  } else if (huge_pages) {
    constexpr size_t kHuge = 2u << 20;
    alloc_ = (alloc_ + kHuge - 1) / kHuge * kHuge;
    base_ = static_cast<char*>(std::aligned_alloc(kHuge, alloc_));
    if (base_ && ::madvise(base_, alloc_, MADV_HUGEPAGE) != 0) std::perror("madvise(MADV_HUGEPAGE)");
  } else {
    base_ = static_cast<char*>(std::aligned_alloc(kPage, alloc_));
  }
  if (!base_) throw std::bad_alloc();
  std::memset(base_, 0, alloc_);
}

Shard::~Shard() {
  if (alloc_ctx_ != THUB_CONTEXT_NULL) {
    (void)THUB_Free_mem(alloc_ctx_, base_);
  } else {
    std::free(base_);
  }
}

void Shard::fill(uint64_t seed) {
  for (int t = 0; t < tensors(); ++t) {
    char* p = tensor(t);
    size_t n = len_[t], words = n / 8;
    auto* w = reinterpret_cast<uint64_t*>(p);
    uint64_t s = seed ^ mix(static_cast<uint64_t>(t) + 1);
    for (size_t i = 0; i < words; ++i) w[i] = mix(s ^ (i * 0x9E3779B97F4A7C15ull));
    for (size_t i = words * 8; i < n; ++i) p[i] = static_cast<char>(mix(s + i));
  }
}

void Shard::zero() { std::memset(base_, 0, alloc_); }

uint64_t Shard::checksum() const {
  uint64_t a = 0, b = 0;
  for (int t = 0; t < tensors(); ++t) {
    const char* p = tensor(t);
    size_t n = len_[t], words = n / 8;
    const auto* w = reinterpret_cast<const uint64_t*>(p);
    uint64_t base = static_cast<uint64_t>(t) << 40;
    for (size_t i = 0; i < words; ++i) {
      a += w[i];
      b ^= w[i] + (base | i);  // position-dependent: catches shifted or swapped blocks
    }
    for (size_t i = words * 8; i < n; ++i) a += static_cast<unsigned char>(p[i]) * (base + i + 1);
  }
  return mix(a) ^ b;
}

}  // namespace thub::bench
