// The registry's input and output buffers are consumed from the front in amortized O(1):
// parsing N frames out of one buffer must not move the rest of the buffer once per frame
// (200,000 queued frames used to cost a memmove of the whole buffer each).
#include <gtest/gtest.h>

#include "src/registry/byte_queue.h"
#include "src/registry/protocol.h"

namespace thub::registry {
namespace {

TEST(ByteQueueTest, ParsingManyFramesMovesEachByteAtMostOnce) {
  ByteQueue q;
  std::string frame = encode_frame(MsgType::kHeartbeat, 1, "");
  uint64_t appended = 0;
  size_t parsed = 0;
  // Fill and parse in rounds, as the server does: reads append, frames are consumed one by one.
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 10000; ++i) q.append(frame);
    appended += 10000 * frame.size();
    while (q.size() >= kHeaderBytes) {
      FrameHeader h = decode_header(q.view().substr(0, kHeaderBytes));
      ASSERT_EQ(h.type, MsgType::kHeartbeat);
      q.consume(kHeaderBytes + h.length);
      ++parsed;
      if (parsed % 7 == 0) q.append(frame), appended += frame.size();  // interleaved arrivals
    }
  }
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(parsed * frame.size(), appended);
  EXPECT_LE(q.moved_bytes(), appended);  // linear, not parsed x buffer size
}

TEST(ByteQueueTest, ConsumeKeepsWhatFollows) {
  ByteQueue q;
  q.append(std::string(100000, 'a'));
  q.append("tail");
  q.consume(100000);
  EXPECT_EQ(q.view(), "tail");
  q.consume(2);
  EXPECT_EQ(q.view(), "il");
  q.append("!");
  EXPECT_EQ(q.view(), "il!");
  q.consume(99);  // more than there is: empty, not out of bounds
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace thub::registry
