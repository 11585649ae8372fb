#include "tests/fuzz/alloc_guard.h"

#include <cstdlib>
#include <new>

namespace thub::fuzz {
namespace {
thread_local size_t t_limit = 0;  // 0: not armed
thread_local size_t t_largest = 0;
thread_local size_t t_refused = 0;

void* allocate(size_t n) {
  if (t_limit != 0) {
    if (n > t_largest) t_largest = n;
    if (n > t_limit) {
      if (t_refused == 0) t_refused = n;
      throw std::bad_alloc();
    }
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

AllocGuard::AllocGuard(size_t limit) : saved_limit_(t_limit), saved_largest_(t_largest), saved_refused_(t_refused) {
  t_limit = limit;
  t_largest = 0;
  t_refused = 0;
}
AllocGuard::~AllocGuard() {
  t_limit = saved_limit_;
  t_largest = saved_largest_;
  t_refused = saved_refused_;
}
size_t AllocGuard::largest() const { return t_largest; }
size_t AllocGuard::refused() const { return t_refused; }

}  // namespace thub::fuzz

// Replacements of the global allocation functions for this binary (malloc/free underneath,
// so AddressSanitizer still sees every block). The aligned and nothrow forms of the standard
// library call these or malloc/free.
void* operator new(size_t n) { return thub::fuzz::allocate(n); }
void* operator new[](size_t n) { return thub::fuzz::allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
