// Issue 10, item 8: a partial frame that receives no byte for frame_timeout_ms closes its
// connection (before, a peer could leave up to 64 MiB of a frame in the registry for ever);
// the clock runs only while the registry reads that connection, so its own back-pressure
// never counts against a peer.
#include <gtest/gtest.h>

#include "src/registry/protocol.h"
#include "tests/registry/embedded.h"
#include "tests/registry/raw_client.h"

namespace thub::registry::test {
namespace {

TEST(FrameDeadlineTest, StalledPartialFrameClosesTheConnection) {
  Embedded e([](ServerOptions& o) {
    o.frame_timeout_ms = 200;
    o.sched.heartbeat_timeout = 600'000'000;  // the heartbeat deadline must not be what closes it
  });
  RawClient c(e.address());
  ASSERT_TRUE(c.hello());
  std::string publish = encode_frame(MsgType::kPublish, 2, encode_event(sched::Publish{0, 0, 1, 1, 7, std::string(1u << 20, 'd')}));
  ASSERT_TRUE(c.send_bytes(std::string_view(publish).substr(0, 100000)));  // a tenth of it, then silence
  auto r = c.read_reply();
  ASSERT_TRUE(r) << "a stalled partial frame is kept";
  EXPECT_NE(r->detail.find("partial frame"), std::string::npos) << r->detail;
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_TRUE(e.wait_for([](const ServerStats& s) { return s.connections == 0 && s.input_bytes == 0; }));
}

}  // namespace
}  // namespace thub::registry::test
