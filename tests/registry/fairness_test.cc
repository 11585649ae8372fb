// Issue 10, item 8: one connection flooding frames gets a bounded share of each loop turn
// (frames_per_turn, read_bytes_per_turn) and its input is parsed in linear time, so another
// client's HELLO is answered while the flood goes on, and a healthy client's heartbeats are
// still handled. Before, 200,000 back-to-back frames were parsed by erasing each from the
// front of the buffer: another client's HELLO waited 14.6 s and a healthy client was dropped
// for a missed heartbeat deadline.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "src/common/status.h"
#include "src/registry/connection.h"
#include "src/registry/protocol.h"
#include "tests/registry/daemon.h"
#include "tests/registry/embedded.h"
#include "tests/registry/raw_client.h"

namespace thub::registry::test {
namespace {

std::string heartbeats(int n) {
  std::string one = encode_frame(MsgType::kHeartbeat, 0, "");
  std::string all;
  all.reserve(one.size() * n);
  for (int i = 0; i < n; ++i) all += one;
  return all;
}

// Floods heartbeats on one thread until stopped, and reads (and drops) whatever the registry
// answers on another, so that it is never held back for unread replies: a pure CPU hog.
struct Flooder {
  RawClient client;
  std::atomic<bool> stop{false};
  std::thread writer, reader;
  explicit Flooder(const std::string& address) : client(address) {}
  bool start() {
    if (!client.hello()) return false;
    writer = std::thread([this] {
      std::string batch = heartbeats(10000);
      while (!stop && client.send_bytes(batch)) {
      }
    });
    reader = std::thread([this] {
      char buf[65536];
      while (::recv(client.fd(), buf, sizeof buf, 0) > 0) {
      }
    });
    return true;
  }
  ~Flooder() {
    stop = true;
    ::shutdown(client.fd(), SHUT_RDWR);  // ends both threads' blocking calls
    if (writer.joinable()) writer.join();
    if (reader.joinable()) reader.join();
  }
};

TEST(FairnessTest, AnotherClientsHelloIsAnsweredWhileAFlooderFloods) {
  Embedded e([](ServerOptions& o) { o.sched.heartbeat_timeout = 2'000'000; });
  ConnectionOptions co;
  co.addresses = {e.address()};
  co.heartbeat_ms = 100;
  Connection healthy(co);
  sched::Reply open = healthy.call(sched::Open{0, 0, "m", "healthy", 0, 1, 0, false});
  ASSERT_EQ(open.status, sched::Status::kOk);

  Flooder f(e.address());
  ASSERT_TRUE(f.start());
  // The flood is under way: the registry has handled 100,000 of its frames.
  ASSERT_TRUE(e.wait_for([](const ServerStats& s) { return s.frames >= 100000; }));
  uint64_t handled = e.stats().frames;
  Connection late(co);  // connects and says HELLO now, during the flood
  EXPECT_EQ(late.call(sched::Open{0, 0, "m", "late", 0, 1, 0, false}).status, sched::Status::kOk);
  EXPECT_GT(e.stats().frames, handled);  // the flood was being served meanwhile, not starved either
  // The healthy client was not dropped for a missed heartbeat deadline meanwhile.
  sched::Reply pub = healthy.call(sched::Publish{0, 0, open.member, 1, 7, "d"});
  EXPECT_EQ(pub.status, sched::Status::kOk) << pub.detail;
}

// The case on the daemon: 200,000 back-to-back frames, then a new client says HELLO,
// and a client with a 2 s heartbeat deadline goes on. Before, the daemon spent 14.6 s
// parsing the flood: the HELLO waited, and the healthy client was dropped.
TEST(FairnessTest, DaemonServesOthersWhileParsing200000Frames) {
  Daemon d({"--heartbeat-timeout-ms", "2000"});
  ASSERT_FALSE(d.address.empty());
  ConnectionOptions co;
  co.addresses = {d.address};
  co.heartbeat_ms = 100;
  Connection healthy(co);
  sched::Reply open = healthy.call(sched::Open{0, 0, "m", "healthy", 0, 1, 0, false});
  ASSERT_EQ(open.status, sched::Status::kOk);

  RawClient flooder(d.address);
  ASSERT_TRUE(flooder.hello());
  std::string flood = heartbeats(200000);
  std::thread writer([&] { flooder.send_bytes(flood); });
  RawClient late(d.address);
  EXPECT_TRUE(late.hello());
  // Past the healthy client's deadline, had its heartbeats waited behind the flood.
  for (uint64_t v = 1; v <= 3; ++v) {
    sched::Reply pub = healthy.call(sched::Publish{0, 0, open.member, static_cast<int64_t>(v), 7, "d"});
    EXPECT_EQ(pub.status, sched::Status::kOk) << pub.detail;
    sched::Reply un = healthy.call(sched::Unpublish{0, 0, open.member});
    EXPECT_EQ(un.status, sched::Status::kOk) << un.detail;
  }
  ::shutdown(flooder.fd(), SHUT_RDWR);
  writer.join();
}

}  // namespace
}  // namespace thub::registry::test
