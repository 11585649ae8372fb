// GPU memory through the staged (copy) path: CUDA tensors published and replicated between
// two contexts of one process, byte-exact with verify=true, tiny GPU tensors compacted.
// Skips where no CUDA device is usable; there, registering CUDA memory is UNSUPPORTED.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <tensorhub/tensorhub.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/gpu/gpu_device.h"

namespace {

bool have_device(std::string* why) { return thub::test::have_cuda_device(why); }

#define SKIP_WITHOUT_GPU()                                       \
  do {                                                           \
    std::string why_;                                            \
    if (!have_device(&why_)) {                                   \
      GTEST_SKIP() << "no GPU: " << why_;                        \
    }                                                            \
  } while (0)

unsigned char pattern(uint64_t seed, size_t t, size_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + t * 0xBF58476D1CE4E5B9ull + i;
  x ^= x >> 29;
  x *= 0x94D049BB133111EBull;
  return static_cast<unsigned char>(x >> 32);
}

// One process-side shard: CUDA (or host) tensors of the given sizes.
struct Shard {
  std::vector<size_t> sizes;
  std::vector<void*> ptrs;
  bool cuda;
  Shard(std::vector<size_t> s, bool on_gpu) : sizes(std::move(s)), cuda(on_gpu) {
    for (size_t n : sizes) {
      void* p = nullptr;
      if (n > 0) {
        if (cuda) EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess);
        else p = std::calloc(n, 1);
      }
      ptrs.push_back(p);
    }
  }
  ~Shard() {
    for (void* p : ptrs) {
      if (!p) continue;
      if (cuda) cudaFree(p);
      else std::free(p);
    }
  }
  void fill(uint64_t seed) {
    for (size_t t = 0; t < sizes.size(); ++t) {
      std::vector<unsigned char> h(sizes[t]);
      for (size_t i = 0; i < h.size(); ++i) h[i] = pattern(seed, t, i);
      if (h.empty()) continue;
      if (cuda) ASSERT_EQ(cudaMemcpy(ptrs[t], h.data(), h.size(), cudaMemcpyHostToDevice), cudaSuccess);
      else std::memcpy(ptrs[t], h.data(), h.size());
    }
  }
  bool check(uint64_t seed) {
    for (size_t t = 0; t < sizes.size(); ++t) {
      std::vector<unsigned char> h(sizes[t]);
      if (h.empty()) continue;
      if (cuda) EXPECT_EQ(cudaMemcpy(h.data(), ptrs[t], h.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      else std::memcpy(h.data(), ptrs[t], h.size());
      for (size_t i = 0; i < h.size(); ++i) {
        if (h[i] != pattern(seed, t, i)) {
          ADD_FAILURE() << "tensor " << t << " byte " << i << " differs";
          return false;
        }
      }
    }
    return true;
  }
  void register_all(THUB_Model m) {
    for (size_t t = 0; t < sizes.size(); ++t) {
      std::string name = "t" + std::to_string(t);
      ASSERT_EQ(THUB_Register(m, name.c_str(), ptrs[t], sizes[t], cuda ? THUB_MEM_CUDA : THUB_MEM_HOST), THUB_SUCCESS);
    }
  }
};

const std::vector<size_t> kLayout = {4194304, 0, 100, 1, 9000000, 65536, 3000001};

THUB_Context init(const std::string& registry, bool verify) {
  THUB_Info info = THUB_INFO_NULL;
  THUB_Info_create(&info);
  if (!registry.empty()) THUB_Info_set(info, "registry", registry.c_str());
  THUB_Info_set(info, "verify", verify ? "true" : "false");
  THUB_Info_set(info, "chunk_size", "1M");
  THUB_Context c = THUB_CONTEXT_NULL;
  EXPECT_EQ(THUB_Init(info, &c), THUB_SUCCESS);
  THUB_Info_free(&info);
  return c;
}

std::string registry_of(THUB_Context c) {
  char buf[256] = "";
  EXPECT_EQ(THUB_Registry_address(c, buf, sizeof buf), THUB_SUCCESS);
  return buf;
}

int64_t stat(THUB_Model m, const char* key) {
  int64_t v = -1;
  EXPECT_EQ(THUB_Model_stat(m, key, &v), THUB_SUCCESS);
  return v;
}

TEST(CudaStagingTest, RegisterWithoutDeviceIsUnsupported) {
  std::string why;
  if (have_device(&why)) {
    GTEST_SKIP() << "a GPU is present: this checks the no-device answer";
  }
  THUB_Context c = init("", false);
  THUB_Model m = THUB_MODEL_NULL;
  ASSERT_EQ(THUB_Open(c, "m", "r", 0, 1, THUB_INFO_NULL, &m), THUB_SUCCESS);
  char fake[64];
  EXPECT_EQ(THUB_Register(m, "gpu", fake, sizeof fake, THUB_MEM_CUDA), THUB_ERR_UNSUPPORTED);
  char err[512];
  ASSERT_EQ(THUB_Last_error(c, err, sizeof err), THUB_SUCCESS);
  EXPECT_NE(std::string(err).find("CUDA"), std::string::npos) << err;
  EXPECT_EQ(THUB_Finalize(&c), THUB_SUCCESS);
}

void replicate_case(bool pub_gpu, bool recv_gpu, bool verify) {
  THUB_Context a = init("", verify);
  THUB_Context b = init(registry_of(a), verify);
  Shard src(kLayout, pub_gpu), dst(kLayout, recv_gpu);
  THUB_Model pm = THUB_MODEL_NULL, rm = THUB_MODEL_NULL;
  ASSERT_EQ(THUB_Open(a, "gpu", "trainer", 0, 1, THUB_INFO_NULL, &pm), THUB_SUCCESS);
  ASSERT_EQ(THUB_Open(b, "gpu", "rollout", 0, 1, THUB_INFO_NULL, &rm), THUB_SUCCESS);
  src.register_all(pm);
  dst.register_all(rm);
  for (int v = 1; v <= 2; ++v) {
    src.fill(40 + v);
    ASSERT_EQ(THUB_Publish(pm, v), THUB_SUCCESS);
    int64_t got = -1;
    int st = THUB_Update(rm, THUB_LATEST, &got);
    ASSERT_EQ(st, THUB_SUCCESS);
    EXPECT_EQ(got, v);
    EXPECT_TRUE(dst.check(40 + v));
    ASSERT_EQ(THUB_Unpublish(pm), THUB_SUCCESS);
  }
  if (recv_gpu && verify) {
    EXPECT_EQ(stat(rm, "copy_mode"), 1);  // auto: checksums of CUDA tensors are taken on the host
    // 2: this UCX cannot move CUDA memory (the device's UCX here); 3: it can, verify forced it.
    const int64_t why = stat(rm, "copy_mode_reason");
    EXPECT_TRUE(why == 2 || why == 3) << why;
  }
  EXPECT_EQ(stat(rm, "compacted_tensors"), 3);
  EXPECT_EQ(THUB_Finalize(&b), THUB_SUCCESS);
  EXPECT_EQ(THUB_Finalize(&a), THUB_SUCCESS);
}

TEST(CudaStagingTest, GpuToGpuIsByteExactWithChecksums) {
  SKIP_WITHOUT_GPU();
  replicate_case(true, true, true);
}

TEST(CudaStagingTest, GpuToGpuStagesBehindPublish) {
  SKIP_WITHOUT_GPU();
  replicate_case(true, true, false);
}

TEST(CudaStagingTest, GpuToHostAndHostToGpu) {
  SKIP_WITHOUT_GPU();
  replicate_case(true, false, true);
  replicate_case(false, true, true);
}

TEST(CudaStagingTest, HostPointerRegisteredAsCudaIsAnArgumentError) {
  SKIP_WITHOUT_GPU();
  THUB_Context c = init("", false);
  THUB_Model m = THUB_MODEL_NULL;
  ASSERT_EQ(THUB_Open(c, "m", "r", 0, 1, THUB_INFO_NULL, &m), THUB_SUCCESS);
  char host[64];
  EXPECT_EQ(THUB_Register(m, "h", host, sizeof host, THUB_MEM_CUDA), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Finalize(&c), THUB_SUCCESS);
}

}  // namespace
