// Issue 13, item 6, on the tensorhub-registry daemon itself: it serves only the address it
// is given (no default, every interface only when asked), reads its token from a file that
// only its owner may access, and logs every refused proof.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "src/common/status.h"
#include "src/registry/connection.h"
#include "src/registry/socket.h"
#include "tests/registry/daemon.h"

namespace thub::registry::test {
namespace {

class TokenDir {
 public:
  TokenDir() {
    char dir[] = "/tmp/thub-daemon-token-XXXXXX";
    if (mkdtemp(dir)) path_ = dir;
  }
  ~TokenDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  std::string file(const std::string& content, mode_t mode) const {
    std::string p = path_ + "/token";
    std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
    ::chmod(p.c_str(), mode);
    return p;
  }

 private:
  std::string path_;
};

Code connect_code(const std::string& address, const std::string& token) {
  ConnectionOptions co;
  co.addresses = {address};
  co.auth_token = token;
  co.connect_timeout_ms = 10000;
  try {
    Connection c(co);
    return Code::kSuccess;
  } catch (const Error& e) {
    return e.code();
  }
}

uint16_t port_of(const std::string& address) { return parse_host_port(address).port; }

// Connecting to 127.0.0.2, which is this host's loopback too: a socket bound to 127.0.0.1
// does not answer there, one bound to every interface does.
bool answers_on_127_0_0_2(uint16_t port) {
  try {
    Fd fd = connect_tcp(HostPort{"127.0.0.2", port}, 5000);
    return true;
  } catch (const Error&) {
    return false;
  }
}

TEST(DaemonAuthTest, TokenFileOthersMayReadIsRefusedAtStart) {
  TokenDir dir;
  Daemon d({"--auth-token-file", dir.file("s3cret\n", 0644)});
  EXPECT_TRUE(d.address.empty()) << "the daemon serves with a token file anyone may read";
  EXPECT_NE(d.startup.find("too open"), std::string::npos) << d.startup;
  EXPECT_NE(d.startup.find("chmod 600"), std::string::npos) << d.startup;
}

TEST(DaemonAuthTest, TokenFileAuthenticatesAndARefusedProofIsLogged) {
  TokenDir dir;
  Daemon d({"--auth-token-file", dir.file("s3cret\n", 0600)});
  ASSERT_FALSE(d.address.empty()) << d.startup;
  EXPECT_EQ(connect_code(d.address, "s3cret"), Code::kSuccess);  // the newline was stripped
  EXPECT_EQ(connect_code(d.address, "s3cret\n"), Code::kAuth);
  std::string line;
  for (int i = 0; i < 20 && line.find("authentication failed") == std::string::npos; ++i) line = d.next_line();
  EXPECT_NE(line.find("authentication failed"), std::string::npos) << line;
  EXPECT_NE(line.find("127.0.0.1"), std::string::npos) << "the log names the peer: " << line;
}

TEST(DaemonListenTest, WithoutListenItRefusesToStart) {
  thub::test::PeerProcess p("/bin/sh", {"-c", "exec " THUB_REGISTRY_PATH " 2>&1"});
  std::string line = p.reply(30);
  EXPECT_NE(line.find("--listen HOST:PORT is required"), std::string::npos) << line;
}

TEST(DaemonListenTest, ServesOnlyTheAddressItIsGiven) {
  Daemon loopback;  // --listen 127.0.0.1:0
  ASSERT_FALSE(loopback.address.empty()) << loopback.startup;
  EXPECT_EQ(connect_code(loopback.address, ""), Code::kSuccess);
  EXPECT_FALSE(answers_on_127_0_0_2(port_of(loopback.address))) << "bound to more than 127.0.0.1";

  Daemon everywhere({"--listen", "0.0.0.0:0"});  // asked for: and then it says so
  ASSERT_FALSE(everywhere.address.empty()) << everywhere.startup;
  EXPECT_TRUE(answers_on_127_0_0_2(port_of(everywhere.address)));
  EXPECT_NE(everywhere.startup.find("every interface without an auth token"), std::string::npos)
      << everywhere.startup;
}

}  // namespace
}  // namespace thub::registry::test
