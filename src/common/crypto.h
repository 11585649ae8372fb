// The little cryptography the control plane needs to authenticate its peers, self-contained
// (no OpenSSL): SHA-256 (FIPS 180-4), HMAC-SHA256 (RFC 2104, tested with RFC 4231's vectors),
// a comparison whose time does not depend on where two secrets differ, and fresh random bytes
// from the kernel (getrandom). No encryption: control messages are authenticated at connect,
// not hidden (docs/security.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace thub {

class Sha256 {
 public:
  static constexpr size_t kDigestBytes = 32;
  static constexpr size_t kBlockBytes = 64;
  using Digest = std::array<uint8_t, kDigestBytes>;

  Sha256() { reset(); }
  void reset();
  void update(const void* p, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  [[nodiscard]] Digest finish();  // the object must be reset() before it is used again

  static Digest of(std::string_view s);

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[kBlockBytes];
  size_t fill_ = 0;
  uint64_t total_ = 0;  // bytes hashed
};

// HMAC-SHA256 of `message` under `key` (any length: longer than a block is hashed first).
Sha256::Digest hmac_sha256(std::string_view key, std::string_view message);

// The same over a message given in pieces (update, then finish once).
class HmacSha256 {
 public:
  explicit HmacSha256(std::string_view key);
  void update(const void* p, size_t n) { inner_.update(p, n); }
  void update(std::string_view s) { inner_.update(s); }
  [[nodiscard]] Sha256::Digest finish();

 private:
  Sha256 inner_;
  uint8_t opad_[Sha256::kBlockBytes];
};

// True when a and b are equal. Sizes are not secret (an early false when they differ); for
// equal sizes the time depends only on the size, never on the contents.
bool constant_time_equal(std::string_view a, std::string_view b);

// `n` bytes from getrandom(2) (the kernel's CSPRNG). Throws Error(kInternal) if it fails.
std::string random_bytes(size_t n);

// "ab01..." (for tests and logs of non-secret values).
std::string to_hex(std::string_view bytes);

}  // namespace thub
