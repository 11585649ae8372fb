// Issue 10, item 7, at the client connection: nothing waits on a registry without a bound.
// HELLO has a deadline (connect_timeout_ms), a registry that sends nothing for
// registry_timeout_ms is lost and the next address taken, requests answered at once have a
// default deadline (THUB_ERR_TIMEOUT), requests the registry may defer wait as long as it is
// alive. The registry here is a FakeRegistry that misbehaves on purpose; every wait is for
// a state it counts (tests/multiproc/silent_registry_test.cc does it with SIGSTOP).
#include <gtest/gtest.h>

#include <chrono>
#include <future>

#include "src/common/status.h"
#include "src/registry/connection.h"
#include "tests/registry/embedded.h"
#include "tests/registry/fake_registry.h"
#include "tests/registry/raw_client.h"

namespace thub::registry::test {
namespace {

// Short bounds, but not shorter than a busy machine can stall a thread: with 300 ms for HELLO
// and for the registry's liveness, a live registry was taken for a mute or silent one (issue
// 17's hunt: ASan, 8 tests at once beside a CPU hog).
ConnectionOptions fast(std::vector<std::string> addresses) {
  ConnectionOptions co;
  co.addresses = std::move(addresses);
  co.heartbeat_ms = 50;
  co.connect_timeout_ms = 2000;
  co.registry_timeout_ms = 1000;
  co.request_timeout_ms = 300;
  co.reconnect_ms = 5000;
  return co;
}

TEST(ConnectionDeadlineTest, UnansweredHelloMovesOnToTheNextAddress) {
  FakeRegistry mute;
  mute.answer_hello = false;
  Embedded good;
  Connection c(fast({mute.address(), good.address()}));
  EXPECT_EQ(c.address(), good.address());
}

TEST(ConnectionDeadlineTest, UnansweredHelloEverywhereIsARegistryError) {
  FakeRegistry mute;
  mute.answer_hello = false;
  try {
    Connection c(fast({mute.address()}));
    FAIL() << "connected to a registry that never answered HELLO";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kRegistry);
    EXPECT_NE(std::string(e.what()).find("did not answer HELLO"), std::string::npos) << e.what();
  }
}

TEST(ConnectionDeadlineTest, AnsweredHeartbeatsKeepTheRegistry) {
  FakeRegistry fake;
  Connection c(fast({fake.address()}));
  // Answered heartbeats over more than three liveness timeouts: no false alarm.
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] {
    return fake.heartbeats_answered >= 20 && std::chrono::steady_clock::now() - start > std::chrono::milliseconds(3500);
  }));
  EXPECT_EQ(c.generation(), 0u);
  EXPECT_TRUE(c.connected());
}

TEST(ConnectionDeadlineTest, SilentRegistryIsLostAndTheNextAddressTaken) {
  FakeRegistry fake;
  Embedded good;
  Connection c(fast({fake.address(), good.address()}));
  ASSERT_EQ(c.address(), fake.address());
  fake.go_silent();  // its socket stays open: only the silence tells
  ASSERT_TRUE(eventually([&] { return c.generation() >= 1; })) << "still waiting on a silent registry";
  EXPECT_EQ(c.address(), good.address());
  EXPECT_EQ(c.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false}).status, sched::Status::kOk);
}

TEST(ConnectionDeadlineTest, ImmediateRequestsTimeOutDeferrableOnesWaitWhileTheRegistryLives) {
  FakeRegistry fake;  // answers HELLO and heartbeats, never a request
  Connection c(fast({fake.address()}));
  try {
    (void)c.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false});
    FAIL() << "an unanswered OPEN did not time out";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kTimeout);
  }
  // A REPLICATE may be deferred for as long as a transfer: it waits past request_timeout_ms
  // while heartbeats are answered...
  auto rep = std::async(std::launch::async, [&] { return c.call(sched::Replicate{0, 0, 1, -1, -1, 7, "d"}); });
  ASSERT_TRUE(eventually([&] { return fake.requests_seen >= 2; }));
  uint64_t beats = fake.heartbeats_answered;
  ASSERT_TRUE(eventually([&] { return fake.heartbeats_answered >= beats + 20; }));  // > 3 request timeouts
  EXPECT_EQ(rep.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  // ...and ends with THUB_ERR_REGISTRY once the registry falls silent.
  fake.go_silent();
  try {
    (void)rep.get();
    FAIL() << "a REPLICATE to a silent registry returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kRegistry);
    EXPECT_NE(std::string(e.what()).find("sent nothing"), std::string::npos) << e.what();
  }
}

TEST(ConnectionDeadlineTest, TheRealRegistryAnswersEachHeartbeat) {
  Embedded e;
  RawClient raw(e.address());
  ASSERT_TRUE(raw.hello());
  ASSERT_TRUE(raw.send_frame(MsgType::kHeartbeat, 42, ""));
  auto f = raw.read_frame();
  ASSERT_TRUE(f) << "no answer to a heartbeat";
  EXPECT_EQ(f->header.type, MsgType::kHeartbeat);
  EXPECT_EQ(f->header.req, 42u);
  // And a client with a short liveness timeout stays on its first connection.
  Connection c(fast({e.address()}));
  // 70 heartbeat periods: more than three liveness timeouts
  ASSERT_TRUE(e.wait_for([](const ServerStats& s) { return s.frames >= 75; }));
  EXPECT_EQ(c.generation(), 0u);
  EXPECT_TRUE(c.connected());
}

}  // namespace
}  // namespace thub::registry::test
