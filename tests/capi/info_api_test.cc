// The MPI_Info-style calls and the version queries of the C API.
#include <gtest/gtest.h>
#include <tensorhub/tensorhub.h>

#include <cstring>
#include <string>

namespace {

TEST(InfoApiTest, GetDeleteDupAndKeysInOrder) {
  THUB_Info info;
  ASSERT_EQ(THUB_Info_create(&info), THUB_SUCCESS);
  ASSERT_EQ(THUB_Info_set(info, "verify", "true"), THUB_SUCCESS);
  ASSERT_EQ(THUB_Info_set(info, "chunk_size", "1M"), THUB_SUCCESS);
  ASSERT_EQ(THUB_Info_set(info, "datacenter", "west-coast"), THUB_SUCCESS);
  int n = 0;
  ASSERT_EQ(THUB_Info_get_nkeys(info, &n), THUB_SUCCESS);
  EXPECT_EQ(n, 3);
  char key[64];
  const char* sorted[] = {"chunk_size", "datacenter", "verify"};
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(THUB_Info_get_nthkey(info, i, key, sizeof key), THUB_SUCCESS);
    EXPECT_STREQ(key, sorted[i]);
  }
  EXPECT_EQ(THUB_Info_get_nthkey(info, 3, key, sizeof key), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Info_get_nthkey(info, -1, key, sizeof key), THUB_ERR_ARG);

  char value[8];
  int flag = -1;
  ASSERT_EQ(THUB_Info_get(info, "datacenter", sizeof value, value, &flag), THUB_SUCCESS);
  EXPECT_EQ(flag, 1);
  EXPECT_STREQ(value, "west-co");  // truncated to len - 1
  size_t len = 0;
  ASSERT_EQ(THUB_Info_get_valuelen(info, "datacenter", &len, &flag), THUB_SUCCESS);
  EXPECT_EQ(len, std::strlen("west-coast"));
  std::strcpy(value, "kept");
  ASSERT_EQ(THUB_Info_get(info, "registry", sizeof value, value, &flag), THUB_SUCCESS);
  EXPECT_EQ(flag, 0);
  EXPECT_STREQ(value, "kept");  // untouched

  THUB_Info copy;
  ASSERT_EQ(THUB_Info_dup(info, &copy), THUB_SUCCESS);
  ASSERT_EQ(THUB_Info_delete(info, "verify"), THUB_SUCCESS);
  EXPECT_EQ(THUB_Info_delete(info, "verify"), THUB_ERR_NOT_FOUND);
  ASSERT_EQ(THUB_Info_get_nkeys(info, &n), THUB_SUCCESS);
  EXPECT_EQ(n, 2);
  ASSERT_EQ(THUB_Info_get_nkeys(copy, &n), THUB_SUCCESS);
  EXPECT_EQ(n, 3);  // the copy is its own object
  ASSERT_EQ(THUB_Info_get(copy, "verify", sizeof value, value, &flag), THUB_SUCCESS);
  EXPECT_EQ(flag, 1);
  EXPECT_STREQ(value, "true");
  EXPECT_EQ(THUB_Info_free(&copy), THUB_SUCCESS);
  EXPECT_EQ(THUB_Info_free(&info), THUB_SUCCESS);
  EXPECT_EQ(THUB_Info_get_nkeys(info, &n), THUB_ERR_ARG);
  EXPECT_EQ(THUB_Info_get(THUB_INFO_NULL, "k", 4, value, &flag), THUB_ERR_ARG);
}

TEST(InfoApiTest, VersionOfTheLibraryThatRuns) {
  int major = -1, minor = -1, patch = -1;
  ASSERT_EQ(THUB_Get_version(&major, &minor, &patch), THUB_SUCCESS);
  EXPECT_EQ(major, THUB_VERSION_MAJOR);
  EXPECT_EQ(minor, THUB_VERSION_MINOR);
  EXPECT_EQ(patch, THUB_VERSION_PATCH);
  EXPECT_EQ(THUB_Get_version(nullptr, &minor, &patch), THUB_ERR_ARG);
  char buf[256];
  ASSERT_EQ(THUB_Get_library_version(buf, sizeof buf), THUB_SUCCESS);
  std::string s = buf;
  EXPECT_EQ(s.rfind("TensorHub " + std::to_string(major) + "." + std::to_string(minor), 0), 0u) << s;
  EXPECT_NE(s.find("UCX "), std::string::npos) << s;
  char tiny[4];
  ASSERT_EQ(THUB_Get_library_version(tiny, sizeof tiny), THUB_SUCCESS);
  EXPECT_STREQ(tiny, "Ten");
}

}  // namespace
