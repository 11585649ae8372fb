// A shard's tensor table and the byte stream it forms: the tensors concatenated in
// registration order (0-byte tensors take no room). Transfers, progress counters and
// integrity blocks are all expressed as offsets into this stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace thub::client {

// Integrity blocks are a fixed size so that every replica of a version agrees on them,
// whatever chunk size each uses for its transfers.
constexpr uint64_t kHashBlock = 1u << 20;

// What one shard may register: names travel in every descriptor the registry hands out.
constexpr size_t kMaxNameBytes = 1024;     // a tensor, model or replica name
constexpr size_t kMaxTensors = 1u << 20;   // tensors per shard

struct Tensor {
  std::string name;
  char* addr = nullptr;
  uint64_t bytes = 0;
  int memtype = 0;
  uint64_t offset = 0;  // in the shard's stream
};

class TensorTable {
 public:
  // Throws Error(kArg) for a duplicate, empty or too long name, a null address of a non-empty
  // tensor, memory that wraps around the address space, or a shard past 1 TiB.
  void add(const std::string& name, void* addr, uint64_t bytes, int memtype);
  [[nodiscard]] const std::vector<Tensor>& tensors() const { return tensors_; }
  // The index of the tensor named `name`, or tensors().size() when none is.
  [[nodiscard]] size_t index_of(const std::string& name) const;
  // Copy mode's re-pointing (Model::register_tensor): tensor i lives at `addr` from now on,
  // its name, size, memory type and stream offset unchanged. Throws Error(kArg) as add() does
  // for a null or wrapping address.
  void repoint(size_t i, void* addr);
  [[nodiscard]] uint64_t total_bytes() const { return total_; }
  [[nodiscard]] bool empty() const { return tensors_.empty(); }
  // Hash of (names, sizes, order) and the compaction threshold, which decides how the
  // tensors are packed into the stream (stream.h): replicas of one shard must agree on it,
  // and the registry refuses one that does not before it grants anything.
  [[nodiscard]] uint64_t layout_hash(uint64_t compaction_threshold) const;
  // Index of the tensor holding stream offset `off` (off < total_bytes()).
  [[nodiscard]] size_t find(uint64_t off) const;
  [[nodiscard]] uint64_t hash_blocks() const { return (total_ + kHashBlock - 1) / kHashBlock; }
  // XXH3 of integrity block `b` of this shard's local memory.
  [[nodiscard]] uint64_t hash_block(uint64_t b) const;

 private:
  static void check_place(const std::string& name, const void* addr, uint64_t bytes);  // throws Error(kArg)
  std::vector<Tensor> tensors_;
  std::unordered_map<std::string, size_t> names_;  // name -> index
  uint64_t total_ = 0;
  // layout_hash() of the table as it is, for one threshold (add() forgets it): every publish
  // asks for it, and it reads every name.
  mutable bool hashed_ = false;
  mutable uint64_t hashed_threshold_ = 0, hash_ = 0;
};

}  // namespace thub::client
