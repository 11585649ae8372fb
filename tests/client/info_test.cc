// Info keys and their environment overlay: explicit values win; bad values name the key.
#include <gtest/gtest.h>

#include <cstdlib>

#include "src/common/info.h"
#include "src/common/status.h"

namespace thub {
namespace {

TEST(InfoTest, EnvironmentOverlaysAndExplicitWins) {
  setenv("TENSORHUB_CHUNK_SIZE", "8M", 1);
  InfoMap info;
  EXPECT_EQ(info.get_size("chunk_size", 1, 1, 1ull << 40), 8u << 20);
  info.set("chunk_size", "64k");
  EXPECT_EQ(info.get_size("chunk_size", 1, 1, 1ull << 40), 64u << 10);
  unsetenv("TENSORHUB_CHUNK_SIZE");
}

TEST(InfoTest, TypedParsing) {
  InfoMap info;
  info.set("a", "yes");
  info.set("b", "0");
  info.set("n", "42");
  info.set("s", "1G");
  info.set("mode", "copy");
  EXPECT_TRUE(info.get_bool("a", false));
  EXPECT_FALSE(info.get_bool("b", true));
  EXPECT_TRUE(info.get_bool("missing", true));
  EXPECT_EQ(info.get_int("n", 0, 0, 100), 42);
  EXPECT_EQ(info.get_size("s", 0, 0, ~0ull), 1ull << 30);
  EXPECT_EQ(info.get_choice("mode", "auto", "auto|direct|copy|tcp"), "copy");
}

TEST(InfoTest, BadValuesThrowArgNamingTheKey) {
  InfoMap info;
  info.set("flag", "perhaps");
  info.set("num", "12x");
  info.set("big", "1000");
  info.set("size", "5T");
  info.set("mode", "fast");
  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'"), std::string::npos);
      return e.code();
    }
    return Code::kSuccess;
  };
  EXPECT_EQ(code_of([&] { (void)info.get_bool("flag", false); }), Code::kArg);
  EXPECT_EQ(code_of([&] { (void)info.get_int("num", 0, 0, 100); }), Code::kArg);
  EXPECT_EQ(code_of([&] { (void)info.get_int("big", 0, 0, 100); }), Code::kArg);
  EXPECT_EQ(code_of([&] { (void)info.get_size("size", 0, 0, ~0ull); }), Code::kArg);
  EXPECT_EQ(code_of([&] { (void)info.get_choice("mode", "auto", "auto|direct"); }), Code::kArg);
}

}  // namespace
}  // namespace thub
