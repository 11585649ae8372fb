// Issue 10, item 7: a registry that is alive as a socket but silent (SIGSTOP: the kernel
// still accepts connections and buffers requests) is as good as dead to its clients. The
// HELLO exchange has a deadline (registry_connect_timeout_ms), a connected client declares
// its registry lost when no frame came for registry_timeout_ms (the registry answers
// heartbeats) and fails over exactly as for a closed connection, and requests the registry
// answers at once have a default deadline. Before, THUB_Init and every call blocked for as
// long as the registry was stopped. The hang detector is each command's own guard.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>

#include "tests/multiproc/cluster.h"

namespace thub::test {
namespace {

constexpr int kErrRegistry = -6, kErrTimeout = -7;
constexpr int kGuardS = 60;  // a hang, not a speed limit

struct Daemon {
  std::unique_ptr<PeerProcess> proc;
  std::string address;
  bool stopped = false;
  Daemon() {
    proc = std::make_unique<PeerProcess>(THUB_REGISTRY_PATH, std::vector<std::string>{"--listen", "127.0.0.1:0"});
    std::string line = proc->reply(30);
    EXPECT_EQ(word(line, 0), "listening") << line;
    address = word(line, 1);
  }
  void stop() {
    proc->signal(SIGSTOP);
    stopped = true;
  }
  ~Daemon() {
    if (stopped) proc->kill_now();  // a stopped process would not answer the polite quit
    else proc->signal(SIGTERM);
  }
};

// Polls a peer's counter until `pred` holds, a few ms apart (the peer's own threads need the
// CPU to get there); gives up after about `guard_s` so that a broken build fails.
template <typename Pred>
bool poll_stat(PeerProcess& p, const std::string& key, Pred pred, int guard_s = kGuardS) {
  for (int i = 0; i < guard_s * 100; ++i) {
    std::string r = p.cmd("stat " + key);
    if (ok(r) && pred(std::stoll(word(r, 1)))) return true;
    ::poll(nullptr, 0, 10);
  }
  return false;
}

// Short deadlines, so that each case takes seconds: every one is an info key.
std::map<std::string, std::string> fast_env(const std::string& registry) {
  return {{"TENSORHUB_REGISTRY", registry},
          {"TENSORHUB_HEARTBEAT_MS", "100"},
          {"TENSORHUB_REGISTRY_TIMEOUT_MS", "1000"},
          {"TENSORHUB_REGISTRY_CONNECT_TIMEOUT_MS", "1000"},
          {"TENSORHUB_REGISTRY_REQUEST_TIMEOUT_MS", "3000"},
          {"TENSORHUB_RECONNECT_MS", "2000"}};
}

TEST(SilentRegistryTest, InitAndOpenSkipAStoppedRegistry) {
  Daemon stopped, good;
  ASSERT_FALSE(stopped.address.empty());
  ASSERT_FALSE(good.address.empty());
  stopped.stop();
  PeerProcess p(fast_env(stopped.address + "," + good.address));
  std::string r = p.cmd("init", kGuardS);
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(word(r, 1), good.address);  // THUB_Registry_address: the one it talks to
  r = p.cmd("open policy skipper 0 1", kGuardS);
  ASSERT_TRUE(ok(r)) << r;
  ASSERT_TRUE(ok(p.cmd(std::string("tensors ") + kLayout)));
  ASSERT_TRUE(ok(p.cmd("fill 3")));
  r = p.cmd("publish 1", kGuardS);
  EXPECT_TRUE(ok(r)) << r;
}

TEST(SilentRegistryTest, ConnectedClientsFailOverWhenTheirRegistryStops) {
  Daemon primary, backup;
  ASSERT_FALSE(primary.address.empty());
  ASSERT_FALSE(backup.address.empty());
  auto env = fast_env(primary.address + "," + backup.address);
  PeerProcess trainer(env), rollout(env);
  for (PeerProcess* p : {&trainer, &rollout}) {
    std::string r = p->cmd("init", kGuardS);
    ASSERT_TRUE(ok(r)) << r;
    ASSERT_EQ(word(r, 1), primary.address);
  }
  ASSERT_TRUE(ok(trainer.cmd("open policy trainer 0 1")));
  ASSERT_TRUE(ok(rollout.cmd("open policy rollout 0 1")));
  for (PeerProcess* p : {&trainer, &rollout}) ASSERT_TRUE(ok(p->cmd(std::string("tensors ") + kLayout)));
  ASSERT_TRUE(ok(trainer.cmd("fill 71")));
  ASSERT_TRUE(ok(trainer.cmd("publish 1")));

  primary.stop();  // silent, but its sockets stay open
  // The trainer notices the silence, moves to the backup and publishes there again.
  ASSERT_TRUE(poll_stat(trainer, "republished", [](int64_t n) { return n >= 1; }))
      << "the trainer never left the stopped registry";
  std::string r = rollout.cmd("replicate latest", kGuardS);
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(word(r, 2), "1");
  EXPECT_TRUE(ok(rollout.cmd("check 71")));
  // And goes on publishing through the backup.
  ASSERT_TRUE(ok(trainer.cmd("unpublish", kGuardS)));
  ASSERT_TRUE(ok(trainer.cmd("fill 72")));
  r = trainer.cmd("publish 2", kGuardS);
  ASSERT_TRUE(ok(r)) << r;
  r = rollout.cmd("update latest", kGuardS);
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(word(r, 2), "2");
  EXPECT_TRUE(ok(rollout.cmd("check 72")));
}

TEST(SilentRegistryTest, CallsToTheOnlyRegistryStoppedFailInsteadOfHanging) {
  Daemon only;
  ASSERT_FALSE(only.address.empty());
  PeerProcess trainer(fast_env(only.address)), rollout(fast_env(only.address));
  for (PeerProcess* p : {&trainer, &rollout}) ASSERT_TRUE(ok(p->cmd("init", kGuardS)));
  ASSERT_TRUE(ok(trainer.cmd("open policy trainer 0 1")));
  ASSERT_TRUE(ok(rollout.cmd("open policy rollout 0 1")));
  for (PeerProcess* p : {&trainer, &rollout}) ASSERT_TRUE(ok(p->cmd(std::string("tensors ") + kLayout)));
  ASSERT_TRUE(ok(trainer.cmd("fill 5")));
  only.stop();
  // A request the registry answers at once, and one it may defer: both end with an error.
  std::string r = trainer.cmd("publish 1", kGuardS);
  EXPECT_TRUE(status_of(r) == kErrRegistry || status_of(r) == kErrTimeout) << r;
  r = rollout.cmd("replicate latest", kGuardS);
  EXPECT_TRUE(status_of(r) == kErrRegistry || status_of(r) == kErrTimeout) << r;
  // A new process cannot start against it either, and says so.
  PeerProcess late(fast_env(only.address));
  r = late.cmd("init", kGuardS);
  EXPECT_EQ(status_of(r), kErrRegistry) << r;
}

}  // namespace
}  // namespace thub::test
