// Issue 19, item 3: one registry leads at a time. (a) A backup that can reach its live primary
// refuses clients and names the primary (NOT_LEADER), and sends its own clients there when the
// primary answers again. (b) Registries elected through a real etcd: one leads, the others
// name it; a leader that resigns, dies, is stopped past its lease or loses etcd stops serving,
// and a standby takes over; clients given etcd://... follow the leader. Every wait is for a
// state the server or the connection reports, within a stated bound.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "src/common/status.h"
#include "src/registry/connection.h"
#include "tests/registry/daemon.h"
#include "tests/registry/embedded.h"
#include "tests/registry/etcd_process.h"

namespace thub::registry::test {
namespace {

ConnectionOptions quick(std::vector<std::string> addresses) {
  ConnectionOptions co;
  co.addresses = std::move(addresses);
  co.heartbeat_ms = 50;
  co.connect_timeout_ms = 1000;
  co.registry_timeout_ms = 1000;
  co.request_timeout_ms = 2000;
  co.reconnect_ms = 20000;
  co.probe_ms = 0;  // only the registry's own redirect moves a client here
  return co;
}

ConnectionOptions following(const std::string& etcd) {
  ConnectionOptions co = quick({});
  co.etcd = etcd;
  return co;
}

int64_t ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count();
}

// Why the connection was last lost, as it told its user.
struct LostWhy {
  std::mutex mu;
  std::vector<std::string> lost;
  void attach(Connection& c) {
    c.on_event([this](ConnectionEvent e, uint64_t, const std::string& why) {
      std::lock_guard<std::mutex> lk(mu);
      if (e == ConnectionEvent::kLost) lost.push_back(why);
    });
  }
  std::string first() {
    std::lock_guard<std::mutex> lk(mu);
    return lost.empty() ? "" : lost.front();
  }
};

std::string refusal(const ConnectionOptions& co) {
  try {
    Connection c(co);
    return "connected to " + c.address();
  } catch (const Error& e) {
    return std::string(e.code() == Code::kRegistry ? "kRegistry: " : "other: ") + e.what();
  }
}

void open_one(Connection& c) {
  EXPECT_EQ(c.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false}).status, sched::Status::kOk);
}

// ---- (a) a backup and its primary -------------------------------------------------------

TEST(BackupTest, ABackupWhosePrimaryAnswersRefusesClientsAndNamesThePrimary) {
  Embedded primary;
  Embedded backup([&](ServerOptions& o) {
    o.primary = primary.address();
    o.primary_probe_ms = 100;
  });
  EXPECT_FALSE(backup.stats().leading);
  // A client given only the backup is told who leads, and says so: it never runs on the backup.
  std::string r = refusal(quick({backup.address()}));
  EXPECT_EQ(r.rfind("kRegistry: ", 0), 0u) << r;
  EXPECT_NE(r.find("does not lead"), std::string::npos) << r;
  EXPECT_NE(r.find("the leader is " + primary.address()), std::string::npos) << r;
  // A client whose list puts the backup first ends at the primary.
  Connection c(quick({backup.address(), primary.address()}));
  EXPECT_EQ(c.address(), primary.address());
  open_one(c);
}

TEST(BackupTest, ABackupServesWhileItsPrimaryIsDownAndSendsItsClientsBackWhenItAnswers) {
  auto primary = std::make_unique<Embedded>();
  const std::string pa = primary->address();
  Embedded backup([&](ServerOptions& o) {
    o.primary = pa;
    o.primary_probe_ms = 100;
  });
  primary.reset();
  ASSERT_TRUE(backup.wait_for([](const ServerStats& s) { return s.leading; }, 5000))
      << "the backup never started serving with its primary down";
  Connection c(quick({pa, backup.address()}));
  ASSERT_EQ(c.address(), backup.address());
  open_one(c);
  LostWhy ev;
  ev.attach(c);
  // The primary is back: the backup sees it within a probe, tells its client and closes it;
  // the client (which does not probe) goes to the primary.
  auto t0 = std::chrono::steady_clock::now();
  primary = std::make_unique<Embedded>([&](ServerOptions& o) { o.listen = pa; });
  ASSERT_TRUE(eventually([&] { return c.generation() >= 1 && c.connected(); }, 10000))
      << "the client stayed at the backup";
  const int64_t moved_ms = ms_since(t0);
  EXPECT_EQ(c.address(), pa);
  EXPECT_NE(ev.first().find("does not lead"), std::string::npos) << ev.first();
  EXPECT_LT(moved_ms, 3000) << "a probe every 100 ms";
  open_one(c);
  EXPECT_TRUE(backup.wait_for([](const ServerStats& s) { return !s.leading && s.leadership_changes == 2; }, 2000));
  std::cout << "[ backup ] its client was at the primary " << moved_ms << " ms after the primary came back\n";
}

// ---- (b) an election in etcd ------------------------------------------------------------

class ElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!etcd_available()) GTEST_SKIP() << "etcd is not installed (" << etcd_binary() << "; Debian: etcd-server)";
    etcd = std::make_unique<EtcdProcess>();
    ASSERT_NE(etcd->proc, nullptr);
    prefix = "/thub/" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  std::function<void(ServerOptions&)> candidate() {
    return [this](ServerOptions& o) {
      o.election = etcd->url_for(prefix);
      o.election_ttl_s = 2;
    };
  }
  std::vector<std::string> candidate_flags() {
    return {"--election", etcd->url_for(prefix), "--election-ttl-s", "2"};
  }
  std::unique_ptr<EtcdProcess> etcd;
  std::string prefix;
};

TEST_F(ElectionTest, OneOfTwoCandidatesLeadsAndTheOtherNamesIt) {
  Embedded first(candidate());
  Embedded second(candidate());
  EXPECT_TRUE(first.stats().leading) << "the first candidate found no leader and campaigned";
  EXPECT_FALSE(second.stats().leading);
  ::poll(nullptr, 0, 3000);  // longer than a lease: renewed, not lost
  EXPECT_TRUE(first.stats().leading);
  EXPECT_FALSE(second.stats().leading);
  EXPECT_EQ(first.stats().leadership_changes, 0u);
  Connection c(following(etcd->url_for(prefix)));
  EXPECT_EQ(c.address(), first.address());
  open_one(c);
  std::string r = refusal(quick({second.address()}));
  EXPECT_NE(r.find("the leader is " + first.address()), std::string::npos) << r;
}

TEST_F(ElectionTest, TheStandbyLeadsWhenTheLeaderResignsAndClientsFollow) {
  auto first = std::make_unique<Embedded>(candidate());
  Embedded second(candidate());
  ASSERT_TRUE(first->stats().leading);
  Connection c(following(etcd->url_for(prefix)));
  ASSERT_EQ(c.address(), first->address());
  open_one(c);
  auto t0 = std::chrono::steady_clock::now();
  first.reset();  // stops and resigns (revokes its lease)
  ASSERT_TRUE(second.wait_for([](const ServerStats& s) { return s.leading; }, 5000));
  const int64_t took = ms_since(t0);
  EXPECT_LT(took, 2000) << "a resignation frees the key at once: the next campaign (a third of the TTL) wins";
  ASSERT_TRUE(eventually([&] { return c.generation() >= 1 && c.connected(); }, 10000));
  EXPECT_EQ(c.address(), second.address());
  open_one(c);
  std::cout << "[ election ] after a resignation the standby led in " << took << " ms\n";
}

TEST_F(ElectionTest, ALeaderThatLosesEtcdStopsServingWithinItsLease) {
  Embedded leader(candidate());
  ASSERT_TRUE(leader.stats().leading);
  Connection c(following(etcd->url_for(prefix)));
  open_one(c);
  LostWhy ev;
  ev.attach(c);
  auto t0 = std::chrono::steady_clock::now();
  etcd->kill_now();  // it cannot renew: it must stop before its lease could have run out
  ASSERT_TRUE(leader.wait_for([](const ServerStats& s) { return !s.leading; }, 5000));
  const int64_t stopped = ms_since(t0);
  EXPECT_LE(stopped, 2000) << "the lease is 2 s, renewed every 667 ms";
  ASSERT_TRUE(eventually([&] { return !ev.first().empty(); }, 5000));
  EXPECT_NE(ev.first().find("does not lead"), std::string::npos) << ev.first();
  // Without etcd nobody leads, and the client says so (it does not fall back to an old address).
  try {
    (void)c.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false}, 500);
    FAIL() << "a call succeeded with no registry leading";
  } catch (const Error& e) {
    EXPECT_TRUE(e.code() == Code::kRegistry || e.code() == Code::kTimeout) << e.what();
  }
  // etcd back: the registry leads again (its old lease expired or is renewed) and the client finds it.
  ASSERT_TRUE(etcd->start());
  ASSERT_TRUE(leader.wait_for([](const ServerStats& s) { return s.leading; }, 15000));
  ASSERT_TRUE(eventually([&] { return c.connected() && c.generation() >= 1; }, 20000));
  open_one(c);
  std::cout << "[ election ] without etcd the leader stopped serving after " << stopped << " ms\n";
}

// A real daemon stopped (SIGSTOP) for three leases: the standby takes over; when the old one
// resumes it serves nothing (it checks its lease before it reads a frame) and names the new one.
TEST_F(ElectionTest, AStoppedLeaderServesNothingWhenItResumes) {
  Daemon a(candidate_flags());
  ASSERT_FALSE(a.address.empty()) << a.startup;
  Daemon b(candidate_flags());
  ASSERT_FALSE(b.address.empty()) << b.startup;
  Connection c(following(etcd->url_for(prefix)));
  ASSERT_EQ(c.address(), a.address);
  open_one(c);
  auto t0 = std::chrono::steady_clock::now();
  a.proc->signal(SIGSTOP);
  ASSERT_TRUE(eventually([&] { return c.connected() && c.address() == b.address; }, 20000))
      << "the client never reached the standby";
  const int64_t took = ms_since(t0);
  open_one(c);
  ::poll(nullptr, 0, std::max<int64_t>(0, 6000 - ms_since(t0)));
  a.proc->signal(SIGCONT);
  std::string r;
  ASSERT_TRUE(eventually([&] {
    r = refusal(quick({a.address}));
    // At once it does not lead; within a round of its election it names the one that does.
    return r.find("does not lead") != std::string::npos && r.find("the leader is " + b.address) != std::string::npos;
  }, 5000)) << r;
  EXPECT_EQ(c.address(), b.address);
  EXPECT_EQ(c.generation(), 1u) << "the client went back to the stopped leader";
  std::cout << "[ election ] a stopped leader: its client was at the standby after " << took << " ms\n";
}

}  // namespace
}  // namespace thub::registry::test
