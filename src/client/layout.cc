#include "src/client/layout.h"

#include <algorithm>

#include "src/client/progress_counter.h"
#include "src/common/codec.h"
#include "src/common/hash.h"
#include "src/common/status.h"

namespace thub::client {

// A tensor's memory: not null unless empty, not wrapping around the address space.
void TensorTable::check_place(const std::string& name, const void* addr, uint64_t bytes) {
  if (!addr && bytes > 0) throw Error(Code::kArg, "tensor '" + name + "': null address for " + std::to_string(bytes) + " bytes");
  if (bytes > 0 && reinterpret_cast<uintptr_t>(addr) + bytes < reinterpret_cast<uintptr_t>(addr)) {
    throw Error(Code::kArg, "tensor '" + name + "': " + std::to_string(bytes) + " bytes at this address wrap around");
  }
}

void TensorTable::add(const std::string& name, void* addr, uint64_t bytes, int memtype) {
  hashed_ = false;
  if (name.empty()) throw Error(Code::kArg, "tensor name is empty");
  if (name.size() > kMaxNameBytes) {
    throw Error(Code::kArg, "tensor name of " + std::to_string(name.size()) + " bytes is longer than " +
                                std::to_string(kMaxNameBytes));
  }
  check_place(name, addr, bytes);
  if (bytes > kMaxShardBytes - total_) {
    throw Error(Code::kArg, "tensor '" + name + "' of " + std::to_string(bytes) + " bytes takes the shard past " +
                                std::to_string(kMaxShardBytes) + " bytes (1 TiB): split the model into more shards");
  }
  if (tensors_.size() >= kMaxTensors) {
    throw Error(Code::kArg, "tensor '" + name + "': a shard holds at most " + std::to_string(kMaxTensors) + " tensors");
  }
  if (!names_.emplace(name, tensors_.size()).second) throw Error(Code::kArg, "tensor '" + name + "' is registered twice");
  Tensor t;
  t.name = name;
  t.addr = static_cast<char*>(addr);
  t.bytes = bytes;
  t.memtype = memtype;
  t.offset = total_;
  tensors_.push_back(std::move(t));
  total_ += bytes;
}

size_t TensorTable::index_of(const std::string& name) const {
  auto it = names_.find(name);
  return it == names_.end() ? tensors_.size() : it->second;
}

void TensorTable::repoint(size_t i, void* addr) {
  Tensor& t = tensors_.at(i);
  check_place(t.name, addr, t.bytes);
  t.addr = static_cast<char*>(addr);
}

uint64_t TensorTable::layout_hash(uint64_t compaction_threshold) const {
  if (hashed_ && hashed_threshold_ == compaction_threshold) return hash_;
  Writer w;
  size_t bytes = 4 + 8;
  for (const auto& t : tensors_) bytes += 4 + t.name.size() + 8;
  w.reserve(bytes);
  w.u32(static_cast<uint32_t>(tensors_.size()));
  for (const auto& t : tensors_) w.str(t.name).u64(t.bytes);
  w.u64(compaction_threshold);
  hash_ = hash64(w.data().data(), w.data().size(), 0x7e750f4ull);
  hashed_threshold_ = compaction_threshold;
  hashed_ = true;
  return hash_;
}

size_t TensorTable::find(uint64_t off) const {
  // The last tensor with offset <= off and room at off (skips 0-byte tensors).
  auto it = std::upper_bound(tensors_.begin(), tensors_.end(), off,
                             [](uint64_t o, const Tensor& t) { return o < t.offset; });
  size_t i = static_cast<size_t>(it - tensors_.begin()) - 1;
  while (tensors_[i].bytes == 0 || off >= tensors_[i].offset + tensors_[i].bytes) ++i;
  return i;
}

uint64_t TensorTable::hash_block(uint64_t b) const {
  uint64_t start = b * kHashBlock;
  uint64_t end = std::min(total_, start + kHashBlock);
  BlockHasher h;
  uint64_t off = start;
  while (off < end) {
    const Tensor& t = tensors_[find(off)];
    uint64_t in = off - t.offset;
    uint64_t n = std::min(end - off, t.bytes - in);
    h.update(t.addr + in, n);
    off += n;
  }
  return h.digest();
}

}  // namespace thub::client
