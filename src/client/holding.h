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

#include "src/client/descriptor.h"
#include "src/client/layout.h"
#include "src/client/progress_counter.h"
#include "src/client/stream.h"

namespace thub::transport {
class MemoryRegion;
class Worker;
}  // namespace thub::transport

namespace thub::client {

class TensorCopier;

// An upper bound of the descriptor's size for `table` served as `plan` (copy: one segment).
uint64_t descriptor_bound(const TensorTable& table, const StreamPlan& plan, bool copy);

// What a transfer into a holding may do to what peers see of it (the narrow handle the
// transfer job gets): show bytes it has checked, their checksums first.
class FillWriter {
 public:
  FillWriter() = default;
  FillWriter(ProgressCounter* counter, uint64_t* hashes, uint64_t words, uint32_t fill)
      : counter_(counter), hashes_(hashes), words_(words), fill_(fill) {}
  // The source's integrity flag and its checksums of blocks [from, to), then the counter
  // shows `held` bytes of this fill (a seqlock writer: data and checksums before the counter).
  void show(uint64_t flag, const uint64_t* block_hashes, uint64_t from, uint64_t to, uint64_t held);
  [[nodiscard]] uint64_t hash_region_bytes() const { return words_ * sizeof(uint64_t); }
  [[nodiscard]] bool valid() const { return counter_ != nullptr; }

 private:
  ProgressCounter* counter_ = nullptr;
  uint64_t* hashes_ = nullptr;
  uint64_t words_ = 0;
  uint32_t fill_ = 0;
};

class Holding {
 public:
  TensorTable table;
  StreamPlan plan;
  Stream stream;
  bool copy_mode = false;
  std::shared_ptr<transport::MemoryRegion> compact;  // direct mode: the compact segment
  std::shared_ptr<transport::MemoryRegion> shadow;   // copy mode: the whole stream
  std::vector<std::shared_ptr<transport::MemoryRegion>> regions;  // what serves each stream segment

  // ---- the fill peers see. These operations are the only writers of the progress counter
  // and the integrity region (progress_counter.h has the protocol).
  // Publish what the buffers hold now as a new fill: the counter shows all of it, or 0 when
  // packing or checksums are made behind (staged(): readers follow the counter). Returns the
  // fill's epoch.
  uint32_t publish_fill(bool verify);
  // Readers of the current fill stop trusting what they read (before the buffers change).
  void withdraw();
  // A transfer will fill the buffers as fill `fill`: the counter shows (fill, 0), no checksums.
  void begin_fill(uint32_t fill);
  // The transfer's handle on the fill begun with begin_fill.
  [[nodiscard]] FillWriter fill_writer();
  // One slice of the staging behind publish_fill: packs the staged bytes of [off, end),
  // hashes the blocks it completes (verify), then shows `end`. False when the fill was
  // withdrawn meanwhile (the buffers change hands: stop).
  bool stage_slice(uint32_t fill, uint64_t off, uint64_t end, bool hash, TensorCopier& c);
  [[nodiscard]] bool staged() const { return staged_; }
  [[nodiscard]] uint32_t epoch() const { return epoch_; }
  [[nodiscard]] uint64_t bytes_shown() const;

  // Memory allocated through the context (THUB_Alloc_mem) holding [addr, addr + len), whose
  // own registration then serves it; null for other memory.
  using AllocLookup = std::function<std::shared_ptr<transport::MemoryRegion>(const void*, uint64_t)>;
  // Plan the stream, allocate its buffers, register them, the counter and the integrity
  // region. Throws Error(kNoMemory).
  void map(transport::Worker& w, uint64_t threshold, bool copy, const AllocLookup& find = {});
  // The same with the stream already planned (StreamPlan(table, threshold)).
  void map(transport::Worker& w, StreamPlan planned, bool copy, const AllocLookup& find = {});
  [[nodiscard]] bool mapped() const { return counter_region_ != nullptr; }
  // How peers read this holding, promising fill `epoch` (the counter's tag once it is filled).
  [[nodiscard]] std::string descriptor(const std::string& worker_address, uint32_t epoch) const;
  // Why a source's descriptor cannot be read into this holding (layout, packing, or a length
  // that does not match this replica's own plan), or "" when it can. Every length and count
  // a peer sent is checked here before the transfer uses it.
  [[nodiscard]] std::string mismatch(const Descriptor& src) const;
  [[nodiscard]] uint64_t hash_region_bytes() const { return hashes_.size() * sizeof(uint64_t); }
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
  // The whole descriptor, encoded; `at` tells where its epoch and staged flag are (patched in
  // by descriptor()).
  [[nodiscard]] std::string encode_all(const std::string& worker_address, DescriptorPatch* at) const;

  bool staged_ = false;  // descriptor flag: the counter leads while the publisher stages
  uint32_t epoch_ = 0;   // the fill the buffers hold or are being filled with (0: none)
  uint64_t hashed_ = 0;  // staging: blocks hashed so far
  // Allocated with the holding, never replaced: THUB_Model_stat reads it (bytes_shown) from
  // any thread while the engine maps the holding (the pointer was set by map: a data race).
  const std::unique_ptr<ProgressCounter> counter_ = std::make_unique<ProgressCounter>();
  std::unique_ptr<transport::MemoryRegion> counter_region_;
  std::vector<uint64_t> hashes_;  // [0] = 1 when valid, then one XXH3 per kHashBlock
  std::unique_ptr<transport::MemoryRegion> hash_region_;
  // descriptor(): encoded at its first call after map() (the tensors, segments and regions do
  // not change until the next map()), then copied with the fill's epoch and flag patched in:
  // a publish of 8,192 tensors encodes nothing. Engine thread only, as descriptor() is.
  mutable std::string desc_bytes_;
  mutable std::string desc_address_;  // the worker address it was encoded with
  mutable size_t desc_tensors_ = 0;   // and the number of tensors
  mutable DescriptorPatch desc_at_;
};

}  // namespace thub::client
