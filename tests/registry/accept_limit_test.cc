// Issue 10, item 8: connections are capped in all (max_connections) and per peer address
// (max_connections_per_host); a refused peer is told why (THUB_ERR_REGISTRY) and closed,
// and every refusal is logged to stderr, rate-limited, also when not verbose. accept()
// failing for lack of descriptors (EMFILE) pauses accepting instead of spinning: before,
// the listener stayed readable and the loop burnt a core (5 CPU-s per 5 s).
#include <gtest/gtest.h>

#include <poll.h>
#include <unistd.h>

#include "src/registry/protocol.h"
#include "tests/registry/daemon.h"
#include "tests/registry/embedded.h"
#include "tests/registry/raw_client.h"

namespace thub::registry::test {
namespace {

constexpr auto kStatusRegistry = static_cast<sched::Status>(-6);  // THUB_ERR_REGISTRY

// A connection the registry refused: its one reply says why, then it is closed.
void expect_refused(RawClient& c, const std::string& why) {
  auto r = c.read_reply();
  ASSERT_TRUE(r) << "not refused";
  EXPECT_EQ(r->status, kStatusRegistry);
  EXPECT_NE(r->detail.find(why), std::string::npos) << r->detail;
  EXPECT_TRUE(c.closed_by_peer());
}

TEST(AcceptLimitTest, ConnectionsPerHostAreCapped) {
  Embedded e([](ServerOptions& o) { o.max_connections_per_host = 4; });
  std::vector<std::unique_ptr<RawClient>> in;
  for (int i = 0; i < 4; ++i) {
    in.push_back(std::make_unique<RawClient>(e.address()));
    ASSERT_TRUE(in.back()->hello());
  }
  RawClient fifth(e.address());
  ASSERT_NO_FATAL_FAILURE(expect_refused(fifth, "max_connections_per_host 4"));
  // A closed connection gives its place back.
  in.pop_back();
  ASSERT_TRUE(e.wait_for([](const ServerStats& s) { return s.connections == 3; }));
  RawClient again(e.address());
  EXPECT_TRUE(again.hello());
}

TEST(AcceptLimitTest, ConnectionsInAllAreCapped) {
  Embedded e([](ServerOptions& o) { o.max_connections = 3; });
  RawClient a(e.address()), b(e.address()), c(e.address());
  ASSERT_TRUE(a.hello() && b.hello() && c.hello());
  RawClient d(e.address());
  ASSERT_NO_FATAL_FAILURE(expect_refused(d, "max_connections 3"));
  EXPECT_TRUE(e.wait_for([](const ServerStats& s) { return s.refusals >= 1; }));
}

// Refusals go to stderr without --verbose, at most about one line per second per kind:
// 50 refusals in a row give a line or two, and a later refusal of another kind has its own.
TEST(AcceptLimitTest, RefusalsAreLoggedRateLimitedWithoutVerbose) {
  Daemon d({"--max-connections-per-host", "2"});
  ASSERT_FALSE(d.address.empty());
  RawClient a(d.address), b(d.address);
  ASSERT_TRUE(a.hello() && b.hello());
  for (int i = 0; i < 50; ++i) {
    RawClient extra(d.address);
    ASSERT_NO_FATAL_FAILURE(expect_refused(extra, "max_connections_per_host 2"));
  }
  a.send_bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n");  // another kind of refusal, as a marker
  int refusal_lines = 0;
  for (;;) {
    std::string line = d.next_line();
    ASSERT_NE(line, "timeout") << "the marker refusal was not logged";
    if (line.find("malformed frame") != std::string::npos) break;
    if (line.find("refused a connection from 127.0.0.1") != std::string::npos) ++refusal_lines;
  }
  EXPECT_GE(refusal_lines, 1);
  EXPECT_LE(refusal_lines, 10);
}

long ticks_per_second() { return sysconf(_SC_CLK_TCK); }

// The daemon runs with 32 descriptors; 40 peers connect. It accepts what it can, then
// pauses accepting (logged) instead of spinning, and accepts again once descriptors are free.
TEST(AcceptLimitTest, DaemonOutOfDescriptorsPausesAcceptingInsteadOfSpinning) {
  Daemon d({}, "ulimit -n 32 &&");
  ASSERT_FALSE(d.address.empty());
  std::vector<std::unique_ptr<RawClient>> peers;
  for (int i = 0; i < 40; ++i) peers.push_back(std::make_unique<RawClient>(d.address));  // the backlog takes them
  for (;;) {
    std::string line = d.next_line();
    ASSERT_NE(line, "timeout") << "no log line about accept failing";
    if (line.find("cannot accept connections") != std::string::npos) break;
  }
  // While descriptors are short, the daemon should be idle. Measure its CPU time over one
  // second (a measurement window, not a synchronisation): a spinning loop uses all of it.
  long t0 = proc_cpu_ticks(d.pid());
  ::poll(nullptr, 0, 1000);
  long used = proc_cpu_ticks(d.pid()) - t0;
  EXPECT_LT(used, ticks_per_second() / 4) << "the daemon used " << used << " ticks of CPU in 1 s while out of descriptors";
  // Free descriptors: the waiting connections are accepted and a new client is served.
  peers.clear();
  RawClient fine(d.address);
  EXPECT_TRUE(fine.hello());
}

}  // namespace
}  // namespace thub::registry::test
