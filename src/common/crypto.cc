#include "src/common/crypto.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/common/status.h"

namespace thub {

namespace {
constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
}  // namespace

void Sha256::reset() {
  static constexpr uint32_t kInit[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::memcpy(h_, kInit, sizeof h_);
  fill_ = 0;
  total_ = 0;
}

void Sha256::block(const uint8_t* p) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i) {
    w[i] = static_cast<uint32_t>(p[4 * i]) << 24 | static_cast<uint32_t>(p[4 * i + 1]) << 16 |
           static_cast<uint32_t>(p[4 * i + 2]) << 8 | static_cast<uint32_t>(p[4 * i + 3]);
  }
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h_[0] += a;
  h_[1] += b;
  h_[2] += c;
  h_[3] += d;
  h_[4] += e;
  h_[5] += f;
  h_[6] += g;
  h_[7] += h;
}

void Sha256::update(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  total_ += n;
  if (fill_ > 0) {
    size_t take = std::min(n, kBlockBytes - fill_);
    std::memcpy(buf_ + fill_, p, take);
    fill_ += take;
    p += take;
    n -= take;
    if (fill_ < kBlockBytes) return;
    block(buf_);
    fill_ = 0;
  }
  for (; n >= kBlockBytes; p += kBlockBytes, n -= kBlockBytes) block(p);
  if (n > 0) {
    std::memcpy(buf_, p, n);
    fill_ = n;
  }
}

Sha256::Digest Sha256::finish() {
  uint64_t bits = total_ * 8;
  uint8_t pad[kBlockBytes * 2] = {0x80};
  // The message, 0x80, zeros, then its length in bits (big-endian) ending a block.
  size_t npad = (fill_ < 56 ? 56 - fill_ : 120 - fill_);
  for (int i = 0; i < 8; ++i) pad[npad + i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  update(pad, npad + 8);
  Digest d;
  for (int i = 0; i < 8; ++i) {
    d[4 * i] = static_cast<uint8_t>(h_[i] >> 24);
    d[4 * i + 1] = static_cast<uint8_t>(h_[i] >> 16);
    d[4 * i + 2] = static_cast<uint8_t>(h_[i] >> 8);
    d[4 * i + 3] = static_cast<uint8_t>(h_[i]);
  }
  return d;
}

Sha256::Digest Sha256::of(std::string_view s) {
  Sha256 h;
  h.update(s);
  return h.finish();
}

HmacSha256::HmacSha256(std::string_view key) {
  uint8_t k[Sha256::kBlockBytes] = {};
  if (key.size() > Sha256::kBlockBytes) {
    Sha256::Digest kd = Sha256::of(key);
    std::memcpy(k, kd.data(), kd.size());
  } else {
    std::memcpy(k, key.data(), key.size());
  }
  uint8_t ipad[Sha256::kBlockBytes];
  for (size_t i = 0; i < Sha256::kBlockBytes; ++i) {
    ipad[i] = k[i] ^ 0x36;
    opad_[i] = k[i] ^ 0x5c;
  }
  inner_.update(ipad, sizeof ipad);
}

Sha256::Digest HmacSha256::finish() {
  Sha256::Digest id = inner_.finish();
  Sha256 outer;
  outer.update(opad_, sizeof opad_);
  outer.update(id.data(), id.size());
  return outer.finish();
}

Sha256::Digest hmac_sha256(std::string_view key, std::string_view message) {
  HmacSha256 h(key);
  h.update(message);
  return h.finish();
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  // Every byte is looked at; the volatile accumulator keeps the compiler from stopping early.
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = static_cast<uint8_t>(diff | (static_cast<uint8_t>(a[i]) ^ static_cast<uint8_t>(b[i])));
  }
  return diff == 0;
}

std::string random_bytes(size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t k = ::getrandom(out.data() + got, n - got, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) throw Error(Code::kInternal, std::string("getrandom failed: ") + std::strerror(errno));
    got += static_cast<size_t>(k);
  }
  return out;
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (char c : bytes) {
    auto u = static_cast<uint8_t>(c);
    s += kDigits[u >> 4];
    s += kDigits[u & 15];
  }
  return s;
}

}  // namespace thub
