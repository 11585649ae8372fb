// auth_token_file / --auth-token-file: the secret is read from a file that only its owner
// may access (refused otherwise, as ssh refuses a private key), with one trailing newline
// stripped. The mode bits decide, not access: the test means the same as root.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "src/common/status.h"
#include "src/registry/auth.h"

namespace thub::registry {
namespace {

class TokenFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/thub-token-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string write(const std::string& content, mode_t mode) {
    std::string path = dir_ + "/token" + std::to_string(n_++);
    std::ofstream(path, std::ios::binary) << content;
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }
  // The Error(kArg) text of reading `path`, or "" when it was read.
  static std::string refusal(const std::string& path) {
    try {
      (void)read_token_file(path);
      return "";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kArg);
      return e.what();
    }
  }
  std::string dir_;
  int n_ = 0;
};

TEST_F(TokenFileTest, OwnerOnlyFileIsReadWithOneTrailingNewlineStripped) {
  EXPECT_EQ(read_token_file(write("s3cret\n", 0600)), "s3cret");
  EXPECT_EQ(read_token_file(write("s3cret", 0400)), "s3cret");
  EXPECT_EQ(read_token_file(write("s3cret\r\n", 0600)), "s3cret");
  EXPECT_EQ(read_token_file(write("s3cret\n\n", 0600)), "s3cret\n");  // only one
  EXPECT_EQ(read_token_file(write(std::string("a\0b", 3), 0600)), std::string("a\0b", 3));
}

TEST_F(TokenFileTest, FileOthersMayAccessIsRefusedLikeSsh) {
  for (mode_t mode : {0644, 0640, 0604, 0660, 0620, 0602, 0610}) {
    std::string why = refusal(write("s3cret\n", mode));
    EXPECT_NE(why.find("too open"), std::string::npos) << std::oct << mode << ": " << why;
    EXPECT_NE(why.find("chmod 600"), std::string::npos) << why;
  }
}

TEST_F(TokenFileTest, EmptyMissingHugeOrNotAFileIsRefused) {
  EXPECT_NE(refusal(write("", 0600)).find("empty"), std::string::npos);
  EXPECT_NE(refusal(write("\n", 0600)).find("empty"), std::string::npos);
  EXPECT_NE(refusal(dir_ + "/none").find("No such file"), std::string::npos);
  EXPECT_NE(refusal(write(std::string(kMaxTokenFileBytes + 1, 'x'), 0600)).find("larger than"), std::string::npos);
  ASSERT_EQ(::chmod(dir_.c_str(), 0700), 0);
  EXPECT_NE(refusal(dir_).find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace thub::registry
