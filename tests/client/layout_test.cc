// The shard's byte stream: offsets, 0-byte tensors, layout hashes and integrity blocks.
#include <gtest/gtest.h>

#include <set>
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

// The hash is kept from one publish to the next (every publish asks for it): a tensor added
// since must change it, as it changes a table hashed for the first time.
TEST(LayoutTest, LayoutHashFollowsATensorAddedAfterItWasTaken) {
  std::vector<char> x(8);
  TensorTable a, b;
  a.add("w", x.data(), 8, 0);
  const uint64_t one = a.layout_hash(0);
  a.add("b", x.data(), 4, 0);
  b.add("w", x.data(), 8, 0);
  b.add("b", x.data(), 4, 0);
  EXPECT_NE(a.layout_hash(0), one);
  EXPECT_EQ(a.layout_hash(0), b.layout_hash(0));
  EXPECT_NE(a.layout_hash(64u << 10), a.layout_hash(0));  // another threshold is hashed anew
  EXPECT_EQ(a.layout_hash(0), b.layout_hash(0));
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
  d.tensors.push_back({"w", 64});
  d.tensors.push_back({"empty", 0});
  std::string s = encode_descriptor(d);
  Descriptor e = decode_descriptor(s);
  EXPECT_EQ(e.worker_address, d.worker_address);
  ASSERT_EQ(e.tensors.size(), 2u);
  EXPECT_EQ(e.tensors[0].name, "w");
  EXPECT_EQ(e.tensors[0].bytes, 64u);
  EXPECT_EQ(e.tensors[1].name, "empty");
  // A descriptor of another version (every process of a job must run one library version):
  // refused, naming both versions.
  std::string v3 = s;
  v3[0] = 3;
  try {
    (void)decode_descriptor(v3);
    ADD_FAILURE() << "accepted a descriptor of version 3";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), Code::kTransport);
    EXPECT_NE(std::string(err.what()).find("descriptor version 3, this library reads version 4"), std::string::npos)
        << err.what();
  }
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

#include "src/client/holding.h"
#include "src/transport/worker.h"

namespace thub::client {
namespace {

// Tensors back to back in host memory share one stream segment; a gap, a segment that may
// not merge (CUDA, the compact buffer) or one after it starts a new segment.
TEST(StreamTest, BackToBackHostTensorsShareOneSegment) {
  std::vector<char> buf(3 * 4096 + 200);
  Stream s;
  s.add(buf.data(), 4096, true);
  s.add(buf.data() + 4096, 4096, true);          // joins: one segment of 8 KiB
  s.add(buf.data() + 8192 + 1, 100, true);       // one byte apart: a new segment
  s.add(buf.data() + 8192 + 101, 50, false);     // may not merge
  s.add(buf.data() + 8192 + 151, 10, true);      // after one that may not merge
  ASSERT_EQ(s.segments().size(), 4u);
  EXPECT_EQ(s.segments()[0].bytes, 8192u);
  EXPECT_EQ(s.segments()[1].offset, 8192u);
  EXPECT_EQ(s.segments()[3].offset, 8192u + 150);
  EXPECT_EQ(s.total_bytes(), 8192u + 160);
  EXPECT_EQ(s.find(8191), 0u);
  EXPECT_EQ(s.find(8192), 1u);
}

// Issue 21 item 4: a shard whose tensors tile one allocation registers it once. The packed
// tiny tensors between large ones split the stream's segments, not the registration (their
// bytes are the shard's own); a tensor elsewhere gets a registration of its own, and the
// descriptor names every segment with its registration's key.
TEST(StreamTest, AHoldingRegistersEachSpanOfItsTensorsOnce) {
  std::unique_ptr<transport::Worker> w = transport::Worker::create({});
  std::vector<char> flat(64 * 16384 + 64 * 8), apart(16384);
  Holding h;
  size_t off = 0;
  for (int i = 0; i < 64; ++i) {
    h.table.add("w" + std::to_string(i), flat.data() + off, 16384, 0);
    off += 16384;
    h.table.add("b" + std::to_string(i), flat.data() + off, 8, 0);  // packed: below the threshold
    off += 8;
  }
  h.table.add("elsewhere", apart.data(), apart.size(), 0);
  h.map(*w, /*threshold=*/1024, false, nullptr);
  // The compact segment, 64 large tensors split by the packed ones, and the one elsewhere.
  ASSERT_EQ(h.stream.segments().size(), 1u + 64 + 1);
  ASSERT_EQ(h.regions.size(), h.stream.segments().size());
  std::set<const void*> distinct;
  for (const auto& r : h.regions) distinct.insert(r.get());
  EXPECT_EQ(distinct.size(), 3u) << "compact, the flat allocation, the tensor elsewhere";
  const Descriptor d = decode_descriptor(h.descriptor(w->address(), 1));
  ASSERT_EQ(d.segments.size(), h.stream.segments().size());
  EXPECT_EQ(d.segments[1].rkey, d.segments[64].rkey);
  EXPECT_NE(d.segments[1].rkey, d.segments[65].rkey);
  EXPECT_EQ(d.segments[65].bytes, apart.size());
}

// A holder encodes its descriptor once per mapping and patches each fill's epoch and staged
// flag into a copy: every fill's descriptor must be exactly the one encoded whole for it, and
// a new mapping (other segments, other keys) must be encoded anew.
TEST(StreamTest, EachFillsDescriptorIsTheWholeEncodingOfThatFill) {
  std::unique_ptr<transport::Worker> w = transport::Worker::create({});
  std::vector<char> big(64 << 10), tiny(16);
  Holding h;
  h.table.add("big", big.data(), big.size(), 0);
  h.table.add("tiny", tiny.data(), tiny.size(), 0);
  h.map(*w, /*threshold=*/1024, false, nullptr);
  const uint32_t e1 = h.publish_fill(false);
  const std::string d1 = h.descriptor(w->address(), e1);
  const Descriptor x1 = decode_descriptor(d1);
  EXPECT_EQ(x1.epoch, e1);
  EXPECT_TRUE(x1.staged) << "the tiny tensor is packed behind the publish";
  EXPECT_EQ(encode_descriptor(x1), d1);
  const uint32_t e2 = h.publish_fill(true);
  ASSERT_NE(e2, e1);
  const std::string d2 = h.descriptor(w->address(), e2);
  const Descriptor x2 = decode_descriptor(d2);
  EXPECT_EQ(x2.epoch, e2);
  EXPECT_EQ(encode_descriptor(x2), d2);
  ASSERT_EQ(x2.tensors.size(), 2u);
  EXPECT_EQ(x2.tensors[0].name, "big");
  EXPECT_EQ(x2.tensors[0].bytes, big.size());
  EXPECT_EQ(x2.tensors[1].name, "tiny");
  EXPECT_EQ(x2.segments.size(), x1.segments.size());
  // Mapped again (here without compaction: the tiny tensor is served in place): the segments
  // and their keys are the new mapping's.
  h.map(*w, /*threshold=*/0, false, nullptr);
  const uint32_t e3 = h.publish_fill(false);
  const Descriptor x3 = decode_descriptor(h.descriptor(w->address(), e3));
  EXPECT_EQ(x3.epoch, e3);
  EXPECT_FALSE(x3.staged);
  EXPECT_EQ(x3.compaction_threshold, 0u);
  ASSERT_EQ(x3.segments.size(), h.stream.segments().size());
  EXPECT_EQ(x3.segments.back().addr, reinterpret_cast<uint64_t>(tiny.data()));
  EXPECT_NE(x3.counter.rkey, "");
  // The next fill hashes (verify): staged now, in the same mapping.
  const uint32_t e4 = h.publish_fill(true);
  const std::string d4 = h.descriptor(w->address(), e4);
  const Descriptor x4 = decode_descriptor(d4);
  EXPECT_EQ(x4.epoch, e4);
  EXPECT_TRUE(x4.staged);
  EXPECT_EQ(encode_descriptor(x4), d4);
}

}  // namespace
}  // namespace thub::client
