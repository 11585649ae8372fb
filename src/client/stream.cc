#include "src/client/stream.h"

#include <algorithm>

#include "src/common/hash.h"

namespace thub::client {

StreamPlan::StreamPlan(const TensorTable& table, uint64_t threshold) : threshold_(threshold) {
  const auto& ts = table.tensors();
  packed_.assign(ts.size(), 0);
  offset_.assign(ts.size(), 0);
  bytes_.assign(ts.size(), 0);
  for (size_t i = 0; i < ts.size(); ++i) {
    bytes_[i] = ts[i].bytes;
    if (ts[i].bytes > 0 && ts[i].bytes < threshold) {
      packed_[i] = 1;
      offset_[i] = compact_bytes_;
      compact_bytes_ += ts[i].bytes;
      order_.push_back(i);
      packed_count_++;
    }
  }
  total_ = compact_bytes_;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (packed_[i]) continue;
    offset_[i] = total_;
    total_ += ts[i].bytes;
    if (ts[i].bytes > 0) order_.push_back(i);
  }
}

size_t StreamPlan::tensor_at(uint64_t off) const {
  for (size_t i : order_) {
    if (off >= offset_[i] && off < offset_[i] + bytes_[i]) return i;
  }
  return order_.empty() ? 0 : order_.back();
}

void Stream::add(char* addr, uint64_t bytes, bool merge) {
  if (bytes == 0) return;
  if (merge && !segs_.empty() && segs_.back().mergeable && segs_.back().addr + segs_.back().bytes == addr) {
    segs_.back().bytes += bytes;
  } else {
    segs_.push_back({addr, bytes, total_, merge});
  }
  total_ += bytes;
}

size_t Stream::find(uint64_t off) const {
  auto it = std::upper_bound(segs_.begin(), segs_.end(), off, [](uint64_t o, const Segment& s) { return o < s.offset; });
  return static_cast<size_t>(it - segs_.begin()) - 1;
}

uint64_t Stream::hash_block(uint64_t b) const {
  uint64_t start = b * kHashBlock;
  uint64_t end = std::min(total_, start + kHashBlock);
  BlockHasher h;
  uint64_t off = start;
  while (off < end) {
    const Segment& s = segs_[find(off)];
    uint64_t in = off - s.offset;
    uint64_t n = std::min(end - off, s.bytes - in);
    h.update(s.addr + in, n);
    off += n;
  }
  return h.digest();
}

}  // namespace thub::client
