// The host shard that a transfer benchmark moves: one page-aligned buffer holding a list of
// tensors (views into it, each starting on a page), touched on allocation so that page
// faults stay out of the timings; and the layouts the suite moves (issue 11): one tensor,
// T equal tensors, N x S fixed-size tensors, a real 7B-shaped list.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <tensorhub/tensorhub.h>

namespace thub::bench {

// A shard layout: its tensors' sizes, in registration order.
struct Layout {
  std::string spec;            // as given: "1", "100", "1000x1M", "8192x8K", "7b"
  std::vector<size_t> sizes;
  [[nodiscard]] uint64_t bytes() const;
};

// "T" (T equal tensors of `bytes` in all, the last takes the rest), "NxS" (N tensors of S
// bytes: `bytes` is ignored), "7b" (bench/common/llama_layout.h scaled to about `bytes`).
// Throws std::runtime_error on a bad spec.
Layout make_layout(const std::string& spec, uint64_t bytes);
// True when the spec fixes the shard size itself ("NxS").
bool layout_fixes_size(const std::string& spec);
// "64M" -> 64 MiB; K/M/G binary suffixes; throws on a bad size.
uint64_t parse_size(const std::string& s);
std::string size_text(uint64_t bytes);  // 64M, 1G, 1000M, or plain bytes

class Shard {
 public:
  // `alloc_ctx`: allocate the shard with THUB_Alloc_mem of that context (UCX shared memory)
  // instead of aligned_alloc. `huge_pages`: aligned_alloc'd on 2 MiB and advised
  // MADV_HUGEPAGE before it is first written (transparent huge pages, as an allocator that
  // asks for them gives). Throws std::bad_alloc.
  explicit Shard(const Layout& layout, THUB_Context alloc_ctx = THUB_CONTEXT_NULL, bool huge_pages = false);
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  [[nodiscard]] char* data() const { return base_; }
  [[nodiscard]] size_t bytes() const { return bytes_; }  // the tensors' bytes (not the padding)
  [[nodiscard]] int tensors() const { return static_cast<int>(len_.size()); }
  [[nodiscard]] char* tensor(int i) const { return base_ + off_[i]; }
  [[nodiscard]] size_t tensor_bytes(int i) const { return len_[i]; }

  void fill(uint64_t seed);              // a pattern that depends on the seed and position
  void zero();
  [[nodiscard]] uint64_t checksum() const;  // position-dependent, over every tensor byte

 private:
  char* base_ = nullptr;
  size_t alloc_ = 0;
  THUB_Context alloc_ctx_ = THUB_CONTEXT_NULL;
  size_t bytes_ = 0;
  std::vector<size_t> off_, len_;
};

}  // namespace thub::bench
