// Issue 10, item 8: replies a client does not read are bounded. Beyond output_pause_bytes of
// queued replies the registry stops reading that client's requests (back-pressure: they wait
// in the kernel, nothing is lost); beyond max_output_bytes, or when its replies make no
// progress for frame_timeout_ms, it is closed. Before, 20,000 unread replies made the
// registry hold 80 MiB, and it would have held any amount.
#include <gtest/gtest.h>

#include <sys/socket.h>

#include "src/common/status.h"
#include "src/registry/connection.h"
#include "src/registry/protocol.h"
#include "tests/registry/daemon.h"
#include "tests/registry/embedded.h"
#include "tests/registry/raw_client.h"

namespace thub::registry::test {
namespace {

constexpr int kRequests = 20000;

// A client whose every DESCRIBE is answered with several KiB: it opens members with long
// names (the registry's state as text grows with them), then asks without reading.
void open_long_names(RawClient& c, int members) {
  for (int i = 0; i < members; ++i) {
    ASSERT_TRUE(c.send_event(sched::Open{0, 0, std::to_string(i) + std::string(4000, 'm'), "r", 0, 1, 0, false},
                             static_cast<uint64_t>(2 + i)));
    auto r = c.read_reply();
    ASSERT_TRUE(r && r->status == sched::Status::kOk);
  }
}

std::string describes(int n) {
  std::string all;
  for (int i = 0; i < n; ++i) all += encode_frame(MsgType::kDescribe, 1000 + static_cast<uint64_t>(i), "");
  return all;
}

TEST(OutputCapTest, UnreadRepliesPauseTheClientAndNothingIsLost) {
  Embedded e;
  RawClient f(e.address());
  ASSERT_TRUE(f.hello());
  ASSERT_NO_FATAL_FAILURE(open_long_names(f, 1));
  ASSERT_TRUE(f.send_bytes(describes(kRequests)));  // 400 KB of requests: the kernel takes them
  // The registry stops reading this client once its replies are not read.
  ASSERT_TRUE(e.wait_for([](const ServerStats& s) { return s.paused == 1; }));
  ServerOptions defaults;
  const uint64_t bound = defaults.output_pause_bytes + 64 * 1024;  // the pause, plus one reply
  EXPECT_LE(e.stats().output_bytes, bound);
  EXPECT_LE(e.stats().peak_output_bytes, bound);
  // Everybody else is served meanwhile.
  ConnectionOptions co;
  co.addresses = {e.address()};
  Connection other(co);
  EXPECT_EQ(other.call(sched::Open{0, 0, "m", "other", 0, 1, 0, false}).status, sched::Status::kOk);
  // Once the client reads, it gets every reply, in order.
  for (int i = 0; i < kRequests; ++i) {
    auto fr = f.read_frame();
    ASSERT_TRUE(fr) << "reply " << i << " is missing";
    ASSERT_EQ(fr->header.req, 1000 + static_cast<uint64_t>(i));
    ASSERT_EQ(fr->reply().status, sched::Status::kOk);
  }
  EXPECT_LE(e.stats().peak_output_bytes, bound);
}

// A paused client cannot be heard (its heartbeats wait behind the requests we do not read):
// while it takes our replies it is alive, however long the backlog takes to drain. Before,
// one that read slowly for longer than heartbeat_timeout was dropped for silence.
TEST(OutputCapTest, ASlowReaderIsNotDroppedForSilenceWhilePaused) {
  // heartbeat_timeout 1 s: a reader stalled by a busy machine for longer than the timeout
  // between two reads takes nothing, and may be dropped (300 ms was: issue 17's hunt).
  Embedded e([](ServerOptions& o) {
    o.sched.heartbeat_timeout = 1'000'000;  // us
    o.output_pause_bytes = 16 << 10;
  });
  RawClient f(e.address());
  ASSERT_TRUE(f.hello());
  ASSERT_NO_FATAL_FAILURE(open_long_names(f, 8));  // ~32 KiB per reply: more than the kernel buffers
  constexpr int kSlow = 400;
  ASSERT_TRUE(f.send_bytes(describes(kSlow)));
  ASSERT_TRUE(e.wait_for([](const ServerStats& s) { return s.paused == 1; }));
  for (int i = 0; i < kSlow; ++i) {  // ~3.2 s in all: three heartbeat timeouts
    auto fr = f.read_frame();
    ASSERT_TRUE(fr) << "reply " << i << " is missing: the client was dropped";
    ASSERT_EQ(fr->header.req, 1000 + static_cast<uint64_t>(i));
    ::poll(nullptr, 0, 8);
  }
}

// The same on the daemon, measured as the daemon's peak resident memory (VmHWM). The probe
// asks DESCRIBE, whose first line shows whether the flooder is paused.
TEST(OutputCapTest, DaemonHoldsLittleFor20000UnreadReplies) {
  Daemon d;
  ASSERT_FALSE(d.address.empty());
  long before = proc_status_kib(d.pid(), "VmHWM");
  RawClient f(d.address);
  ASSERT_TRUE(f.hello());
  ASSERT_NO_FATAL_FAILURE(open_long_names(f, 1));
  ASSERT_TRUE(f.send_bytes(describes(kRequests)));
  ConnectionOptions co;
  co.addresses = {d.address};
  Connection probe(co);
  const long limit_kib = 48 * 1024;
  bool paused = false;
  for (int i = 0; i < 20000 && !paused; ++i) {  // polls state; the count is only a hang guard
    long peak = proc_status_kib(d.pid(), "VmHWM");
    if (kRssMeasuresHeldMemory) {
      ASSERT_LT(peak - before, limit_kib) << "the daemon holds the unread replies (peak " << peak << " KiB)";
    }
    paused = probe.describe().find("paused 1)") != std::string::npos;
  }
  EXPECT_TRUE(paused);
  if (kRssMeasuresHeldMemory) {
    EXPECT_LT(proc_status_kib(d.pid(), "VmHWM") - before, limit_kib);
  }
}

TEST(OutputCapTest, RepliesBeyondTheHardCapCloseTheClient) {
  Embedded e([](ServerOptions& o) {
    o.output_pause_bytes = 16 << 10;
    o.max_output_bytes = 64 << 10;
  });
  RawClient f(e.address());
  ASSERT_TRUE(f.hello());
  ASSERT_NO_FATAL_FAILURE(open_long_names(f, 30));  // DESCRIBE: about 130 KB of text
  uint64_t refusals = e.stats().refusals;
  ASSERT_TRUE(f.send_frame(MsgType::kDescribe, 99, ""));
  EXPECT_TRUE(f.closed_by_peer());
  EXPECT_TRUE(e.wait_for([&](const ServerStats& s) { return s.connections == 0 && s.refusals > refusals; }));
}

TEST(OutputCapTest, RepliesNotReadForTheFrameTimeoutCloseTheClient) {
  Embedded e([](ServerOptions& o) {
    o.frame_timeout_ms = 300;
    o.output_pause_bytes = 64 << 10;
  });
  RawClient f(e.address());
  ASSERT_TRUE(f.hello());
  ASSERT_NO_FATAL_FAILURE(open_long_names(f, 1));
  ASSERT_TRUE(f.send_bytes(describes(kRequests)));  // 80 MB of replies: more than the kernel buffers
  // Not reading at all: the registry's queue for it stops moving, and it is closed.
  EXPECT_TRUE(e.wait_for([](const ServerStats& s) { return s.connections == 0; }));
  EXPECT_GE(e.stats().refusals, 1u);
}

}  // namespace
}  // namespace thub::registry::test
