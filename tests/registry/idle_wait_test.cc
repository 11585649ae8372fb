// An idle registry sleeps until its next deadline instead of waking every tick_ms
// (ServerOptions::tick_ms, sched::Registry::quiet_until()): a published trainer that holds
// the embedded registry takes the wake-ups of its heartbeats, not 10 a second for the
// clock. Its deadlines still come on time, and whatever waits on the clock keeps the tick.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "src/registry/protocol.h"
#include "tests/registry/embedded.h"
#include "tests/registry/raw_client.h"

namespace thub::registry::test {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t turns_over(const Embedded& e, int ms) {
  const uint64_t t0 = e.stats().turns;
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return e.stats().turns - t0;
}

TEST(IdleWaitTest, IdleRegistryWakesForFramesNotForTheClock) {
  Embedded e([](ServerOptions& o) {
    o.tick_ms = 5;                             // 100 turns in the window below, were it ticking
    o.sched.heartbeat_timeout = 60'000'000;  // no deadline inside the test
  });
  RawClient c(e.address());
  ASSERT_TRUE(c.hello());
  ASSERT_TRUE(c.send_event(sched::Open{0, 0, "m", "trainer", 0, 1, 0, false}, 2));
  auto r = c.read_reply();
  ASSERT_TRUE(r && r->status == sched::Status::kOk);
  EXPECT_LE(turns_over(e, 500), 3u) << "an idle registry should not wake for the clock";
  // A frame still wakes it at once, and it answers.
  ASSERT_TRUE(c.send_event(sched::Open{0, 0, "m2", "trainer", 0, 1, 0, false}, 3));
  r = c.read_reply(2000);
  ASSERT_TRUE(r) << "a sleeping registry must answer a request";
  EXPECT_EQ(r->status, sched::Status::kOk);
}

TEST(IdleWaitTest, SleepingRegistryDropsASilentClientAtItsDeadline) {
  Embedded e([](ServerOptions& o) {
    o.tick_ms = 5;
    o.max_idle_wait_ms = 30'000;           // only the deadline can wake it in time
    o.sched.heartbeat_timeout = 300'000;  // 300 ms
  });
  RawClient c(e.address());
  ASSERT_TRUE(c.hello());
  const auto t0 = Clock::now();
  ASSERT_TRUE(c.closed_by_peer(10'000)) << "a client silent past heartbeat_timeout must be dropped";
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_GE(waited, 250);
  // Bound: the deadline plus scheduling, far below max_idle_wait_ms (the registry slept until
  // the deadline, not past it).
  EXPECT_LT(waited, 3000) << "dropped after " << waited << " ms";
  EXPECT_TRUE(e.wait_for([](const ServerStats& s) { return s.connections == 0; }));
}

TEST(IdleWaitTest, AConnectionBeforeItsHelloKeepsTheTick) {
  Embedded e([](ServerOptions& o) {
    o.tick_ms = 5;
    o.hello_timeout_ms = 60'000;
  });
  RawClient c(e.address());  // connected, no HELLO: its hello deadline runs on the clock
  ASSERT_TRUE(e.wait_for([](const ServerStats& s) { return s.before_hello == 1; }));
  EXPECT_GE(turns_over(e, 500), 20u) << "a handshake deadline must be checked every tick";
}

}  // namespace
}  // namespace thub::registry::test
