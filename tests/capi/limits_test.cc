// Sizes, names and info keys are checked at the call that takes them: THUB_ERR_ARG with a
// message, not THUB_ERR_INTERNAL later, and never a silent wrap-around or a silently
// ignored (misspelt) key.
#include <gtest/gtest.h>
#include <tensorhub/tensorhub.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

std::string last_error(THUB_Context c) {
  char buf[1024];
  EXPECT_EQ(THUB_Last_error(c, buf, sizeof buf), THUB_SUCCESS);
  return buf;
}

struct Ctx {
  THUB_Context c = THUB_CONTEXT_NULL;
  THUB_Model m = THUB_MODEL_NULL;
  Ctx() {
    EXPECT_EQ(THUB_Init(THUB_INFO_NULL, &c), THUB_SUCCESS);
    EXPECT_EQ(THUB_Open(c, "m", "r", 0, 1, THUB_INFO_NULL, &m), THUB_SUCCESS);
  }
  ~Ctx() { THUB_Finalize(&c); }
};

TEST(LimitsTest, TensorsThatAddUpPastOneTebibyteAreRefusedAtRegister) {
  // Registered memory outlives the model: the staging behind publish (packing the tiny
  // tensors) reads it on the copy engine until the model is closed by THUB_Finalize.
  std::vector<char> w(4096);
  Ctx x;
  // Never touched: the sizes are refused before anything is read or registered.
  char* base = reinterpret_cast<char*>(uintptr_t{1} << 20);
  EXPECT_EQ(THUB_Register(x.m, "a", base, size_t{1} << 63, THUB_MEM_HOST), THUB_ERR_ARG);
  EXPECT_NE(last_error(x.c).find("1 TiB"), std::string::npos) << last_error(x.c);
  ASSERT_EQ(THUB_Register(x.m, "w", w.data(), w.size(), THUB_MEM_HOST), THUB_SUCCESS);
  EXPECT_EQ(THUB_Register(x.m, "b", base, (size_t{1} << 40) - 1, THUB_MEM_HOST), THUB_ERR_ARG);
  char* top = reinterpret_cast<char*>(~uintptr_t{0} - 100);
  EXPECT_EQ(THUB_Register(x.m, "wrap", top, 4096, THUB_MEM_HOST), THUB_ERR_ARG);
  EXPECT_NE(last_error(x.c).find("wrap"), std::string::npos) << last_error(x.c);
  // The model is unharmed: it publishes its one good tensor.
  EXPECT_EQ(THUB_Publish(x.m, 1), THUB_SUCCESS);
}

TEST(LimitsTest, HugeNamesAreArgumentErrorsAtTheCall) {
  Ctx x;
  std::string huge(70u << 20, 'n');
  std::vector<char> w(64);
  EXPECT_EQ(THUB_Register(x.m, huge.c_str(), w.data(), w.size(), THUB_MEM_HOST), THUB_ERR_ARG);
  EXPECT_NE(last_error(x.c).find("longer than"), std::string::npos) << last_error(x.c);
  THUB_Model m2 = THUB_MODEL_NULL;
  EXPECT_EQ(THUB_Open(x.c, huge.c_str(), "r", 0, 1, THUB_INFO_NULL, &m2), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Open(x.c, "m2", huge.c_str(), 0, 1, THUB_INFO_NULL, &m2), THUB_ERR_ARG);
  THUB_Info info;
  ASSERT_EQ(THUB_Info_create(&info), THUB_SUCCESS);
  EXPECT_EQ(THUB_Info_set(info, "datacenter", huge.c_str()), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Info_set(info, huge.c_str(), "x"), THUB_ERR_ARG);
  THUB_Info_free(&info);
}

TEST(LimitsTest, UnknownInfoKeysAreArgumentErrorsNamingTheNearestKey) {
  THUB_Info info;
  ASSERT_EQ(THUB_Info_create(&info), THUB_SUCCESS);
  ASSERT_EQ(THUB_Info_set(info, "auth_tokn", "secret"), THUB_SUCCESS);
  THUB_Context c = THUB_CONTEXT_NULL;
  EXPECT_EQ(THUB_Init(info, &c), THUB_ERR_ARG);
  EXPECT_EQ(c, THUB_CONTEXT_NULL);
  std::string e = last_error(THUB_CONTEXT_NULL);
  EXPECT_NE(e.find("auth_tokn"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'auth_token'"), std::string::npos) << e;
  THUB_Info_free(&info);

  // A key of THUB_Open given to THUB_Init, and one of THUB_Init given to THUB_Open.
  ASSERT_EQ(THUB_Info_create(&info), THUB_SUCCESS);
  ASSERT_EQ(THUB_Info_set(info, "retain", "2"), THUB_SUCCESS);
  EXPECT_EQ(THUB_Init(info, &c), THUB_ERR_ARG);
  EXPECT_NE(last_error(THUB_CONTEXT_NULL).find("THUB_Open"), std::string::npos);
  THUB_Info_free(&info);
  ASSERT_EQ(THUB_Init(THUB_INFO_NULL, &c), THUB_SUCCESS);
  ASSERT_EQ(THUB_Info_create(&info), THUB_SUCCESS);
  ASSERT_EQ(THUB_Info_set(info, "verify", "true"), THUB_SUCCESS);
  THUB_Model m = THUB_MODEL_NULL;
  EXPECT_EQ(THUB_Open(c, "m", "r", 0, 1, info, &m), THUB_ERR_ARG);
  EXPECT_NE(last_error(c).find("THUB_Init"), std::string::npos) << last_error(c);
  THUB_Info_free(&info);
  EXPECT_EQ(THUB_Finalize(&c), THUB_SUCCESS);
}

}  // namespace
