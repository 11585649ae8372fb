// THUB_Alloc_mem / THUB_Free_mem: memory allocated through the context (UCX shared memory)
// holds tensors like any other memory, mixed with malloc'd tensors, read byte-exact by a
// replica; freeing it while a model serves from it is refused; misuse is THUB_ERR_ARG.
#include <gtest/gtest.h>
#include <tensorhub/tensorhub.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

void fill(char* p, size_t n, int seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(i * 7 + seed * 131 + (i >> 12));
}

struct Tensors {
  char* pool = nullptr;  // from THUB_Alloc_mem
  std::vector<char> heap = std::vector<char>(2u << 20);
  std::vector<std::pair<char*, size_t>> views;
  Tensors(THUB_Context c, THUB_Model m) {
    EXPECT_EQ(THUB_Alloc_mem(c, 8u << 20, THUB_INFO_NULL, reinterpret_cast<void**>(&pool)), THUB_SUCCESS);
    views = {{pool, 1u << 20}, {pool + (1u << 20), 4u << 20}, {pool + (5u << 20), 100}, {heap.data(), heap.size()},
             {pool + (6u << 20), (2u << 20) - 4096}};
    for (size_t i = 0; i < views.size(); ++i) {
      EXPECT_EQ(THUB_Register(m, ("t" + std::to_string(i)).c_str(), views[i].first, views[i].second, THUB_MEM_HOST),
                THUB_SUCCESS);
    }
  }
};

TEST(AllocMemTest, TensorsInAllocatedMemoryReplicateByteExact) {
  THUB_Context tc = THUB_CONTEXT_NULL, rc = THUB_CONTEXT_NULL;
  ASSERT_EQ(THUB_Init(THUB_INFO_NULL, &tc), THUB_SUCCESS);
  char addr[128];
  ASSERT_EQ(THUB_Registry_address(tc, addr, sizeof addr), THUB_SUCCESS);
  THUB_Info info;
  ASSERT_EQ(THUB_Info_create(&info), THUB_SUCCESS);
  ASSERT_EQ(THUB_Info_set(info, "registry", addr), THUB_SUCCESS);
  ASSERT_EQ(THUB_Init(info, &rc), THUB_SUCCESS);
  THUB_Info_free(&info);
  THUB_Model tm = THUB_MODEL_NULL, rm = THUB_MODEL_NULL;
  ASSERT_EQ(THUB_Open(tc, "m", "trainer", 0, 1, THUB_INFO_NULL, &tm), THUB_SUCCESS);
  ASSERT_EQ(THUB_Open(rc, "m", "rollout", 0, 1, THUB_INFO_NULL, &rm), THUB_SUCCESS);
  Tensors src(tc, tm), dst(rc, rm);
  for (size_t i = 0; i < src.views.size(); ++i) fill(src.views[i].first, src.views[i].second, static_cast<int>(i));
  ASSERT_EQ(THUB_Publish(tm, 1), THUB_SUCCESS);
  int64_t got = -1;
  ASSERT_EQ(THUB_Replicate(rm, THUB_LATEST, &got), THUB_SUCCESS);
  EXPECT_EQ(got, 1);
  for (size_t i = 0; i < src.views.size(); ++i) {
    EXPECT_EQ(std::memcmp(src.views[i].first, dst.views[i].first, src.views[i].second), 0) << "tensor " << i;
  }
  // Served memory cannot be freed; a closed model's can.
  EXPECT_EQ(THUB_Free_mem(tc, src.pool), THUB_ERR_STATE);
  ASSERT_EQ(THUB_Close(&tm), THUB_SUCCESS);
  EXPECT_EQ(THUB_Free_mem(tc, src.pool), THUB_SUCCESS);
  EXPECT_EQ(THUB_Free_mem(tc, src.pool), THUB_ERR_ARG);  // twice
  // The reader's pool is freed by THUB_Finalize (with its model).
  EXPECT_EQ(THUB_Finalize(&rc), THUB_SUCCESS);
  EXPECT_EQ(THUB_Finalize(&tc), THUB_SUCCESS);
}

TEST(AllocMemTest, MisuseIsAnArgumentError) {
  THUB_Context c = THUB_CONTEXT_NULL;
  ASSERT_EQ(THUB_Init(THUB_INFO_NULL, &c), THUB_SUCCESS);
  void* p = nullptr;
  EXPECT_EQ(THUB_Alloc_mem(c, 0, THUB_INFO_NULL, &p), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Alloc_mem(c, 4096, THUB_INFO_NULL, nullptr), THUB_ERR_ARG);
  THUB_Info info;
  ASSERT_EQ(THUB_Info_create(&info), THUB_SUCCESS);
  ASSERT_EQ(THUB_Info_set(info, "verify", "true"), THUB_SUCCESS);
  EXPECT_EQ(THUB_Alloc_mem(c, 4096, info, &p), THUB_ERR_ARG);  // no keys of its own
  THUB_Info_free(&info);
  std::vector<char> heap(64);
  EXPECT_EQ(THUB_Free_mem(c, heap.data()), THUB_ERR_ARG);
  ASSERT_EQ(THUB_Alloc_mem(c, 4096, THUB_INFO_NULL, &p), THUB_SUCCESS);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  std::memset(p, 1, 4096);
  EXPECT_EQ(THUB_Free_mem(c, static_cast<char*>(p) + 8), THUB_ERR_ARG);  // not the base
  EXPECT_EQ(THUB_Free_mem(THUB_CONTEXT_NULL, p), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Finalize(&c), THUB_SUCCESS);  // frees p
}

}  // namespace
