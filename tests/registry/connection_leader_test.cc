// Issue 19, items 3 and 4, at the client connection: the address list is in order of
// preference. A client on a backup moves back when an earlier address answers again (the
// prober), and a client that lost every registry keeps trying in the background: requests
// fail at once meanwhile (THUB_ERR_REGISTRY, no wait), and the connection comes back by
// itself when a registry answers again. Every wait is for a state the connection reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

#include "src/common/status.h"
#include "src/registry/connection.h"
#include "tests/registry/embedded.h"
#include "tests/registry/fake_registry.h"

namespace thub::registry::test {
namespace {

ConnectionOptions probing(std::vector<std::string> addresses) {
  ConnectionOptions co;
  co.addresses = std::move(addresses);
  co.heartbeat_ms = 50;
  co.connect_timeout_ms = 2000;
  co.registry_timeout_ms = 1000;
  co.request_timeout_ms = 2000;
  co.reconnect_ms = 300;
  co.probe_ms = 100;
  return co;
}

// What the connection told its user, in order.
struct Events {
  std::mutex mu;
  std::vector<ConnectionEvent> seen;
  void attach(Connection& c) {
    c.on_event([this](ConnectionEvent e, uint64_t, const std::string&) {
      std::lock_guard<std::mutex> lk(mu);
      seen.push_back(e);
    });
  }
  size_t count(ConnectionEvent e) {
    std::lock_guard<std::mutex> lk(mu);
    return static_cast<size_t>(std::count(seen.begin(), seen.end(), e));
  }
};

int64_t ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count();
}

TEST(ConnectionLeaderTest, ABackupClientMovesBackWhenThePrimaryAnswersAgain) {
  FakeRegistry primary;
  primary.answer_hello = false;  // accepts, never answers: as a stopped or starting registry
  Embedded backup;
  Connection c(probing({primary.address(), backup.address()}));
  ASSERT_EQ(c.address(), backup.address());
  ASSERT_EQ(c.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false}).status, sched::Status::kOk);
  // While the primary does not answer, the client stays where it is.
  ::poll(nullptr, 0, 500);
  EXPECT_EQ(c.generation(), 0u);
  EXPECT_EQ(c.address(), backup.address());
  Events ev;
  ev.attach(c);
  primary.answer_hello = true;
  ASSERT_TRUE(eventually([&] { return c.generation() >= 1; })) << "never moved back to the primary";
  EXPECT_EQ(c.address(), primary.address());
  EXPECT_TRUE(eventually([&] { return ev.count(ConnectionEvent::kBack) == 1; }));
  EXPECT_EQ(ev.count(ConnectionEvent::kLost), 1u);  // the members know they must open again
  EXPECT_EQ(ev.count(ConnectionEvent::kGone), 0u);
  // And stays there: on the first address nothing is probed.
  ::poll(nullptr, 0, 500);
  EXPECT_EQ(c.generation(), 1u);
}

TEST(ConnectionLeaderTest, NoProbingWhenProbeMsIsZero) {
  FakeRegistry primary;
  primary.answer_hello = false;
  Embedded backup;
  ConnectionOptions co = probing({primary.address(), backup.address()});
  co.probe_ms = 0;
  Connection c(co);
  ASSERT_EQ(c.address(), backup.address());
  primary.answer_hello = true;
  ::poll(nullptr, 0, 600);
  EXPECT_EQ(c.generation(), 0u);
  EXPECT_EQ(c.address(), backup.address());
}

TEST(ConnectionLeaderTest, TheAddressJustLostIsTriedLast) {
  // The primary closes our connection (it dropped us: we were stopped past its heartbeat
  // timeout) but lives: the client goes to the backup first, then moves back to the primary.
  auto primary = std::make_unique<Embedded>();
  const std::string pa = primary->address();
  Embedded backup;
  Connection c(probing({pa, backup.address()}));
  ASSERT_EQ(c.address(), pa);
  primary.reset();
  primary = std::make_unique<Embedded>([&](ServerOptions& o) { o.listen = pa; });
  ASSERT_TRUE(eventually([&] { return c.generation() >= 2; }));
  EXPECT_EQ(c.address(), pa);
  EXPECT_EQ(c.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false}).status, sched::Status::kOk);
}

TEST(ConnectionLeaderTest, EveryRegistryGoneFailsAtOnceAndIsRetriedInTheBackground) {
  auto only = std::make_unique<Embedded>();
  const std::string a = only->address();
  Connection c(probing({a}));
  Events ev;
  ev.attach(c);
  only.reset();  // the registry goes: no address answers
  ASSERT_TRUE(eventually([&] { return ev.count(ConnectionEvent::kGone) == 1; }));
  EXPECT_FALSE(c.connected());
  // Nothing waits for a registry that is not there: calls fail at once.
  auto t0 = std::chrono::steady_clock::now();
  try {
    (void)c.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false});
    FAIL() << "OPEN without a registry returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kRegistry);
    EXPECT_NE(std::string(e.what()).find("not connected"), std::string::npos) << e.what();
  }
  EXPECT_LT(ms_since(t0), 500);
  EXPECT_EQ(c.wait_connected(), 0u);  // does not wait for a background retry either
  // A registry at the address again: the connection finds it by itself.
  only = std::make_unique<Embedded>([&](ServerOptions& o) { o.listen = a; });
  t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return ev.count(ConnectionEvent::kBack) == 1; }));
  EXPECT_LT(ms_since(t0), 5000);  // retried every second
  EXPECT_TRUE(c.connected());
  EXPECT_EQ(c.generation(), 1u);
  EXPECT_EQ(c.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false}).status, sched::Status::kOk);
}

}  // namespace
}  // namespace thub::registry::test
