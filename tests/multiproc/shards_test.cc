// Sharding consistency: all shards of a replica get the same version from the same source
// replica, even when a newer version is published between their requests.
#include <gtest/gtest.h>

#include "tests/multiproc/cluster.h"

namespace thub::test {
namespace {

TEST(ShardsTest, SecondShardGetsTheFirstShardsVersion) {
  std::map<std::string, std::string> env = {{"TENSORHUB_VERIFY", "1"}};
  PeerProcess a0(env);
  std::string r = a0.cmd("init");
  ASSERT_TRUE(ok(r));
  env["TENSORHUB_REGISTRY"] = word(r, 1);
  PeerProcess a1(env), b0(env), b1(env), x0(env), x1(env);
  for (PeerProcess* p : {&a1, &b0, &b1, &x0, &x1}) ASSERT_TRUE(ok(p->cmd("init")));
  const std::string l0 = "1048576,4096", l1 = "2097152,0,12";
  // Trainer replica A (2 shards) publishes version 1.
  ASSERT_TRUE(ok(a0.cmd("open policy A 0 2")));
  ASSERT_TRUE(ok(a1.cmd("open policy A 1 2")));
  ASSERT_TRUE(ok(a0.cmd("tensors " + l0)));
  ASSERT_TRUE(ok(a1.cmd("tensors " + l1)));
  ASSERT_TRUE(ok(a0.cmd("fill 10")));
  ASSERT_TRUE(ok(a1.cmd("fill 11")));
  ASSERT_TRUE(ok(a0.cmd("publish 1")));
  ASSERT_TRUE(ok(a1.cmd("publish 1")));
  // Rollout replica X: shard 0 asks first and resolves "latest" to 1.
  ASSERT_TRUE(ok(x0.cmd("open policy X 0 2")));
  ASSERT_TRUE(ok(x1.cmd("open policy X 1 2")));
  ASSERT_TRUE(ok(x0.cmd("tensors " + l0)));
  ASSERT_TRUE(ok(x1.cmd("tensors " + l1)));
  r = x0.cmd("replicate latest");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(word(r, 2), "1");
  // Meanwhile trainer replica B publishes version 2 on both shards.
  ASSERT_TRUE(ok(b0.cmd("open policy B 0 2")));
  ASSERT_TRUE(ok(b1.cmd("open policy B 1 2")));
  ASSERT_TRUE(ok(b0.cmd("tensors " + l0)));
  ASSERT_TRUE(ok(b1.cmd("tensors " + l1)));
  ASSERT_TRUE(ok(b0.cmd("fill 20")));
  ASSERT_TRUE(ok(b1.cmd("fill 21")));
  ASSERT_TRUE(ok(b0.cmd("publish 2")));
  ASSERT_TRUE(ok(b1.cmd("publish 2")));
  // Shard 1 of X asks "latest" too, and gets version 1 like its shard 0: one transaction.
  r = x1.cmd("replicate latest");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(word(r, 2), "1");
  EXPECT_TRUE(ok(x0.cmd("check 10")));
  EXPECT_TRUE(ok(x1.cmd("check 11")));
  // The next transaction of X sees version 2 on both shards.
  r = x0.cmd("update latest");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(word(r, 2), "2");
  r = x1.cmd("update latest");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(word(r, 2), "2");
  EXPECT_TRUE(ok(x0.cmd("check 20")));
  EXPECT_TRUE(ok(x1.cmd("check 21")));
}

}  // namespace
}  // namespace thub::test
