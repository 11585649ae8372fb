#include "src/common/host.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

namespace thub {

namespace {
std::string read_identity() {
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  char ns[256] = {0};
  ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return boot + "/" + (n > 0 ? std::string(ns, static_cast<size_t>(n)) : std::string(host));
}
}  // namespace

const std::string& host_identity() {
  static const std::string id = read_identity();
  return id;
}

bool process_alive(int64_t pid) {
  if (pid <= 0) return true;  // unknown: assume alive, the stall watchdog still applies
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return true;
  auto close = line.rfind(')');
  return !(close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z');
}

}  // namespace thub
