// Issue 19 item 2, at a running registry: an authenticated client that takes a read and
// never reads (its connection alive, its heartbeats on time) no longer holds a trainer's
// unpublish for as long as it likes. After lease_progress_timeout without a progress report
// it is dropped and the unpublish returns; a reader that reports progress keeps its read.
#include <gtest/gtest.h>

#include <chrono>
#include <future>

#include "src/registry/connection.h"
#include "tests/registry/embedded.h"

namespace thub::registry::test {
namespace {

constexpr int64_t kTimeoutMs = 1500;

Embedded bounded_registry() {
  return Embedded([](ServerOptions& o) { o.sched.lease_progress_timeout = kTimeoutMs * 1000; });
}

ConnectionOptions to(const Embedded& reg) {
  ConnectionOptions co;
  co.addresses = {reg.address()};
  co.heartbeat_ms = 50;
  co.reconnect_ms = 0;
  return co;
}

TEST(LeaseProgressTest, AReaderThatNeverReadsNoLongerHoldsTheTrainersUnpublish) {
  Embedded reg = bounded_registry();
  Connection trainer(to(reg)), idle(to(reg));
  sched::Reply t = trainer.call(sched::Open{0, 0, "m", "trainer", 0, 1, 0, false}, 10000);
  ASSERT_EQ(t.status, sched::Status::kOk) << t.detail;
  ASSERT_EQ(trainer.call(sched::Publish{0, 0, t.member, 1, 7, "trainer-desc"}, 10000).status, sched::Status::kOk);
  sched::Reply r = idle.call(sched::Open{0, 0, "m", "idle", 0, 1, 0, false}, 10000);
  ASSERT_EQ(r.status, sched::Status::kOk) << r.detail;
  sched::Reply g = idle.call(sched::Replicate{0, 0, r.member, -1, -1, 7, "idle-desc"}, 10000);
  ASSERT_EQ(g.status, sched::Status::kOk) << g.detail;  // a read granted, never made
  auto t0 = std::chrono::steady_clock::now();
  sched::Reply u = trainer.call(sched::Unpublish{0, 0, t.member}, 30000);
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(u.status, sched::Status::kOk) << u.detail;
  EXPECT_GE(waited, kTimeoutMs / 2) << "the unpublish did not wait for the read at all";
  EXPECT_LT(waited, 20000) << "the unpublish waited far past the progress timeout";
  std::printf("unpublish held by a reader that never reads: %lld ms (lease_progress_timeout %lld ms)\n",
              static_cast<long long>(waited), static_cast<long long>(kTimeoutMs));
  EXPECT_TRUE(eventually([&] { return !idle.connected(); })) << "the idle reader was not dropped";
}

TEST(LeaseProgressTest, AReaderThatReportsProgressKeepsItsRead) {
  Embedded reg = bounded_registry();
  Connection trainer(to(reg)), reader(to(reg));
  sched::Reply t = trainer.call(sched::Open{0, 0, "m", "trainer", 0, 1, 0, false}, 10000);
  ASSERT_EQ(trainer.call(sched::Publish{0, 0, t.member, 1, 7, "trainer-desc"}, 10000).status, sched::Status::kOk);
  sched::Reply r = reader.call(sched::Open{0, 0, "m", "reader", 0, 1, 0, false}, 10000);
  sched::Reply g = reader.call(sched::Replicate{0, 0, r.member, -1, -1, 7, "reader-desc"}, 10000);
  ASSERT_EQ(g.status, sched::Status::kOk) << g.detail;
  // Three timeouts long, a report every third of one.
  for (uint64_t bytes = 1; bytes <= 9; ++bytes) {
    ::poll(nullptr, 0, static_cast<int>(kTimeoutMs / 3));
    sched::Reply p = reader.call(sched::TransferProgress{0, 0, r.member, g.lease, bytes * 4096, "socket"}, 10000);
    ASSERT_EQ(p.status, sched::Status::kOk) << "report " << bytes << ": " << p.detail;
  }
  EXPECT_TRUE(reader.connected());
  sched::Reply d = reader.call(sched::TransferDone{0, 0, r.member, g.lease}, 10000);
  EXPECT_EQ(d.status, sched::Status::kOk) << d.detail;
}

}  // namespace
}  // namespace thub::registry::test
