// A real etcd (Debian's etcd-server, /usr/bin/etcd) for leader-election tests: one member on
// free loopback ports, its data in a fresh folder, its log there too; stopped and removed
// with the object. Tests skip with a message where etcd is not installed.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "src/common/status.h"
#include "src/registry/etcd.h"
#include "tests/multiproc/peer_process.h"

namespace thub::registry::test {

inline const char* etcd_binary() {
  const char* env = std::getenv("THUB_ETCD");
  return env && *env ? env : "/usr/bin/etcd";
}
inline bool etcd_available() { return ::access(etcd_binary(), X_OK) == 0; }

// A loopback port nobody listens on now (bound, then released).
inline int free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(s);
  return ntohs(a.sin_port);
}

struct EtcdProcess {
  std::string dir;
  int client_port = 0;
  std::unique_ptr<thub::test::PeerProcess> proc;

  EtcdProcess() {
    char tmpl[] = "/tmp/thub-etcd-XXXXXX";
    dir = ::mkdtemp(tmpl);
    client_port = free_port();
    start();
  }
  ~EtcdProcess() {
    if (proc) proc->kill_now();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // Starts etcd (again: the same data) and waits until it answers, at most 20 s.
  bool start() {
    const std::string url = "http://127.0.0.1:" + std::to_string(client_port);
    const std::string peer = "http://127.0.0.1:" + std::to_string(free_port());
    std::string cmd = std::string("exec ") + etcd_binary() + " --name thub-test --data-dir " + dir + "/data" +
                      " --listen-client-urls " + url + " --advertise-client-urls " + url +
                      " --listen-peer-urls " + peer + " --initial-advertise-peer-urls " + peer +
                      " --initial-cluster thub-test=" + peer + " --initial-cluster-state new" + " >> " + dir +
                      "/etcd.log 2>&1";
    proc = std::make_unique<thub::test::PeerProcess>("/bin/sh", std::vector<std::string>{"-c", cmd});
    EtcdClient c(parse_etcd_target(url_for("/ready")), 1000);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        (void)c.leader();
        return true;
      } catch (const Error&) {
        ::poll(nullptr, 0, 50);
      }
    }
    return false;
  }
  void kill_now() {
    if (proc) proc->kill_now();
    proc.reset();
  }
  // "etcd://127.0.0.1:PORT<prefix>"
  [[nodiscard]] std::string url_for(const std::string& prefix) const {
    return "etcd://127.0.0.1:" + std::to_string(client_port) + prefix;
  }
};

}  // namespace thub::registry::test
