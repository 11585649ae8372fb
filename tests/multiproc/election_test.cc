// Issue 19, item 3b, end to end: two tensorhub-registry daemons elected through a real etcd,
// trainers and readers (real processes, real UCX) given TENSORHUB_REGISTRY=etcd://... follow
// the leader. What a paused reader and a paused trainer see when they resume, what happens
// when the leader dies, and that a leader stopped past its lease never serves its old view
// (stale weights) when it resumes. Skips where etcd is not installed.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>

#include <chrono>
#include <iostream>

#include "tests/multiproc/cluster.h"
#include "tests/registry/etcd_process.h"

namespace thub::test {
namespace {

struct Candidate {
  std::unique_ptr<PeerProcess> proc;
  std::string address;
  Candidate(const std::string& etcd, const std::string& prefix) {
    std::vector<std::string> args{"--listen",         "127.0.0.1:0", "--election",           etcd + prefix,
                                  "--election-ttl-s", "2",           "--heartbeat-timeout-ms", "1500",
                                  "--takeover-grace-ms", "5000"};
    proc = std::make_unique<PeerProcess>(THUB_REGISTRY_PATH, args);
    std::string line = proc->reply(30);
    EXPECT_EQ(word(line, 0), "listening") << line;
    address = word(line, 1);
  }
};

class ElectionFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!registry::test::etcd_available()) {
      GTEST_SKIP() << "etcd is not installed (" << registry::test::etcd_binary() << "; Debian: etcd-server)";
    }
    etcd = std::make_unique<registry::test::EtcdProcess>();
    const std::string prefix = std::string("/thub/") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    url = etcd->url_for(prefix);
    const std::string base = etcd->url_for("");
    first = std::make_unique<Candidate>(base, prefix);
    second = std::make_unique<Candidate>(base, prefix);
  }
  std::map<std::string, std::string> env() const {
    return {{"TENSORHUB_REGISTRY", url}, {"TENSORHUB_HEARTBEAT_MS", "100"}, {"TENSORHUB_REGISTRY_TIMEOUT_MS", "1000"},
            {"TENSORHUB_REGISTRY_CONNECT_TIMEOUT_MS", "1000"}};
  }
  std::unique_ptr<registry::test::EtcdProcess> etcd;
  std::string url;
  std::unique_ptr<Candidate> first, second;  // the first leads: it campaigned first
};

void open_policy(PeerProcess& p, const std::string& replica) {
  ASSERT_TRUE(ok(p.cmd("init")));
  ASSERT_TRUE(ok(p.cmd("open policy " + replica + " 0 1")));
  ASSERT_TRUE(ok(p.cmd(std::string("tensors ") + kLayout)));
}

void publish(PeerProcess& trainer, int version, bool unpublish_first = true) {
  if (unpublish_first) {
    ASSERT_TRUE(ok(trainer.cmd("unpublish")));
  }
  ASSERT_TRUE(ok(trainer.cmd("fill " + std::to_string(60 + version))));
  ASSERT_TRUE(ok(trainer.cmd("publish " + std::to_string(version))));
}

TEST_F(ElectionFailoverTest, TheLeaderDiesAndReplicationContinuesAtTheNext) {
  PeerProcess trainer(env()), reader(env()), late(env());
  ASSERT_NO_FATAL_FAILURE(open_policy(trainer, "trainer"));
  ASSERT_NO_FATAL_FAILURE(open_policy(reader, "reader"));
  ASSERT_NO_FATAL_FAILURE(open_policy(late, "late"));
  ASSERT_NO_FATAL_FAILURE(publish(trainer, 1, false));
  ASSERT_TRUE(ok(reader.cmd("replicate latest")));
  auto t0 = std::chrono::steady_clock::now();
  first->proc->kill_now();  // no resignation: the standby waits out the lease (2 s)
  ASSERT_TRUE(wait_for_stat(trainer, "republished", [](int64_t n) { return n >= 1; }, 30));
  const int64_t took = ms_since(t0);
  std::string r = late.cmd("replicate latest");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(word(r, 2), "1");
  EXPECT_TRUE(ok(late.cmd("check 61")));
  ASSERT_NO_FATAL_FAILURE(publish(trainer, 2));
  std::string seen;
  ASSERT_TRUE(until_version(reader, "update latest", "2", &seen)) << seen;
  EXPECT_TRUE(ok(reader.cmd("check 62")));
  std::cout << "[ election ] the trainer had re-published at the new leader " << took
            << " ms after the leader was killed\n";
}

TEST_F(ElectionFailoverTest, APausedReaderSeesNewVersionsWhenItResumes) {
  PeerProcess trainer(env()), reader(env());
  ASSERT_NO_FATAL_FAILURE(open_policy(trainer, "trainer"));
  ASSERT_NO_FATAL_FAILURE(open_policy(reader, "reader"));
  ASSERT_NO_FATAL_FAILURE(publish(trainer, 1, false));
  ASSERT_TRUE(ok(reader.cmd("replicate latest")));
  reader.signal(SIGSTOP);
  ::poll(nullptr, 0, 3500);  // the leader drops it (1.5 s without a heartbeat)
  ASSERT_NO_FATAL_FAILURE(publish(trainer, 2));
  reader.signal(SIGCONT);
  std::string seen;
  ASSERT_TRUE(until_version(reader, "update latest", "2", &seen)) << "the resumed reader answered " << seen;
  EXPECT_TRUE(ok(reader.cmd("check 62")));
  std::cout << "[ election, paused reader ] before version 2: " << (seen.empty() ? "nothing" : seen) << "\n";
}

TEST_F(ElectionFailoverTest, APausedTrainerIsFoundByNewReadersWhenItResumes) {
  PeerProcess trainer(env());
  ASSERT_NO_FATAL_FAILURE(open_policy(trainer, "trainer"));
  ASSERT_NO_FATAL_FAILURE(publish(trainer, 1, false));
  trainer.signal(SIGSTOP);
  ::poll(nullptr, 0, 3500);
  trainer.signal(SIGCONT);
  // Dropped by the leader, it comes back to the same leader (the only one) and publishes again.
  ASSERT_TRUE(wait_for_stat(trainer, "republished", [](int64_t n) { return n >= 1; }, 30));
  PeerProcess reader(env());
  ASSERT_NO_FATAL_FAILURE(open_policy(reader, "reader"));
  std::string r = reader.cmd("replicate latest");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(word(r, 2), "1");
  EXPECT_TRUE(ok(reader.cmd("check 61")));
  std::string n = trainer.cmd("stat republished");
  std::cout << "[ election, paused trainer ] republished: " << word(n, 1) << "; a new reader got " << word(r, 2)
            << "\n";
}

// The leader is stopped (SIGSTOP) past its lease while the trainer goes on publishing: the
// clients move to the standby, which now leads. When the old leader resumes, it has stopped
// leading by its own clock before reading anything: nobody is served its view of version 1.
TEST_F(ElectionFailoverTest, AStoppedLeaderNeverServesItsOldViewWhenItResumes) {
  PeerProcess trainer(env()), reader(env());
  ASSERT_NO_FATAL_FAILURE(open_policy(trainer, "trainer"));
  ASSERT_NO_FATAL_FAILURE(open_policy(reader, "reader"));
  ASSERT_NO_FATAL_FAILURE(publish(trainer, 1, false));
  ASSERT_TRUE(ok(reader.cmd("replicate latest")));
  first->proc->signal(SIGSTOP);
  ASSERT_TRUE(wait_for_stat(trainer, "republished", [](int64_t n) { return n >= 1; }, 30));
  ASSERT_NO_FATAL_FAILURE(publish(trainer, 2));
  std::string seen;
  ASSERT_TRUE(until_version(reader, "update latest", "2", &seen)) << seen;
  first->proc->signal(SIGCONT);
  // A new reader asks after the old leader is back: it is served by the leader, version 2.
  PeerProcess late(env());
  ASSERT_NO_FATAL_FAILURE(open_policy(late, "late"));
  std::string r = late.cmd("replicate latest");
  ASSERT_TRUE(ok(r)) << r;
  EXPECT_EQ(word(r, 2), "2");
  EXPECT_TRUE(ok(late.cmd("check 62")));
  ASSERT_NO_FATAL_FAILURE(publish(trainer, 3));
  seen.clear();
  ASSERT_TRUE(until_version(reader, "update latest", "3", &seen)) << seen;
  EXPECT_TRUE(ok(reader.cmd("check 63")));
  std::cout << "[ election, stopped leader ] the reader before version 3: " << (seen.empty() ? "nothing" : seen)
            << "\n";
}

}  // namespace
}  // namespace thub::test
