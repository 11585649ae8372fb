// The C API's handles are not pointers to our objects: each is an index into a table of live
// objects of one kind, with a generation and the kind in its upper bits (MPICH encodes its
// handles the same way). A stale handle (used after free, close or finalize, or through a
// copy), a handle of another kind, or a forged value is looked up and refused, never
// dereferenced; a slot reused later has another generation, so an old handle never names the
// new object. Lookups hand out a shared_ptr: an object stays alive until the calls that use
// it return, even if another thread removes its handle meanwhile.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace thub::capi {

template <typename T, unsigned Kind>
class HandleTable {
 public:
  static_assert(Kind >= 1 && Kind < 16, "4 bits of kind");

  uintptr_t insert(std::shared_ptr<T> obj) {
    std::lock_guard<std::mutex> lk(mu_);
    uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
    } else {
      i = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    Slot& s = slots_[i];
    s.gen = (s.gen + 1) & kGenMask;
    if (s.gen == 0) s.gen = 1;
    s.obj = std::move(obj);
    return encode(i, s.gen);
  }

  [[nodiscard]] std::shared_ptr<T> find(uintptr_t h) const {
    std::lock_guard<std::mutex> lk(mu_);
    const Slot* s = slot(h);
    return s ? s->obj : nullptr;
  }

  // Removes the handle; returns the object (null when the handle was not live).
  std::shared_ptr<T> remove(uintptr_t h) {
    std::lock_guard<std::mutex> lk(mu_);
    Slot* s = const_cast<Slot*>(slot(h));
    if (!s) return nullptr;
    std::shared_ptr<T> obj = std::move(s->obj);
    s->obj.reset();
    free_.push_back(static_cast<uint32_t>(s - slots_.data()));
    return obj;
  }

 private:
  static constexpr uint64_t kGenMask = (1ull << 27) - 1;
  struct Slot {
    uint64_t gen = 0;
    std::shared_ptr<T> obj;
  };
  // bit 63: 0 (never a kernel address); bits 59-62: kind; bits 32-58: generation; 0-31: index
  static uintptr_t encode(uint32_t i, uint64_t gen) {
    return static_cast<uintptr_t>((static_cast<uint64_t>(Kind) << 59) | (gen << 32) | i);
  }
  const Slot* slot(uintptr_t h) const {
    const uint64_t v = h;
    if ((v >> 59) != Kind) return nullptr;
    const uint64_t gen = (v >> 32) & kGenMask;
    const uint64_t i = v & 0xffffffffu;
    if (i >= slots_.size() || gen == 0) return nullptr;
    const Slot& s = slots_[i];
    return s.gen == gen && s.obj ? &s : nullptr;
  }

  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

static_assert(sizeof(uintptr_t) == 8, "handles need 64-bit pointers");

}  // namespace thub::capi
