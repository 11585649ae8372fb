// The registered memory one member serves from: its tensors (the user's buffers, or a
// retention copy in host memory), their UCX registrations, the progress counter and the
// integrity region; and the descriptor that tells peers how to read it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/client/layout.h"

namespace thub::transport {
class MemoryRegion;
class Worker;
}  // namespace thub::transport

namespace thub::client {

struct Holding {
  TensorTable table;
  std::vector<std::unique_ptr<transport::MemoryRegion>> regions;  // per tensor (null: 0 bytes)
  std::unique_ptr<std::atomic<uint64_t>> counter;
  std::unique_ptr<transport::MemoryRegion> counter_region;
  std::vector<uint64_t> hashes;  // [0] = 1 when valid, then one XXH3 per kHashBlock
  std::unique_ptr<transport::MemoryRegion> hash_region;
  std::vector<std::unique_ptr<char[]>> owned;  // a retention copy owns its buffers

  // Register `table`'s memory, the counter and the integrity region. Throws Error(kNoMemory).
  void map(transport::Worker& w);
  [[nodiscard]] bool mapped() const { return counter_region != nullptr; }
  [[nodiscard]] std::string descriptor(const std::string& worker_address) const;
  // A host-memory copy of this holding (data, checksums, a full counter), registered on `w`.
  [[nodiscard]] std::unique_ptr<Holding> copy_to_host(transport::Worker& w) const;
  ~Holding();
};

}  // namespace thub::client
