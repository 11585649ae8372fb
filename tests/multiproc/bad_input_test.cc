// Misuse across processes returns the documented THUB_ERR_* codes and loses nothing.
#include <gtest/gtest.h>

#include "tests/multiproc/cluster.h"

namespace thub::test {
namespace {

constexpr int kErrState = -2, kErrNotFound = -3, kErrLayout = -4, kErrTransport = -5;

TEST(BadInputTest, ReplicateBeforeAnyPublishIsNotFound) {
  Cluster c;
  c.trainer = std::make_unique<PeerProcess>(c.env);
  std::string r = c.trainer->cmd("init");
  ASSERT_TRUE(ok(r));
  c.registry = word(r, 1);
  PeerProcess& p = c.add_rollout("early", kLayout);
  EXPECT_EQ(status_of(p.cmd("replicate latest")), kErrNotFound);
  EXPECT_EQ(status_of(p.cmd("replicate 3")), kErrNotFound);
}

TEST(BadInputTest, UnknownModelAndNeverPublishedVersionAreNotFound) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 1, 4));
  auto e = c.env;
  e["TENSORHUB_REGISTRY"] = c.registry;
  PeerProcess p(e);
  ASSERT_TRUE(ok(p.cmd("init")));
  ASSERT_TRUE(ok(p.cmd("open no-such-model r 0 1")));
  ASSERT_TRUE(ok(p.cmd("tensors " + std::string(kLayout))));
  EXPECT_EQ(status_of(p.cmd("replicate latest")), kErrNotFound);
  PeerProcess& q = c.add_rollout("q", kLayout);
  EXPECT_EQ(status_of(q.cmd("replicate 5")), kErrNotFound);
  // The registry and the good version are unharmed.
  std::string r = q.cmd("replicate 4");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_TRUE(ok(q.cmd("check 1")));
}

TEST(BadInputTest, WrongLayoutIsLayoutError) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 1, 1));
  PeerProcess& fewer = c.add_rollout("fewer", "4194304,0,100");
  EXPECT_EQ(status_of(fewer.cmd("replicate latest")), kErrLayout);
  PeerProcess& sizes = c.add_rollout("sizes", "4194304,0,100,1,9000000,65536,3000002");
  EXPECT_EQ(status_of(sizes.cmd("replicate latest")), kErrLayout);
  PeerProcess& good = c.add_rollout("good", kLayout);
  std::string r = good.cmd("replicate latest");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_TRUE(ok(good.cmd("check 1")));
}

TEST(BadInputTest, OrderOfOperationsIsEnforced) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 1, 1));
  EXPECT_EQ(status_of(c.trainer->cmd("register late 64")), kErrState);  // register after publish
  EXPECT_EQ(status_of(c.trainer->cmd("publish 2")), kErrState);         // publish twice
  EXPECT_EQ(status_of(c.trainer->cmd("replicate latest")), kErrState);  // replicate while published
  ASSERT_TRUE(ok(c.trainer->cmd("unpublish")));
  EXPECT_EQ(status_of(c.trainer->cmd("unpublish")), kErrState);         // nothing published
  EXPECT_EQ(status_of(c.trainer->cmd("publish -5")), -1);               // negative version
  // Opening the same shard of the same replica twice is refused.
  auto e = c.env;
  e["TENSORHUB_REGISTRY"] = c.registry;
  PeerProcess dup(e);
  ASSERT_TRUE(ok(dup.cmd("init")));
  EXPECT_EQ(status_of(dup.cmd("open policy trainer 0 1")), kErrState);
  EXPECT_EQ(status_of(dup.cmd("open policy other 3 2")), -1);           // shard out of range
}

TEST(BadInputTest, ChecksumMismatchIsAnErrorNotSilentlyAccepted) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kLayout, 1, 1));
  // The trainer's checksums are taken behind its publish: a replicate that completes has read
  // its counter full, which it shows only after the last block's checksum is written. Wait for
  // that with a witness, then let the witness go so the trainer is the only source left.
  {
    PeerProcess& witness = c.add_rollout("witness", kLayout);
    ASSERT_TRUE(ok(witness.cmd("replicate latest")));
    ASSERT_TRUE(ok(witness.cmd("close")));
  }
  // Break the mutability contract on purpose: change the bytes after publishing.
  ASSERT_TRUE(ok(c.trainer->cmd("scribble 2")));
  PeerProcess& r = c.add_rollout("victim", kLayout);
  std::string rep = r.cmd("replicate latest");
  EXPECT_EQ(status_of(rep), kErrTransport) << rep;
  EXPECT_NE(rep.find("checksum mismatch"), std::string::npos) << rep;
}

}  // namespace
}  // namespace thub::test
