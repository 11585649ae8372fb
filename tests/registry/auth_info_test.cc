// The authentication info keys through the C API (issue 13, item 6): auth_token_file and
// auth_mutual reach the embedded registry and the client; a wrong, missing or unreadable
// token is a code with a clear detail, never an abort.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include "tensorhub/tensorhub.h"

namespace {

class AuthInfoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/thub-auth-info-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string token_file(const std::string& content, mode_t mode) {
    std::string p = dir_ + "/token" + std::to_string(n_++);
    std::ofstream(p) << content;
    ::chmod(p.c_str(), mode);
    return p;
  }
  // THUB_Init with these keys; *detail gets THUB_Last_error on failure.
  static int init(const std::vector<std::pair<std::string, std::string>>& keys, THUB_Context* ctx,
                  std::string* detail = nullptr) {
    THUB_Info info = THUB_INFO_NULL;
    THUB_Info_create(&info);
    THUB_Info_set(info, "registry_listen", "127.0.0.1:0");
    THUB_Info_set(info, "tls", "tcp,self");
    for (const auto& [k, v] : keys) THUB_Info_set(info, k.c_str(), v.c_str());
    int st = THUB_Init(info, ctx);
    THUB_Info_free(&info);
    if (st != THUB_SUCCESS && detail) {
      char buf[1024];
      THUB_Last_error(THUB_CONTEXT_NULL, buf, sizeof buf);
      *detail = buf;
    }
    return st;
  }
  std::string dir_;
  int n_ = 0;
};

TEST_F(AuthInfoTest, TokenFileAuthenticatesAndWrongOrMissingTokensAreAuthErrors) {
  THUB_Context trainer = THUB_CONTEXT_NULL;
  ASSERT_EQ(init({{"auth_token_file", token_file("job-secret\n", 0600)}}, &trainer), THUB_SUCCESS);
  char addr[256];
  ASSERT_EQ(THUB_Registry_address(trainer, addr, sizeof addr), THUB_SUCCESS);

  THUB_Context good = THUB_CONTEXT_NULL, bad = THUB_CONTEXT_NULL;
  EXPECT_EQ(init({{"registry", addr}, {"auth_token", "job-secret"}}, &good), THUB_SUCCESS);
  std::string detail;
  EXPECT_EQ(init({{"registry", addr}, {"auth_token", "job-secreT"}}, &bad, &detail), THUB_ERR_AUTH);
  EXPECT_NE(detail.find("wrong token"), std::string::npos) << detail;
  EXPECT_EQ(init({{"registry", addr}}, &bad, &detail), THUB_ERR_AUTH);
  EXPECT_NE(detail.find("requires an auth token"), std::string::npos) << detail;
  THUB_Finalize(&good);
  THUB_Finalize(&trainer);
}

TEST_F(AuthInfoTest, MutualAuthenticationRefusesARegistryWithoutAToken) {
  THUB_Context open = THUB_CONTEXT_NULL, client = THUB_CONTEXT_NULL;
  ASSERT_EQ(init({}, &open), THUB_SUCCESS);
  char addr[256];
  ASSERT_EQ(THUB_Registry_address(open, addr, sizeof addr), THUB_SUCCESS);
  std::string detail;
  EXPECT_EQ(init({{"registry", addr}, {"auth_token", "s"}}, &client, &detail), THUB_ERR_AUTH);
  EXPECT_NE(detail.find("asks for no auth token"), std::string::npos) << detail;
  EXPECT_EQ(init({{"registry", addr}, {"auth_token", "s"}, {"auth_mutual", "false"}}, &client), THUB_SUCCESS);
  THUB_Finalize(&client);
  THUB_Finalize(&open);
}

TEST_F(AuthInfoTest, BadTokenSettingsAreArgumentErrorsWithTheReason) {
  THUB_Context c = THUB_CONTEXT_NULL;
  std::string detail;
  EXPECT_EQ(init({{"auth_token_file", token_file("s\n", 0644)}}, &c, &detail), THUB_ERR_ARG);
  EXPECT_NE(detail.find("too open"), std::string::npos) << detail;
  EXPECT_EQ(init({{"auth_token_file", token_file("s\n", 0600)}, {"auth_token", "s"}}, &c, &detail), THUB_ERR_ARG);
  EXPECT_NE(detail.find("not both"), std::string::npos) << detail;
  EXPECT_EQ(init({{"auth_mutual", "perhaps"}}, &c, &detail), THUB_ERR_ARG);
  EXPECT_NE(detail.find("auth_mutual"), std::string::npos) << detail;
  EXPECT_EQ(init({{"auth_token_file", dir_}}, &c, &detail), THUB_ERR_ARG);
  EXPECT_EQ(c, THUB_CONTEXT_NULL);  // written only on success
}

// Whatever the token settings hold, THUB_Init answers with a code.
TEST_F(AuthInfoTest, RandomTokenSettingsNeverAbort) {
  std::mt19937_64 rng(17);
  const char* keys[] = {"auth_token_file", "auth_mutual", "auth_token"};
  for (int i = 0; i < 40; ++i) {
    std::string v(rng() % 300, '\0');
    for (auto& ch : v) ch = static_cast<char>(1 + rng() % 255);  // C strings: no NUL inside
    if (i % 4 == 0) v = "/proc/self/" + v.substr(0, 20);
    if (i % 4 == 1) v = token_file(v, static_cast<mode_t>(rng() % 0777));
    THUB_Context c = THUB_CONTEXT_NULL;
    int st = init({{keys[i % 3], v}, {"registry", "127.0.0.1:1"}, {"registry_connect_timeout_ms", "200"},
                   {"reconnect_ms", "0"}},
                  &c);
    EXPECT_NE(st, THUB_SUCCESS) << "nothing listens on port 1";
    EXPECT_TRUE(st == THUB_ERR_ARG || st == THUB_ERR_AUTH || st == THUB_ERR_REGISTRY) << st;
    EXPECT_EQ(c, THUB_CONTEXT_NULL);
  }
}

}  // namespace
