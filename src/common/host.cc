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
  auto link = [](const char* path) {
    char buf[256] = {0};
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("?");
  };
  // A network namespace stands for a host in the cluster in a box: processes in different
  // ones talk over the network (with UCX peer error handling), as on separate hosts.
  return boot + "/" + link("/proc/self/ns/pid") + "/" + link("/proc/self/ns/net");
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
