// Stateless registry failover: the registry process dies, clients move to the backup
// address, re-publish what they hold, and replication goes on.
#include <gtest/gtest.h>
#include <signal.h>

#include "tests/multiproc/cluster.h"

namespace thub::test {
namespace {

struct Registry {
  std::unique_ptr<PeerProcess> proc;
  std::string address;
  Registry() {
    proc = std::make_unique<PeerProcess>(THUB_REGISTRY_PATH, std::vector<std::string>{"--listen", "127.0.0.1:0"});
    std::string line = proc->reply(30);
    EXPECT_EQ(word(line, 0), "listening") << line;
    address = word(line, 1);
  }
};

TEST(FailoverTest, BackupRegistryTakesOverAndReplicationContinues) {
  Registry primary, backup;
  ASSERT_FALSE(primary.address.empty());
  ASSERT_FALSE(backup.address.empty());
  std::string list = primary.address + "," + backup.address;
  std::map<std::string, std::string> env = {{"TENSORHUB_REGISTRY", list}, {"TENSORHUB_HEARTBEAT_MS", "100"}};
  PeerProcess trainer(env), first(env), second(env);
  for (PeerProcess* p : {&trainer, &first, &second}) ASSERT_TRUE(ok(p->cmd("init")));
  ASSERT_TRUE(ok(trainer.cmd("open policy trainer 0 1")));
  ASSERT_TRUE(ok(first.cmd("open policy first 0 1")));
  ASSERT_TRUE(ok(second.cmd("open policy second 0 1")));
  for (PeerProcess* p : {&trainer, &first, &second}) ASSERT_TRUE(ok(p->cmd(std::string("tensors ") + kLayout)));
  ASSERT_TRUE(ok(trainer.cmd("fill 61")));
  ASSERT_TRUE(ok(trainer.cmd("publish 1")));
  ASSERT_TRUE(ok(first.cmd("replicate latest")));

  primary.proc->kill_now();  // the registry crashes; nothing of its state survives
  // Both holders reconnect to the backup and publish again what they hold.
  ASSERT_TRUE(wait_for_stat(trainer, "republished", [](int64_t n) { return n >= 1; }));
  ASSERT_TRUE(wait_for_stat(first, "republished", [](int64_t n) { return n >= 1; }));
  std::string r = second.cmd("replicate latest");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(word(r, 2), "1");
  EXPECT_TRUE(ok(second.cmd("check 61")));

  // The trainer goes on publishing through the backup.
  ASSERT_TRUE(ok(trainer.cmd("unpublish")));
  ASSERT_TRUE(ok(trainer.cmd("fill 62")));
  ASSERT_TRUE(ok(trainer.cmd("publish 2")));
  r = first.cmd("update latest");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(word(r, 2), "2");
  EXPECT_TRUE(ok(first.cmd("check 62")));
}

TEST(FailoverTest, NoRegistryLeftIsRegistryError) {
  Registry only;
  std::map<std::string, std::string> env = {{"TENSORHUB_REGISTRY", only.address}, {"TENSORHUB_RECONNECT_MS", "500"}};
  PeerProcess p(env);
  ASSERT_TRUE(ok(p.cmd("init")));
  ASSERT_TRUE(ok(p.cmd("open policy lonely 0 1")));
  ASSERT_TRUE(ok(p.cmd(std::string("tensors ") + kLayout)));
  only.proc->kill_now();
  // Reconnection gives up after the reconnect window; the call then says why.
  std::string r = p.cmd("replicate latest");
  EXPECT_EQ(status_of(r), -6) << r;
}

}  // namespace
}  // namespace thub::test
