// The shard's byte stream: offsets, 0-byte tensors, layout hashes and integrity blocks.
#include <gtest/gtest.h>

#include <vector>

#include "src/client/descriptor.h"
#include "src/client/layout.h"
#include "src/common/status.h"

namespace thub::client {
namespace {

TEST(LayoutTest, StreamOffsetsSkipEmptyTensors) {
  std::vector<char> a(10), b(5);
  TensorTable t;
  t.add("a", a.data(), a.size(), 0);
  t.add("empty", nullptr, 0, 0);
  t.add("b", b.data(), b.size(), 0);
  EXPECT_EQ(t.total_bytes(), 15u);
  EXPECT_EQ(t.find(0), 0u);
  EXPECT_EQ(t.find(9), 0u);
  EXPECT_EQ(t.find(10), 2u);
  EXPECT_EQ(t.find(14), 2u);
}

TEST(LayoutTest, LayoutHashDependsOnNamesSizesAndOrder) {
  std::vector<char> x(8);
  TensorTable a, b, c, d;
  a.add("w", x.data(), 8, 0);
  a.add("b", x.data(), 4, 0);
  b.add("w", x.data(), 8, 0);
  b.add("b", x.data(), 4, 0);
  c.add("b", x.data(), 4, 0);
  c.add("w", x.data(), 8, 0);
  d.add("w", x.data(), 8, 0);
  d.add("b", x.data(), 5, 0);
  EXPECT_EQ(a.layout_hash(0), b.layout_hash(0));
  EXPECT_NE(a.layout_hash(0), c.layout_hash(0));
  EXPECT_NE(a.layout_hash(0), d.layout_hash(0));
}

// The compaction threshold decides the stream's packing: it is part of the layout, whether
// or not it changes which of these tensors are packed.
TEST(LayoutTest, LayoutHashDependsOnTheCompactionThreshold) {
  std::vector<char> x(8);
  TensorTable a;
  a.add("w", x.data(), 8, 0);
  EXPECT_EQ(a.layout_hash(64u << 10), a.layout_hash(64u << 10));
  EXPECT_NE(a.layout_hash(64u << 10), a.layout_hash(0));
  EXPECT_NE(a.layout_hash(64u << 10), a.layout_hash(2u << 20));
}

TEST(LayoutTest, DuplicateAndNullAreRefused) {
  std::vector<char> x(8);
  TensorTable t;
  t.add("w", x.data(), 8, 0);
  EXPECT_THROW(t.add("w", x.data(), 8, 0), Error);
  EXPECT_THROW(t.add("n", nullptr, 8, 0), Error);
  EXPECT_THROW(t.add("", x.data(), 8, 0), Error);
}

TEST(LayoutTest, IntegrityBlocksSpanTensors) {
  std::vector<char> a(kHashBlock / 2 + 3, 'a'), b(kHashBlock, 'b');
  TensorTable t;
  t.add("a", a.data(), a.size(), 0);
  t.add("b", b.data(), b.size(), 0);
  EXPECT_EQ(t.hash_blocks(), 2u);
  uint64_t h0 = t.hash_block(0), h1 = t.hash_block(1);
  b[kHashBlock / 2 - 4] ^= 1;  // inside block 0's tail (it spans into b)
  EXPECT_NE(t.hash_block(0), h0);
  EXPECT_EQ(t.hash_block(1), h1);
}

TEST(DescriptorTest, RoundTripAndMalformedInput) {
  Descriptor d;
  d.worker_address = std::string("\0\1addr", 6);
  d.counter = {100, 8, "rk"};
  d.hashes = {200, 16, "hk"};
  d.tensors.push_back({"w", {300, 64, "tk"}});
  d.tensors.push_back({"empty", {0, 0, ""}});
  std::string s = encode_descriptor(d);
  Descriptor e = decode_descriptor(s);
  EXPECT_EQ(e.worker_address, d.worker_address);
  ASSERT_EQ(e.tensors.size(), 2u);
  EXPECT_EQ(e.tensors[0].region.addr, 300u);
  EXPECT_EQ(e.hashes.rkey, "hk");
  for (size_t n = 0; n < s.size(); n += 3) {
    try {
      (void)decode_descriptor(s.substr(0, n));
      ADD_FAILURE() << "accepted a truncated descriptor of " << n << " bytes";
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), Code::kTransport);
    }
  }
}

}  // namespace
}  // namespace thub::client

#include "src/client/progress_counter.h"

namespace thub::client {
namespace {

// A holder updated in place is granted the new version before it resets its counter: the
// old value must never count as bytes of the new version (the demo caught this race).
TEST(ProgressCounterTest, BytesCountOnlyForTheTaggedVersion) {
  uint64_t v1_full = counter_value(1, 64u << 20);
  EXPECT_EQ(counter_bytes_of(v1_full, 1), 64u << 20);
  EXPECT_EQ(counter_bytes_of(v1_full, 2), 0u);
  EXPECT_EQ(counter_bytes(v1_full), 64u << 20);
  EXPECT_EQ(counter_bytes_of(counter_value(7, kMaxShardBytes), 7), kMaxShardBytes);
  EXPECT_EQ(counter_bytes_of(0, 0), 0u);
  EXPECT_EQ(counter_bytes_of(counter_value((1 << 24) + 3, 5), 3), 5u);  // the tag is the low 24 bits
}

}  // namespace
}  // namespace thub::client
