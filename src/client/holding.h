// The registered memory one member serves from: its tensors (the user's buffers, or a
// retention copy in host memory), the stream they travel as (stream.h: the compact segment
// of tiny tensors, then the others), its UCX registrations per stream segment, the progress
// counter and the integrity region; and the descriptor that tells peers how to read it.
//
// Direct mode serves the large tensors in place and only the compact segment from a buffer
// of its own. Copy mode serves the whole stream from one registered host buffer (pinned when
// CUDA tensors are staged through it) and copies between it and the tensors. Buffers of its
// own are allocated through UCX (Worker::allocate: shared memory a reader on this host maps
// and copies from itself), as are tensors in memory from THUB_Alloc_mem; other tensors are
// registered where they are.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "src/client/layout.h"
#include "src/client/progress_counter.h"
#include "src/client/stream.h"

namespace thub::transport {
class MemoryRegion;
class Worker;
}  // namespace thub::transport

namespace thub::client {

class TensorCopier;
struct Descriptor;

// An upper bound of the descriptor's size for `table` served as `plan` (copy: one segment).
uint64_t descriptor_bound(const TensorTable& table, const StreamPlan& plan, bool copy);

struct Holding {
  TensorTable table;
  StreamPlan plan;
  Stream stream;
  bool copy_mode = false;
  bool staged = false;  // descriptor flag: the counter leads while the publisher stages
  std::shared_ptr<transport::MemoryRegion> compact;  // direct mode: the compact segment
  std::shared_ptr<transport::MemoryRegion> shadow;   // copy mode: the whole stream
  std::vector<std::shared_ptr<transport::MemoryRegion>> regions;  // what serves each stream segment
  std::unique_ptr<ProgressCounter> counter;
  uint32_t epoch = 0;  // the fill the buffers hold or are being filled with (0: none)
  std::unique_ptr<transport::MemoryRegion> counter_region;
  std::vector<uint64_t> hashes;  // [0] = 1 when valid, then one XXH3 per kHashBlock
  std::unique_ptr<transport::MemoryRegion> hash_region;

  // Memory allocated through the context (THUB_Alloc_mem) holding [addr, addr + len), whose
  // own registration then serves it; null for other memory.
  using AllocLookup = std::function<std::shared_ptr<transport::MemoryRegion>(const void*, uint64_t)>;
  // Plan the stream, allocate its buffers, register them, the counter and the integrity
  // region. Throws Error(kNoMemory).
  void map(transport::Worker& w, uint64_t threshold, bool copy, const AllocLookup& find = {});
  [[nodiscard]] bool mapped() const { return counter_region != nullptr; }
  // How peers read this holding, promising fill `epoch` (the counter's tag once it is filled).
  [[nodiscard]] std::string descriptor(const std::string& worker_address, uint32_t epoch) const;
  // Why a source's descriptor cannot be read into this holding (layout, packing, or a length
  // that does not match this replica's own plan), or "" when it can. Every length and count
  // a peer sent is checked here before the transfer uses it.
  [[nodiscard]] std::string mismatch(const Descriptor& src) const;
  [[nodiscard]] uint64_t hash_region_bytes() const { return hashes.size() * sizeof(uint64_t); }
  // Tensors -> stream for the pieces of stream [a, b) not served in place (the compact
  // segment in direct mode, everything in copy mode). Copies are issued on `c`.
  void stage(uint64_t a, uint64_t b, TensorCopier& c);
  // Stream -> tensors for the same pieces (a receiver's unpacking / copy-out).
  void deliver(uint64_t a, uint64_t b, TensorCopier& c);
  // The bytes to stage or deliver: the compact segment (direct) or the whole stream (copy).
  [[nodiscard]] uint64_t staged_bytes() const { return copy_mode ? plan.total_bytes() : plan.compact_bytes(); }
  // "tensor 'x'" at a stream offset, for messages.
  [[nodiscard]] std::string where(uint64_t off) const;
  // A host-memory copy of this holding (data, checksums, a full counter), registered on `w`.
  [[nodiscard]] std::unique_ptr<Holding> copy_to_host(transport::Worker& w, int64_t version) const;
  ~Holding();

 private:
  [[nodiscard]] char* buffer_at(uint64_t stream_off) const;
};

}  // namespace thub::client
