// The control plane's own SHA-256 and HMAC-SHA256 (src/common/crypto.h) against the
// published vectors: FIPS 180-2's examples for SHA-256 and every case of RFC 4231.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "src/common/crypto.h"

namespace thub {
namespace {

std::string hex(const Sha256::Digest& d) {
  return to_hex(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}
std::string bytes(size_t n, unsigned char c) { return std::string(n, static_cast<char>(c)); }

TEST(HmacSha256Test, Sha256MatchesFips180Examples) {
  EXPECT_EQ(hex(Sha256::of("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(Sha256::of("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(Sha256::of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(Sha256::of("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnop"
                           "qrlmnopqrsmnopqrstnopqrstu")),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(hex(Sha256::of(bytes(1000000, 'a'))), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(HmacSha256Test, StreamingInAnySplitsGivesTheSameDigest) {
  std::string msg;
  for (int i = 0; i < 300; ++i) msg += static_cast<char>(i * 7);
  const std::string want = hex(Sha256::of(msg));
  for (size_t split : {1u, 3u, 55u, 56u, 63u, 64u, 65u, 127u}) {
    Sha256 h;
    for (size_t off = 0; off < msg.size(); off += split) h.update(std::string_view(msg).substr(off, split));
    EXPECT_EQ(hex(h.finish()), want) << split;
  }
}

TEST(HmacSha256Test, Rfc4231TestCases) {
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4 += static_cast<char>(i);
  // Case 1-4, 6, 7: the full output.
  EXPECT_EQ(hex(hmac_sha256(bytes(20, 0x0b), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hex(hmac_sha256(bytes(20, 0xaa), bytes(50, 0xdd))),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  EXPECT_EQ(hex(hmac_sha256(key4, bytes(50, 0xcd))),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // Case 5: truncated to 128 bits.
  EXPECT_EQ(hex(hmac_sha256(bytes(20, 0x0c), "Test With Truncation")).substr(0, 32),
            "a3b6167473100ee06e0c796c2955552b");
  // Cases 6 and 7: a key longer than a block is hashed first.
  EXPECT_EQ(hex(hmac_sha256(bytes(131, 0xaa), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(hex(hmac_sha256(bytes(131, 0xaa),
                            "This is a test using a larger than block-size key and a larger than block-size data. "
                            "The key needs to be hashed before being used by the HMAC algorithm.")),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(HmacSha256Test, ConstantTimeEqualComparesEveryByte) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("same bytes", "same bytes"));
  EXPECT_FALSE(constant_time_equal("same bytes", "same byteS"));  // differs in the last byte
  EXPECT_FALSE(constant_time_equal("Xame bytes", "same bytes"));  // and in the first
  EXPECT_FALSE(constant_time_equal("short", "shorter"));
  EXPECT_FALSE(constant_time_equal(std::string("a\0b", 3), std::string("a\0c", 3)));
}

TEST(HmacSha256Test, RandomBytesAreFreshEachTime) {
  std::set<std::string> seen;
  for (int i = 0; i < 64; ++i) {
    std::string r = random_bytes(32);
    ASSERT_EQ(r.size(), 32u);
    EXPECT_TRUE(seen.insert(r).second) << "getrandom repeated a 32-byte value";
  }
}

}  // namespace
}  // namespace thub
