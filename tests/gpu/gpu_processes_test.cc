// GPU memory across real processes (issue 21 item 7's device check): CUDA tensors published
// by one thub_peer_cuda process and replicated by others, byte-exact with checksums
// (TENSORHUB_VERIFY=1); a pipeline of three readers at once; a partial source killed in the
// middle of its transfer, its reader resuming elsewhere. Each test runs twice: with host
// tensors (runs everywhere: it checks the test itself and the peer's host path) and with CUDA
// tensors (skips with a message where no CUDA device is usable). The peers fork before any
// CUDA call of theirs; this process makes none but the device query.
#include <gtest/gtest.h>
#include <tensorhub/tensorhub.h>

#include <cstdlib>
#include <string>

#include "tests/gpu/gpu_device.h"
#include "tests/multiproc/scenarios.h"

namespace thub::test {
namespace {

const std::string& kBig = kPipelineLayout;

class GpuProcessesTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda() && !have_cuda_device(&why)) GTEST_SKIP() << "no GPU: " << why;
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
  Cluster c(kPipelineSlow);
  use(c);
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kBig, 21, 1));
  EXPECT_GE(replicate_all_at_once(c, 3, 21), 1);
}

// Over TCP: the reader follows a slow replica as a partial source, the replica is stopped and
// then killed, and the reader resumes at the trainer from what it holds, byte-exact.
TEST_P(GpuProcessesTest, PartialSourceKilledMidTransferAndTheReaderResumes) {
  Cluster c(std::map<std::string, std::string>{{"UCX_TLS", "tcp"}});
  use(c);
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kBig, 31, 1));
  kill_partial_source_and_resume(c, 31);
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
  if (have_cuda_device(&why)) GTEST_SKIP() << "a GPU is present: this checks the no-device answer";
  PeerProcess p;
  std::string r = p.cmd("memory cuda");
  EXPECT_EQ(status_of(r), THUB_ERR_UNSUPPORTED) << r;
  EXPECT_NE(r.find("no CUDA device"), std::string::npos) << r;
  EXPECT_EQ(status_of(p.cmd("memory gpu")), THUB_ERR_ARG);
}

}  // namespace
}  // namespace thub::test
