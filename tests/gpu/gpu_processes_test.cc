// GPU memory across real processes (issue 21 item 7's device check): CUDA tensors published
// by one thub_peer_cuda process and replicated by others, byte-exact with checksums
// (TENSORHUB_VERIFY=1); a pipeline of three readers at once; a partial source killed in the
// middle of its transfer, its reader resuming elsewhere. Each test runs twice: with host
// tensors (runs everywhere: it checks the test itself and the peer's host path) and with CUDA
// tensors (skips with a message where no CUDA device is usable). The peers fork before any
// CUDA call of theirs; this process makes none but the device query.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <tensorhub/tensorhub.h>

#include <cstdlib>
#include <string>

#include "tests/multiproc/cluster.h"

namespace thub::test {
namespace {

bool have_device(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    *why = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(e);
    (void)cudaGetLastError();
    return false;
  }
  if (n == 0) *why = "cudaGetDeviceCount is 0";
  return n > 0;
}

// 2 x 32 MiB, a 0-byte and a tiny tensor (compacted): long enough to catch mid-transfer.
const std::string kBig = "33554432,33554432,0,4096";

class GpuProcessesTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda() && !have_device(&why)) GTEST_SKIP() << "no GPU: " << why;
  }
  [[nodiscard]] bool cuda() const { return GetParam() == "cuda"; }
  void use(Cluster& c) const { c.memory = GetParam(); }
};

// Trainer -> rollout, two versions (THUB_Replicate, then THUB_Update), every byte checked.
// CUDA tensors take the staged path (auto: copy mode, the checksums taken on the host).
TEST_P(GpuProcessesTest, ByteExactAcrossProcessesWithChecksums) {
  Cluster c;
  use(c);
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kBig, 11, 1));
  PeerProcess& r = c.add_rollout("r", kBig);
  std::string got = r.cmd("replicate latest");
  ASSERT_TRUE(ok(got)) << got;
  EXPECT_EQ(word(got, 2), "1") << got;
  EXPECT_TRUE(ok(r.cmd("check 11")));
  ASSERT_TRUE(ok(c.trainer->cmd("unpublish")));
  ASSERT_TRUE(ok(c.trainer->cmd("fill 12")));
  ASSERT_TRUE(ok(c.trainer->cmd("publish 2")));
  got = r.cmd("update latest");
  ASSERT_TRUE(ok(got)) << got;
  EXPECT_EQ(word(got, 2), "2") << got;
  EXPECT_TRUE(ok(r.cmd("check 12")));
  EXPECT_EQ(stat(r, "copy_mode"), cuda() ? 1 : 0);
  // CUDA: 2 where this UCX cannot move CUDA memory, 3 where it can (verify=true forces copy).
  const int64_t why = stat(r, "copy_mode_reason");
  EXPECT_TRUE(cuda() ? why == 2 || why == 3 : why == 0) << why;
  EXPECT_EQ(stat(r, "bytes_held"), stat(r, "total_bytes"));
}

// Three readers at once, slowly (64 KiB gets, one in flight): a source serves one reader at a
// time, so at least one reader chains off a replica still receiving (a partial source).
TEST_P(GpuProcessesTest, PipelineOfThreeReaders) {
  Cluster c(std::map<std::string, std::string>{{"TENSORHUB_CHUNK_SIZE", "65536"}, {"TENSORHUB_MAX_INFLIGHT", "1"}});
  use(c);
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kBig, 21, 1));
  for (int i = 0; i < 3; ++i) c.add_rollout("r" + std::to_string(i), kBig);
  for (auto& r : c.rollouts) r->send("ireplicate latest");
  for (auto& r : c.rollouts) ASSERT_TRUE(ok(r->reply()));
  int64_t partial = 0;
  for (auto& r : c.rollouts) {
    std::string w = r->cmd("wait");
    ASSERT_TRUE(ok(w)) << w;
    EXPECT_TRUE(ok(r->cmd("check 21")));
    partial += stat(*r, "partial_sources");
  }
  EXPECT_GE(partial, 1);
}

// Over TCP (a process killed in the middle of a shared-memory send can wedge its peer's
// receives: tests/multiproc/pipeline_test.cc): the reader follows a slow replica as a partial
// source, the replica is stopped and then killed, and the reader resumes at the trainer from
// what it holds, byte-exact.
TEST_P(GpuProcessesTest, PartialSourceKilledMidTransferAndTheReaderResumes) {
  Cluster c(std::map<std::string, std::string>{{"UCX_TLS", "tcp"}});
  use(c);
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kBig, 31, 1));
  PeerProcess& victim = c.add_rollout("victim", kBig, "", "chunk_size=4096 max_inflight=1");
  PeerProcess& reader = c.add_rollout("reader", kBig);
  ASSERT_TRUE(ok(victim.cmd("ireplicate latest")));
  ASSERT_TRUE(wait_for_stat(victim, "bytes_held", [](int64_t b) { return b > 0; })) << "the victim got no bytes";
  ASSERT_TRUE(ok(reader.cmd("ireplicate latest")));
  ASSERT_TRUE(wait_for_stat(reader, "bytes_held", [](int64_t b) { return b > 0; })) << "the reader got no bytes";
  victim.signal(SIGSTOP);
  // The reader stops growing below the total: its only source holds just a prefix.
  const int64_t total = stat(reader, "total_bytes");
  int64_t last = -1, now = 0;
  for (int i = 0; i < 200 && now != last; ++i) {
    last = now;
    now = stat(reader, "bytes_held");
    if (now != last) i = 0;
  }
  ASSERT_LT(now, total) << "the victim finished before it could be stopped";
  victim.signal(SIGKILL);
  std::string w = reader.cmd("wait");
  ASSERT_TRUE(ok(w)) << w;
  EXPECT_TRUE(ok(reader.cmd("check 31")));
  EXPECT_EQ(stat(reader, "partial_sources"), 1);
  EXPECT_GE(stat(reader, "source_failures"), 1);
}

INSTANTIATE_TEST_SUITE_P(Memory, GpuProcessesTest, ::testing::Values("host", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The peer built without CUDA says so, with UNSUPPORTED, instead of allocating host memory.
// (THUB_TEST_HOST_PEER: where it is when this test was carried to another machine.)
TEST(GpuPeerTest, PeerWithoutCudaRefusesCudaMemory) {
  const char* carried = std::getenv("THUB_TEST_HOST_PEER");
  PeerProcess p(carried && *carried ? carried : THUB_PEER_HOST_PATH, {}, {});
  std::string r = p.cmd("memory cuda");
  EXPECT_EQ(status_of(r), THUB_ERR_UNSUPPORTED) << r;
  EXPECT_NE(r.find("without CUDA"), std::string::npos) << r;
  EXPECT_TRUE(ok(p.cmd("memory host")));
}

// The peer built with CUDA, where no device is usable, says so too (and why).
TEST(GpuPeerTest, CudaPeerWithoutADeviceRefusesCudaMemory) {
  std::string why;
  if (have_device(&why)) GTEST_SKIP() << "a GPU is present: this checks the no-device answer";
  PeerProcess p;
  std::string r = p.cmd("memory cuda");
  EXPECT_EQ(status_of(r), THUB_ERR_UNSUPPORTED) << r;
  EXPECT_NE(r.find("no CUDA device"), std::string::npos) << r;
  EXPECT_EQ(status_of(p.cmd("memory gpu")), THUB_ERR_ARG);
}

}  // namespace
}  // namespace thub::test
