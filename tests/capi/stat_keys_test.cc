// THUB_Model_stat answers every key of its table (src/common/stat_keys.h), and an unknown
// key is THUB_ERR_ARG whose detail names the nearest known key.
#include <gtest/gtest.h>
#include <tensorhub/tensorhub.h>

#include <string>
#include <vector>

#include "src/common/stat_keys.h"

namespace {

std::string last_error(THUB_Context c) {
  char buf[512];
  THUB_Last_error(c, buf, sizeof buf);
  return buf;
}

TEST(StatKeysTest, EveryKeyOfTheTableIsAnswered) {
  THUB_Context c = THUB_CONTEXT_NULL;
  ASSERT_EQ(THUB_Init(THUB_INFO_NULL, &c), THUB_SUCCESS);
  THUB_Model m = THUB_MODEL_NULL;
  ASSERT_EQ(THUB_Open(c, "stats", "r", 0, 1, THUB_INFO_NULL, &m), THUB_SUCCESS);
  std::vector<char> w(1 << 20, 1), tiny(64, 2);
  ASSERT_EQ(THUB_Register(m, "w", w.data(), w.size(), THUB_MEM_HOST), THUB_SUCCESS);
  ASSERT_EQ(THUB_Register(m, "tiny", tiny.data(), tiny.size(), THUB_MEM_HOST), THUB_SUCCESS);
  ASSERT_EQ(THUB_Publish(m, 5), THUB_SUCCESS);
  for (const thub::StatKeySpec& k : thub::kStatKeys) {
    int64_t v = -12345;
    EXPECT_EQ(THUB_Model_stat(m, k.name, &v), THUB_SUCCESS) << k.name << ": " << last_error(c);
    EXPECT_NE(v, -12345) << k.name;
  }
  int64_t v = 0;
  ASSERT_EQ(THUB_Model_stat(m, "held_version", &v), THUB_SUCCESS);
  EXPECT_EQ(v, 5);
  ASSERT_EQ(THUB_Model_stat(m, "compacted_tensors", &v), THUB_SUCCESS);
  EXPECT_EQ(v, 1);
  EXPECT_EQ(THUB_Close(&m), THUB_SUCCESS);
  EXPECT_EQ(THUB_Finalize(&c), THUB_SUCCESS);
}

TEST(StatKeysTest, UnknownKeyNamesTheNearestOne) {
  THUB_Context c = THUB_CONTEXT_NULL;
  ASSERT_EQ(THUB_Init(THUB_INFO_NULL, &c), THUB_SUCCESS);
  THUB_Model m = THUB_MODEL_NULL;
  ASSERT_EQ(THUB_Open(c, "stats", "r", 0, 1, THUB_INFO_NULL, &m), THUB_SUCCESS);
  int64_t v = 77;
  EXPECT_EQ(THUB_Model_stat(m, "held_versoin", &v), THUB_ERR_ARG);
  EXPECT_EQ(v, 77);  // outputs are written only on success
  std::string e = last_error(c);
  EXPECT_NE(e.find("held_versoin"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'held_version'"), std::string::npos) << e;
  EXPECT_EQ(THUB_Model_stat(m, "zzzzzzzzzzzz", &v), THUB_ERR_ARG);
  EXPECT_EQ(last_error(c).find("did you mean"), std::string::npos) << last_error(c);
  EXPECT_EQ(THUB_Close(&m), THUB_SUCCESS);
  EXPECT_EQ(THUB_Finalize(&c), THUB_SUCCESS);
}

}  // namespace
