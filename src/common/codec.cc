#include "src/common/codec.h"

#include <cstring>

namespace thub {

namespace {
template <typename T>
void put_le(std::string& b, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
template <typename T>
T get_le(const char* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
}  // namespace

Writer& Writer::u16(uint16_t v) { put_le(buf_, v); return *this; }
Writer& Writer::u32(uint32_t v) { put_le(buf_, v); return *this; }
Writer& Writer::u64(uint64_t v) { put_le(buf_, v); return *this; }
Writer& Writer::raw(const void* p, size_t n) {
  buf_.append(static_cast<const char*>(p), n);
  return *this;
}
Writer& Writer::str(std::string_view s) {
  if (s.size() > UINT32_MAX) throw CodecError("string too long to encode");
  u32(static_cast<uint32_t>(s.size()));
  return raw(s.data(), s.size());
}
void patch_u32(std::string& buf, size_t at, uint32_t v) {
  if (at + 4 > buf.size()) throw CodecError("patch out of range");
  for (size_t i = 0; i < 4; ++i) buf[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

void Writer::patch_u32(size_t at, uint32_t v) { thub::patch_u32(buf_, at, v); }

const char* Reader::take(size_t n) {
  if (n > remaining()) {
    throw CodecError("truncated input: need " + std::to_string(n) + " bytes at offset " +
                     std::to_string(pos_) + ", have " + std::to_string(remaining()));
  }
  const char* p = in_.data() + pos_;
  pos_ += n;
  return p;
}
uint8_t Reader::u8() { return static_cast<uint8_t>(*take(1)); }
uint16_t Reader::u16() { return get_le<uint16_t>(take(2)); }
uint32_t Reader::u32() { return get_le<uint32_t>(take(4)); }
uint64_t Reader::u64() { return get_le<uint64_t>(take(8)); }
bool Reader::boolean() {
  uint8_t v = u8();
  if (v > 1) throw CodecError("bad boolean value " + std::to_string(v));
  return v == 1;
}
std::string Reader::str() {
  uint32_t n = u32();
  if (n > max_str_) throw CodecError("string of " + std::to_string(n) + " bytes exceeds the limit");
  const char* p = take(n);
  return std::string(p, n);
}
uint32_t Reader::count(size_t min_item_bytes) {
  uint32_t n = u32();
  if (min_item_bytes && n > remaining() / min_item_bytes) {
    throw CodecError("count " + std::to_string(n) + " exceeds what the input can hold");
  }
  return n;
}
void Reader::expect_end() const {
  if (remaining() != 0) throw CodecError(std::to_string(remaining()) + " trailing bytes");
}

}  // namespace thub
