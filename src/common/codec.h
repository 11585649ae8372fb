// Little-endian byte codec for control messages and descriptors. The reader checks every
// bound and throws CodecError on malformed input: a bad message is an error reply, never
// a crash or an out-of-bounds read.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace thub {

class CodecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Overwrites the 4 bytes at `at` of an encoding with `v` (little-endian, as Writer::u32 puts
// it); CodecError when they are not all inside it.
void patch_u32(std::string& buf, size_t at, uint32_t v);

class Writer {
 public:
  Writer() = default;
  // Writes into `reuse`, emptied first: its capacity serves again (a buffer kept across calls).
  explicit Writer(std::string reuse) : buf_(std::move(reuse)) { buf_.clear(); }
  Writer& u8(uint8_t v) { return raw(&v, 1); }
  Writer& u16(uint16_t v);
  Writer& u32(uint32_t v);
  Writer& u64(uint64_t v);
  Writer& i64(int64_t v) { return u64(static_cast<uint64_t>(v)); }
  Writer& boolean(bool v) { return u8(v ? 1 : 0); }
  Writer& str(std::string_view s);  // u32 length + bytes
  Writer& raw(const void* p, size_t n);
  [[nodiscard]] const std::string& data() const { return buf_; }
  [[nodiscard]] std::string take() { return std::move(buf_); }
  void patch_u32(size_t at, uint32_t v);
  [[nodiscard]] size_t size() const { return buf_.size(); }
  void reserve(size_t n) { buf_.reserve(n); }

 private:
  std::string buf_;
};

class Reader {
 public:
  explicit Reader(std::string_view in, size_t max_str = 64u << 20) : in_(in), max_str_(max_str) {}
  uint8_t u8();
  uint16_t u16();
  uint32_t u32();
  uint64_t u64();
  int64_t i64() { return static_cast<int64_t>(u64()); }
  bool boolean();
  std::string str();
  // A count that must fit the remaining input at `min_item_bytes` each.
  uint32_t count(size_t min_item_bytes);
  [[nodiscard]] size_t remaining() const { return in_.size() - pos_; }
  void expect_end() const;

 private:
  const char* take(size_t n);
  std::string_view in_;
  size_t pos_ = 0;
  size_t max_str_;
};

}  // namespace thub
