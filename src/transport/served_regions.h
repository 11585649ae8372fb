// The regions this process serves to process readers (process_reads.h), listed in its own
// memory, so that what a same-host reader may copy out of this process is said by this
// process and not by a descriptor, which any client of the registry can forge (issue 19: a
// forged segment once made a reader copy a trainer's unregistered memory, or its own).
//
// The table is one private mapping of a memfd named "thub-served": a reader finds it in
// /proc/PID/maps, which only this process's own code can make say so, never at an address a
// peer told it. Each served region has a slot: {key, address, length}, the key random and
// never 0, and the rkey of the region names the slot and the key. A reader checks a read
// against the slot before it reads (the range inside the slot's region, learnt from the
// slot itself) and reads the key word again in the same process_vm_readv as the data: a slot
// that no longer shows the key (the region was withdrawn meanwhile) fails the read, and what
// was copied is wiped. Withdrawing clears the key first, before the memory can go.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace thub::transport {

// The mapping's layout, as readers read it.
constexpr uint64_t kServedMagic = 0x31565253'42554854ull;  // "THUBSRV1"
constexpr uint64_t kServedHeaderBytes = 16;                 // magic, capacity
constexpr uint64_t kServedSlotBytes = 24;                   // key, address, length
constexpr char kServedMapName[] = "thub-served";

class ServedRegions {
 public:
  // The process's table (made on first use; never freed).
  static ServedRegions& instance();
  // A slot for [addr, addr + len): false when the table is full or could not be made (the
  // region is then not served to process readers).
  bool serve(uint64_t addr, uint64_t len, uint32_t* slot, uint64_t* key);
  // The slot's key is cleared (readers fail from now on) before this returns.
  void withdraw(uint32_t slot, uint64_t key);
  [[nodiscard]] uint64_t capacity() const { return capacity_; }

 private:
  ServedRegions();
  std::mutex mu_;
  char* base_ = nullptr;
  uint64_t capacity_ = 0;
  std::vector<uint32_t> free_;
  uint32_t next_ = 0;
};

// Where a process's table lies, from /proc/PID/maps: {address, bytes}; bytes 0 when the
// process has none (or its maps cannot be read: the error says why).
struct ServedTable {
  uint64_t addr = 0, bytes = 0;
  std::string error;
};
ServedTable find_served_table(uint32_t pid);

}  // namespace thub::transport
