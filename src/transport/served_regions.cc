#include "src/transport/served_regions.h"

#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace thub::transport {

namespace {
constexpr uint64_t kSlots = 1u << 16;  // 1.5 MiB of address space; pages are touched as used

uint64_t random_key() {
  uint64_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) v = 0;
  }
  return v;
}

std::atomic<uint64_t>* word(char* p) { return reinterpret_cast<std::atomic<uint64_t>*>(p); }
}  // namespace

ServedRegions& ServedRegions::instance() {
  static ServedRegions* t = new ServedRegions();  // never destroyed: regions may outlive statics
  return *t;
}

ServedRegions::ServedRegions() {
  const uint64_t bytes = kServedHeaderBytes + kSlots * kServedSlotBytes;
  int fd = ::memfd_create(kServedMapName, MFD_CLOEXEC);
  if (fd < 0) return;
  // Private: a child made by fork gets its own copy, never a table shared with its parent.
  void* p = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) == 0) p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) return;
  base_ = static_cast<char*>(p);
  word(base_ + 8)->store(kSlots, std::memory_order_relaxed);
  word(base_)->store(kServedMagic, std::memory_order_release);
  capacity_ = kSlots;
}

bool ServedRegions::serve(uint64_t addr, uint64_t len, uint32_t* slot, uint64_t* key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!base_) return false;
  uint32_t s = 0;
  if (!free_.empty()) {
    s = free_.back();
    free_.pop_back();
  } else if (next_ < capacity_) {
    s = next_++;
  } else {
    return false;
  }
  char* e = base_ + kServedHeaderBytes + uint64_t{s} * kServedSlotBytes;
  const uint64_t k = random_key();
  word(e + 8)->store(addr, std::memory_order_relaxed);
  word(e + 16)->store(len, std::memory_order_relaxed);
  word(e)->store(k, std::memory_order_release);  // the bounds first, then the key
  *slot = s;
  *key = k;
  return true;
}

void ServedRegions::withdraw(uint32_t slot, uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!base_ || slot >= next_) return;
  char* e = base_ + kServedHeaderBytes + uint64_t{slot} * kServedSlotBytes;
  if (word(e)->load(std::memory_order_relaxed) != key) return;  // not this region's slot
  // Cleared before the memory can change owner: a read whose key word still shows `key`
  // read memory that was served then.
  word(e)->store(0, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  free_.push_back(slot);
}

ServedTable find_served_table(uint32_t pid) {
  ServedTable t;
  const std::string path = "/proc/" + std::to_string(pid) + "/maps";
  FILE* f = std::fopen(path.c_str(), "re");
  if (!f) {
    t.error = "cannot read " + path + ": " + std::strerror(errno);
    return t;
  }
  // "start-end perms offset dev inode   /memfd:thub-served (deleted)"
  const std::string name = std::string("/memfd:") + kServedMapName;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    const char* hit = std::strstr(line, name.c_str());
    if (!hit || hit == line || hit[-1] != ' ') continue;  // the path field, whole
    const char after = hit[name.size()];
    if (after != ' ' && after != '\n' && after != '\0') continue;  // another name that starts so
    unsigned long long a = 0, b = 0, off = 0;
    if (std::sscanf(line, "%llx-%llx %*s %llx", &a, &b, &off) != 3 || b <= a || off != 0) continue;
    t.addr = a;
    t.bytes = b - a;
    break;
  }
  std::fclose(f);
  if (t.bytes == 0) t.error = "pid " + std::to_string(pid) + " lists no served regions (no " + name + " mapping)";
  return t;
}

}  // namespace thub::transport
