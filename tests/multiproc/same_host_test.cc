// Readers on the source's host, over the default path (process reads: src/transport/
// process_reads.h). A reader killed, or stopped and then killed, in the middle of reading the
// trainer costs the trainer nothing: the next reader replicates from it byte-exact. Over UCX
// 1.13's shared memory (run with THUB_PROCESS_READS=0) a reader that dies in the middle of a
// send leaves a slot of the trainer's receive FIFO reserved and never written, and the trainer
// then takes nothing more over shared memory (pipeline_test.cc saw it once in ~15 runs); a
// dozen victims killed at random points make that likely, not certain (docs/faults.md).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "tests/multiproc/cluster.h"

namespace thub::test {
namespace {

const std::string kLayout16 = "16777216,16777216";

TEST(SameHostTest, ReadersKilledOrStoppedMidReadDoNotWedgeTheirSource) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout16, 131, 1));
  // 4 KiB gets, 16 in flight: the victims are always in the middle of asking for something.
  for (int i = 0; i < 12; ++i) {
    PeerProcess& v = c.add_rollout("victim" + std::to_string(i), kLayout16, "", "chunk_size=4096 max_inflight=16");
    ASSERT_TRUE(ok(v.cmd("ireplicate latest")));
    ASSERT_TRUE(wait_for_stat(v, "bytes_held", [](int64_t b) { return b > 0; })) << "victim " << i << " got no bytes";
    if (i % 2 == 1) {  // stopped first, as a debugger or the OOM killer's victim would be
      v.signal(SIGSTOP);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    v.kill_now();
  }
  // And one stays stopped in the middle of its read while the next reader replicates.
  PeerProcess& stopped = c.add_rollout("stopped", kLayout16, "", "chunk_size=4096 max_inflight=16");
  ASSERT_TRUE(ok(stopped.cmd("ireplicate latest")));
  ASSERT_TRUE(wait_for_stat(stopped, "bytes_held", [](int64_t b) { return b > 0; }));
  stopped.signal(SIGSTOP);
  PeerProcess& r = c.add_rollout("reader", kLayout16, "", "stall_timeout_ms=2000");
  auto t0 = std::chrono::steady_clock::now();
  std::string w = r.cmd("replicate latest", 90);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(ok(w)) << "the reader after the victims: " << w;
  EXPECT_TRUE(ok(r.cmd("check 131")));
  std::printf("reader after the victims: %s in %.2f s\n", w.c_str(), s);
  stopped.signal(SIGKILL);
}

}  // namespace
}  // namespace thub::test
