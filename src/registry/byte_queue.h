// A byte buffer consumed from the front in O(1): an offset moves, and the consumed prefix is
// dropped only once it is at least half of the buffer (and 64 KiB), so parsing N frames out
// of one buffer moves each byte at most once on average instead of once per frame. No
// sockets here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace thub::registry {

class ByteQueue {
 public:
  void append(const char* p, size_t n) { buf_.append(p, n); }
  void append(std::string_view s) { buf_.append(s.data(), s.size()); }
  // Drops the first `n` bytes (n <= size()). Views from view() end here.
  void consume(size_t n);
  void clear();
  [[nodiscard]] std::string_view view() const { return std::string_view(buf_).substr(off_); }
  [[nodiscard]] size_t size() const { return buf_.size() - off_; }
  [[nodiscard]] bool empty() const { return size() == 0; }
  // Bytes moved by compaction since construction: at most the bytes consumed.
  [[nodiscard]] uint64_t moved_bytes() const { return moved_; }

 private:
  static constexpr size_t kCompactAt = 64u << 10;
  std::string buf_;
  size_t off_ = 0;
  uint64_t moved_ = 0;
};

}  // namespace thub::registry
