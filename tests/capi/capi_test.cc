// The C boundary: null and stale handles, bad info values and unknown codes give
// THUB_ERR_* and a text, never a crash.
#include <gtest/gtest.h>
#include <tensorhub/tensorhub.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "src/common/status.h"

namespace {

// Every row of the status table (src/common/status.h) is a public code whose text names it
// and gives its meaning and hint; other numbers get a constant "unknown" text, never NULL.
TEST(ErrorStringTest, EveryCodeHasANameAMeaningAndAHint) {
  for (const thub::CodeText& t : thub::kCodeTexts) {
    std::string s = THUB_Error_string(static_cast<int>(t.code));
    EXPECT_EQ(s.rfind(std::string(t.name) + ": ", 0), 0u) << s;
    EXPECT_NE(s.find(t.message), std::string::npos) << s;
    EXPECT_NE(s.find(t.hint), std::string::npos) << s;
  }
  EXPECT_EQ(std::string(THUB_Error_string(THUB_ERR_CANCELED)).rfind("THUB_ERR_CANCELED: ", 0), 0u);
  for (int unknown : {12345, 3, -13, -98, -100}) {
    ASSERT_NE(THUB_Error_string(unknown), nullptr);
    EXPECT_NE(std::string(THUB_Error_string(unknown)).find("UNKNOWN"), std::string::npos);
  }
}

TEST(CapiTest, NullHandlesAreArgErrors) {
  int64_t got = 0;
  int done = 0;
  THUB_Model m = THUB_MODEL_NULL;
  THUB_Request r = THUB_REQUEST_NULL;
  THUB_Context c = THUB_CONTEXT_NULL;
  THUB_Info info = THUB_INFO_NULL;
  char buf[64];
  EXPECT_EQ(THUB_Init(THUB_INFO_NULL, nullptr), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Finalize(nullptr), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Finalize(&c), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Registry_address(c, buf, sizeof buf), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Open(c, "m", "r", 0, 1, THUB_INFO_NULL, &m), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Register(m, "t", buf, sizeof buf, THUB_MEM_HOST), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Publish(m, 1), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Replicate(m, THUB_LATEST, &got), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Ireplicate(m, THUB_LATEST, &r), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Update(m, THUB_LATEST, &got), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Unpublish(m), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Close(&m), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Close(nullptr), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Test(&r, &done, &got), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Wait(&r, &got), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Info_set(info, "k", "v"), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Info_free(&info), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Last_error(c, nullptr, 10), THUB_ERR_ARG);
  int64_t v;
  EXPECT_EQ(THUB_Model_stat(m, "held_version", &v), THUB_ERR_ARG);
}

TEST(CapiTest, StaleHandleIsRefused) {
  THUB_Info info;
  ASSERT_EQ(THUB_Info_create(&info), THUB_SUCCESS);
  THUB_Info stale = info;
  ASSERT_EQ(THUB_Info_free(&info), THUB_SUCCESS);
  EXPECT_EQ(info, THUB_INFO_NULL);
  (void)stale;  // not dereferenced: freed memory; the magic check covers reuse within the library
}

TEST(CapiTest, BadInfoValuesAreArgErrorsWithDetail) {
  THUB_Info info;
  ASSERT_EQ(THUB_Info_create(&info), THUB_SUCCESS);
  EXPECT_EQ(THUB_Info_set(info, "", "x"), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Info_set(info, "k", nullptr), THUB_ERR_ARG);
  ASSERT_EQ(THUB_Info_set(info, "verify", "maybe"), THUB_SUCCESS);
  THUB_Context c = THUB_CONTEXT_NULL;
  EXPECT_EQ(THUB_Init(info, &c), THUB_ERR_ARG);
  EXPECT_EQ(c, THUB_CONTEXT_NULL);
  char buf[256];
  ASSERT_EQ(THUB_Last_error(THUB_CONTEXT_NULL, buf, sizeof buf), THUB_SUCCESS);
  EXPECT_NE(std::string(buf).find("verify"), std::string::npos) << buf;
  ASSERT_EQ(THUB_Info_set(info, "verify", "true"), THUB_SUCCESS);
  ASSERT_EQ(THUB_Info_set(info, "registry", "no-port-here"), THUB_SUCCESS);
  EXPECT_EQ(THUB_Init(info, &c), THUB_ERR_ARG);
  THUB_Info_free(&info);
}

TEST(CapiTest, UnreachableRegistryIsRegistryError) {
  THUB_Info info;
  ASSERT_EQ(THUB_Info_create(&info), THUB_SUCCESS);
  ASSERT_EQ(THUB_Info_set(info, "registry", "127.0.0.1:1"), THUB_SUCCESS);
  THUB_Context c = THUB_CONTEXT_NULL;
  EXPECT_EQ(THUB_Init(info, &c), THUB_ERR_REGISTRY);
  THUB_Info_free(&info);
}

TEST(CapiTest, InProcessPublishAndArgumentChecks) {
  THUB_Context c = THUB_CONTEXT_NULL;
  ASSERT_EQ(THUB_Init(THUB_INFO_NULL, &c), THUB_SUCCESS);
  char addr[128];
  ASSERT_EQ(THUB_Registry_address(c, addr, sizeof addr), THUB_SUCCESS);
  EXPECT_NE(std::strchr(addr, ':'), nullptr);
  EXPECT_EQ(THUB_Registry_address(c, addr, 3), THUB_ERR_ARG);
  THUB_Model m = THUB_MODEL_NULL;
  EXPECT_EQ(THUB_Open(c, "", "r", 0, 1, THUB_INFO_NULL, &m), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Open(c, "m", "r", 1, 1, THUB_INFO_NULL, &m), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Open(c, "m", "r", 0, 0, THUB_INFO_NULL, &m), THUB_ERR_ARG);
  ASSERT_EQ(THUB_Open(c, "m", "r", 0, 1, THUB_INFO_NULL, &m), THUB_SUCCESS);
  std::vector<char> w(1 << 20, 1);
  EXPECT_EQ(THUB_Publish(m, 0), THUB_ERR_STATE);  // nothing registered
  EXPECT_EQ(THUB_Register(m, "w", nullptr, 10, THUB_MEM_HOST), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Register(m, "w", w.data(), w.size(), 7), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Register(m, nullptr, w.data(), w.size(), THUB_MEM_HOST), THUB_ERR_ARG);
  ASSERT_EQ(THUB_Register(m, "w", w.data(), w.size(), THUB_MEM_HOST), THUB_SUCCESS);
  EXPECT_EQ(THUB_Register(m, "w", w.data(), w.size(), THUB_MEM_HOST), THUB_ERR_ARG);  // duplicate name
  ASSERT_EQ(THUB_Register(m, "empty", nullptr, 0, THUB_MEM_HOST), THUB_SUCCESS);
  int64_t v = 0;
  EXPECT_EQ(THUB_Model_stat(m, "no-such-key", &v), THUB_ERR_ARG);
  ASSERT_EQ(THUB_Publish(m, 3), THUB_SUCCESS);
  ASSERT_EQ(THUB_Model_stat(m, "held_version", &v), THUB_SUCCESS);
  EXPECT_EQ(v, 3);
  ASSERT_EQ(THUB_Model_stat(m, "total_bytes", &v), THUB_SUCCESS);
  EXPECT_EQ(v, 1 << 20);
  char err[256];
  EXPECT_EQ(THUB_Publish(m, 4), THUB_ERR_STATE);
  ASSERT_EQ(THUB_Last_error(c, err, sizeof err), THUB_SUCCESS);
  EXPECT_NE(std::string(err).find("already published"), std::string::npos) << err;
  EXPECT_EQ(THUB_Close(&m), THUB_SUCCESS);
  EXPECT_EQ(m, THUB_MODEL_NULL);
  EXPECT_EQ(THUB_Finalize(&c), THUB_SUCCESS);
  EXPECT_EQ(c, THUB_CONTEXT_NULL);
}

// Without CUDA in the build, or without a device, CUDA memory is UNSUPPORTED; with a GPU
// a host pointer registered as CUDA memory is an argument error (tests/gpu/ covers both).
TEST(CapiTest, CudaMemoryNeedsACudaDevicePointer) {
  THUB_Context c = THUB_CONTEXT_NULL;
  ASSERT_EQ(THUB_Init(THUB_INFO_NULL, &c), THUB_SUCCESS);
  THUB_Model m = THUB_MODEL_NULL;
  ASSERT_EQ(THUB_Open(c, "m", "r", 0, 1, THUB_INFO_NULL, &m), THUB_SUCCESS);
  char fake[64];
  int st = THUB_Register(m, "gpu", fake, sizeof fake, THUB_MEM_CUDA);
  EXPECT_TRUE(st == THUB_ERR_UNSUPPORTED || st == THUB_ERR_ARG) << st;
  EXPECT_EQ(THUB_Finalize(&c), THUB_SUCCESS);  // closes the open model too
}

}  // namespace
