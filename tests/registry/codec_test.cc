// The byte codec checks every bound: truncated or oversized input is an error, not a crash.
#include <gtest/gtest.h>

#include "src/common/codec.h"

namespace thub {
namespace {

TEST(CodecTest, RoundTripsEveryType) {
  Writer w;
  w.u8(7).u16(0xbeef).u32(0xdeadbeef).u64(~0ull).i64(-42).boolean(true).str("tensor").str("");
  Reader r(w.data());
  EXPECT_EQ(r.u8(), 7);
  EXPECT_EQ(r.u16(), 0xbeef);
  EXPECT_EQ(r.u32(), 0xdeadbeefu);
  EXPECT_EQ(r.u64(), ~0ull);
  EXPECT_EQ(r.i64(), -42);
  EXPECT_TRUE(r.boolean());
  EXPECT_EQ(r.str(), "tensor");
  EXPECT_EQ(r.str(), "");
  EXPECT_NO_THROW(r.expect_end());
}

TEST(CodecTest, TruncatedInputThrows) {
  Writer w;
  w.str("hello world");
  std::string cut = w.data().substr(0, w.size() - 3);
  Reader r(cut);
  EXPECT_THROW(r.str(), CodecError);
  Reader empty("");
  EXPECT_THROW(empty.u32(), CodecError);
}

TEST(CodecTest, LengthBeyondInputOrLimitThrows) {
  Writer w;
  w.u32(1000000);  // claims a megabyte that is not there
  Reader r(w.data());
  EXPECT_THROW(r.str(), CodecError);
  Writer big;
  big.str(std::string(100, 'x'));
  Reader limited(big.data(), 10);
  EXPECT_THROW(limited.str(), CodecError);
}

TEST(CodecTest, CountMustFitRemainingInput) {
  Writer w;
  w.u32(0xffffffff);
  Reader r(w.data());
  EXPECT_THROW(r.count(8), CodecError);
}

TEST(CodecTest, BadBooleanAndTrailingBytesThrow) {
  Writer w;
  w.u8(2);
  Reader r(w.data());
  EXPECT_THROW(r.boolean(), CodecError);
  Writer t;
  t.u8(1).u8(0);
  Reader r2(t.data());
  r2.u8();
  EXPECT_THROW(r2.expect_end(), CodecError);
}

}  // namespace
}  // namespace thub
