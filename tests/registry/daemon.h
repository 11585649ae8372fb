// The tensorhub-registry daemon as a real process for hostile-client tests, and what /proc
// says about it (peak memory, CPU time): the daemon's own numbers, not the test's.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tests/multiproc/peer_process.h"

namespace thub::registry::test {

struct Daemon {
  std::unique_ptr<thub::test::PeerProcess> proc;
  std::string address;
  std::string startup;  // what it wrote up to "listening ..." (warnings), or why it did not start

  // `shell_prefix` runs before exec (e.g. "ulimit -n 64;"); stderr is merged into stdout so
  // that tests can read the daemon's log lines with next_line().
  explicit Daemon(const std::vector<std::string>& args = {}, const std::string& shell_prefix = "") {
    std::string cmd = shell_prefix + " exec " THUB_REGISTRY_PATH " --listen 127.0.0.1:0";
    for (const auto& a : args) cmd += " " + a;
    cmd += " 2>&1";
    proc = std::make_unique<thub::test::PeerProcess>("/bin/sh", std::vector<std::string>{"-c", cmd});
    for (int i = 0; i < 8; ++i) {  // warnings may come first
      std::string line = proc->reply(30);
      if (line.rfind("listening ", 0) == 0) {
        address = line.substr(10);
        break;
      }
      startup += line + "\n";
      if (line == "timeout" || line == "eof") break;
    }
  }
  ~Daemon() {
    if (proc) proc->signal(SIGTERM);  // stop it now; PeerProcess reaps it (SIGKILL if it hangs)
  }
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;
  [[nodiscard]] pid_t pid() const { return proc->pid(); }
  // The next line the daemon wrote (log lines go to stderr, merged here); "timeout" after the guard.
  std::string next_line(int guard_s = 20) { return proc->reply(guard_s); }
  // True while the process exists and is not a zombie.
  [[nodiscard]] bool alive() const {
    std::ifstream f("/proc/" + std::to_string(pid()) + "/stat");
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto rp = all.rfind(')');
    return rp != std::string::npos && rp + 2 < all.size() && all[rp + 2] != 'Z' && all[rp + 2] != 'X';
  }
};

// Under AddressSanitizer a process's resident memory includes shadow memory and the
// quarantine of freed blocks: it is then no measure of what the registry holds, and tests
// keep their other assertions but not the memory bounds.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRssMeasuresHeldMemory = false;
#else
constexpr bool kRssMeasuresHeldMemory = true;
#endif

// A field of /proc/PID/status in KiB (VmHWM: peak resident memory), -1 if unreadable.
inline long proc_status_kib(pid_t pid, const std::string& key) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stol(line.substr(key.size() + 1));
  }
  return -1;
}

// utime + stime of a process in clock ticks, -1 if unreadable.
inline long proc_cpu_ticks(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto rp = all.rfind(')');
  if (rp == std::string::npos) return -1;
  std::istringstream is(all.substr(rp + 2));
  std::string w;
  long utime = -1, stime = -1;
  for (int field = 3; is >> w; ++field) {  // field 3 is the state
    if (field == 14) utime = std::stol(w);
    if (field == 15) {
      stime = std::stol(w);
      break;
    }
  }
  return utime < 0 || stime < 0 ? -1 : utime + stime;
}

}  // namespace thub::registry::test
