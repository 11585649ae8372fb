// Info keys read through their table: the environment overlay (explicit values win), typed
// values with the table's defaults and ranges, bad values naming the key, and unknown keys
// refused with the nearest known one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "src/common/info.h"
#include "src/common/info_keys.h"
#include "src/common/status.h"

namespace thub {
namespace {

// The error a call throws (kSuccess when none) and its text in *what.
template <typename F>
Code code_of(F&& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (what) *what = e.what();
    return e.code();
  }
  return Code::kSuccess;
}

TEST(InfoTest, EnvironmentOverlaysAndExplicitWins) {
  setenv("TENSORHUB_CHUNK_SIZE", "8M", 1);
  InfoMap info;
  EXPECT_EQ(info.get<info_key("chunk_size")>(), 8u << 20);
  info.set("chunk_size", "64k");
  EXPECT_EQ(info.get<info_key("chunk_size")>(), 64u << 10);
  unsetenv("TENSORHUB_CHUNK_SIZE");
}

TEST(InfoTest, UnsetKeysHaveTheTablesDefault) {
  InfoMap info;
  EXPECT_EQ(info.get<info_key("chunk_size")>(), 4u << 20);
  EXPECT_EQ(info.get<info_key("max_inflight")>(), 16);
  EXPECT_TRUE(info.get<info_key("pipeline")>());
  EXPECT_EQ(info.get<info_key("transfer_mode")>(), "auto");
  EXPECT_EQ(info.get<info_key("datacenter")>(), "default");
  static_assert(default_number(info_key("compaction_threshold")) == (64 << 10));
}

TEST(InfoTest, TypedParsing) {
  InfoMap info;
  info.set("verify", "yes");
  info.set("spot", "0");
  info.set("max_inflight", "42");
  info.set("compaction_threshold", "1G");
  info.set("transfer_mode", "copy");
  EXPECT_TRUE(info.get<info_key("verify")>());
  EXPECT_FALSE(info.get<info_key("spot")>());
  EXPECT_EQ(info.get<info_key("max_inflight")>(), 42);
  EXPECT_EQ(info.get<info_key("compaction_threshold")>(), 1ull << 30);
  EXPECT_EQ(info.get<info_key("transfer_mode")>(), "copy");
}

TEST(InfoTest, BadValuesAreArgErrorsNamingKeyAndRange) {
  InfoMap info;
  info.set("verify", "perhaps");
  info.set("max_inflight", "12x");
  info.set("heartbeat_ms", "5");  // below the table's 10
  info.set("chunk_size", "5Q");
  info.set("transfer_mode", "fast");
  std::string what;
  EXPECT_EQ(code_of([&] { (void)info.get<info_key("verify")>(); }), Code::kArg);
  EXPECT_EQ(code_of([&] { (void)info.get<info_key("max_inflight")>(); }), Code::kArg);
  EXPECT_EQ(code_of([&] { (void)info.get<info_key("heartbeat_ms")>(); }, &what), Code::kArg);
  EXPECT_NE(what.find("'heartbeat_ms'"), std::string::npos) << what;
  EXPECT_NE(what.find("[10, 3600000]"), std::string::npos) << what;
  EXPECT_EQ(code_of([&] { (void)info.get<info_key("chunk_size")>(); }), Code::kArg);
  EXPECT_EQ(code_of([&] { (void)info.get<info_key("transfer_mode")>(); }, &what), Code::kArg);
  EXPECT_NE(what.find("auto|direct|copy|tcp"), std::string::npos) << what;
}

TEST(InfoTest, UnknownKeysNameTheNearestKnownOne) {
  InfoMap info;
  info.set("compaction_treshold", "0");
  std::string what;
  EXPECT_EQ(code_of([&] { check_info_keys(info, InfoScope::kContext, "THUB_Init"); }, &what), Code::kArg);
  EXPECT_NE(what.find("did you mean 'compaction_threshold'"), std::string::npos) << what;
}

TEST(InfoTest, EachCallReadsItsScope) {
  InfoMap registry_key, model_key, env_key;
  registry_key.set("max_connections", "10");
  model_key.set("retain", "1");
  env_key.set("topology_xml", "/x.xml");
  // THUB_Init reads the registry's keys (for its embedded registry); THUB_Open does not.
  EXPECT_EQ(code_of([&] { check_info_keys(registry_key, InfoScope::kContext, "THUB_Init"); }), Code::kSuccess);
  EXPECT_EQ(code_of([&] { check_info_keys(registry_key, InfoScope::kModel, "THUB_Open"); }), Code::kArg);
  EXPECT_EQ(code_of([&] { check_info_keys(model_key, InfoScope::kRegistry, "tensorhub-registry"); }), Code::kArg);
  std::string what;
  EXPECT_EQ(code_of([&] { check_info_keys(env_key, InfoScope::kContext, "THUB_Init"); }, &what), Code::kArg);
  EXPECT_NE(what.find("TENSORHUB_TOPOLOGY_XML"), std::string::npos) << what;
}

TEST(InfoTest, RegistryKeysAreDaemonFlags) {
  EXPECT_EQ(registry_flag(spec(info_key("max_connections_per_host"))), "--max-connections-per-host");
  EXPECT_STREQ(spec(info_key("registry_listen")).flag, "--listen");
}

}  // namespace
}  // namespace thub
