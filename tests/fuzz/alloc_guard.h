// "Lengths and counts are refused before allocation", checked where it happens: this test
// binary replaces the global operator new, and while an AllocGuard is armed on a thread, an
// allocation larger than its limit is refused (std::bad_alloc) and recorded instead of made.
// A decoder that sizes a buffer by a peer's count of 4 billion is caught before it allocates.
#pragma once

#include <cstddef>

namespace thub::fuzz {

class AllocGuard {
 public:
  explicit AllocGuard(size_t limit);
  ~AllocGuard();
  AllocGuard(const AllocGuard&) = delete;
  AllocGuard& operator=(const AllocGuard&) = delete;
  // The largest allocation asked for while armed, and the first one refused (0: none).
  [[nodiscard]] size_t largest() const;
  [[nodiscard]] size_t refused() const;

 private:
  size_t saved_limit_;
  size_t saved_largest_;
  size_t saved_refused_;
};

}  // namespace thub::fuzz
