// Issue 10, item 8: before HELLO a peer is nobody, so it may hold almost nothing: no frame
// longer than a HELLO is awaited (the header alone is refused), only a HELLO may come first,
// and a connection that has not said HELLO within hello_timeout_ms is closed. Before, 8
// connections each sending 60 MiB of a "HELLO" made the registry hold 815 MiB, and a
// silent connection was kept for ever.
#include <gtest/gtest.h>

#include "src/registry/protocol.h"
#include "tests/registry/daemon.h"
#include "tests/registry/embedded.h"
#include "tests/registry/raw_client.h"

namespace thub::registry::test {
namespace {

std::string header(MsgType t, uint32_t length) {
  Writer w;
  w.u32(kMagic).u16(kProtocolVersion).u16(static_cast<uint16_t>(t)).u64(1).u32(length);
  return w.take();
}

TEST(PreHelloLimitTest, LongHelloIsRefusedAtItsHeader) {
  Embedded e;
  RawClient c(e.address());
  ASSERT_TRUE(c.send_bytes(header(MsgType::kHello, 60u << 20)));  // and not one payload byte
  auto r = c.read_reply();
  ASSERT_TRUE(r) << "the registry waits for 60 MiB from a peer that has not said who it is";
  EXPECT_EQ(r->status, sched::Status::kArg);
  EXPECT_NE(r->detail.find("HELLO of"), std::string::npos) << r->detail;
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_TRUE(e.wait_for([](const ServerStats& s) { return s.refusals >= 1; }));
}

TEST(PreHelloLimitTest, RequestBeforeHelloIsRefusedAtItsHeader) {
  Embedded e;
  RawClient c(e.address());
  ASSERT_TRUE(c.send_bytes(header(MsgType::kPublish, 1u << 20)));
  auto r = c.read_reply();
  ASSERT_TRUE(r) << "the registry waits for the body of a request that it will refuse";
  EXPECT_EQ(r->status, sched::Status::kState);
  EXPECT_NE(r->detail.find("HELLO"), std::string::npos) << r->detail;
  EXPECT_TRUE(c.closed_by_peer());
}

TEST(PreHelloLimitTest, SilentConnectionIsClosedAtTheHelloDeadline) {
  Embedded e([](ServerOptions& o) { o.hello_timeout_ms = 200; });
  RawClient silent(e.address()), partial(e.address());
  ASSERT_TRUE(partial.send_bytes(header(MsgType::kHello, 30).substr(0, 11)));  // half a header
  auto r = silent.read_reply();
  ASSERT_TRUE(r) << "a silent connection is kept";
  EXPECT_NE(r->detail.find("no HELLO within"), std::string::npos) << r->detail;
  EXPECT_TRUE(silent.closed_by_peer());
  EXPECT_TRUE(partial.closed_by_peer());
  EXPECT_TRUE(e.wait_for([](const ServerStats& s) { return s.connections == 0; }));
  RawClient fine(e.address());
  EXPECT_TRUE(fine.hello());
}

// The measurement, on the daemon: 8 connections each announce a HELLO just under the
// frame limit and send 60 MiB of it. The daemon's peak resident memory (VmHWM) stays small.
TEST(PreHelloLimitTest, DaemonHoldsLittleForEightPeersSending60MiBBeforeHello) {
  Daemon d;
  ASSERT_FALSE(d.address.empty());
  long before = proc_status_kib(d.pid(), "VmHWM");
  ASSERT_GT(before, 0);
  std::string chunk(1u << 20, 'h');
  std::vector<std::unique_ptr<RawClient>> peers;
  for (int i = 0; i < 8; ++i) {
    peers.push_back(std::make_unique<RawClient>(d.address));
    RawClient& p = *peers.back();
    bool open = p.send_bytes(header(MsgType::kHello, kMaxPayload - 1));
    for (int mib = 0; open && mib < 60; ++mib) open = p.send_bytes(chunk);  // fails once refused
  }
  long peak = proc_status_kib(d.pid(), "VmHWM");
  if (kRssMeasuresHeldMemory) {
    EXPECT_LT(peak - before, 32 * 1024) << "peak resident memory grew from " << before << " to " << peak << " KiB";
  }
  // Every one of them was refused and closed (before: all 8 stayed open, holding 60 MiB each).
  for (auto& p : peers) ASSERT_TRUE(p->closed_by_peer());
  RawClient fine(d.address);
  EXPECT_TRUE(fine.hello());
}

}  // namespace
}  // namespace thub::registry::test
