// The registry's settings come from its info keys (the embedded registry's THUB_Init keys,
// tensorhub-registry's flags): unset keys give exactly the defaults ServerOptions and
// sched::Config are built with elsewhere (tests, benchmarks), so the table and those
// structs cannot drift apart; set keys reach the fields they name.
#include <gtest/gtest.h>

#include "sched/types.h"
#include "src/common/info.h"
#include "src/common/status.h"
#include "src/registry/server.h"

namespace thub::registry {
namespace {

TEST(ServerOptionsTest, UnsetKeysGiveTheStructsDefaults) {
  const ServerOptions built;
  const ServerOptions read = ServerOptions::from_info(InfoMap());
  EXPECT_EQ(read.listen, built.listen);
  EXPECT_EQ(read.auth_token, built.auth_token);
  EXPECT_EQ(read.sched.heartbeat_timeout, sched::Config().heartbeat_timeout);
  EXPECT_EQ(read.sched.max_readers_per_source, sched::Config().max_readers_per_source);
  EXPECT_EQ(read.sched.pipeline, sched::Config().pipeline);
  EXPECT_EQ(read.sched.round_hold, sched::Config().round_hold);
  EXPECT_EQ(read.max_connections, built.max_connections);
  EXPECT_EQ(read.max_connections_per_host, built.max_connections_per_host);
  EXPECT_EQ(read.hello_timeout_ms, built.hello_timeout_ms);
  EXPECT_EQ(read.frame_timeout_ms, built.frame_timeout_ms);
  EXPECT_EQ(read.output_pause_bytes, built.output_pause_bytes);
  EXPECT_EQ(read.max_output_bytes, built.max_output_bytes);
}

TEST(ServerOptionsTest, KeysReachTheirFields) {
  InfoMap info;
  info.set("registry_listen", "127.0.0.1:0");
  info.set("heartbeat_timeout_ms", "2000");
  info.set("pipeline", "false");
  info.set("max_readers", "3");
  info.set("round_hold_ms", "250");
  info.set("max_connections", "7");
  info.set("output_pause_bytes", "1M");
  const ServerOptions o = ServerOptions::from_info(info);
  EXPECT_EQ(o.listen, "127.0.0.1:0");
  EXPECT_EQ(o.sched.heartbeat_timeout, 2'000'000);
  EXPECT_FALSE(o.sched.pipeline);
  EXPECT_EQ(o.sched.max_readers_per_source, 3);
  EXPECT_EQ(o.sched.round_hold, 250'000);
  EXPECT_EQ(o.max_connections, 7);
  EXPECT_EQ(o.output_pause_bytes, 1u << 20);
}

TEST(ServerOptionsTest, BadValuesAreArgErrors) {
  InfoMap info;
  info.set("max_readers", "0");
  EXPECT_THROW((void)ServerOptions::from_info(info), Error);
  InfoMap listen;
  listen.set("registry_listen", "nowhere");
  EXPECT_THROW((void)ServerOptions::from_info(listen), Error);
}

}  // namespace
}  // namespace thub::registry
