// Starts a thub_peer process and drives it line by line over pipes (see peer.c), so that
// multi-process tests order their steps by replies, never by sleeps.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace thub::test {

class PeerProcess {
 public:
  // `env` is added to this process's environment for the child.
  explicit PeerProcess(const std::map<std::string, std::string>& env = {});
  // Any program with arguments (e.g. the registry daemon), stdin/stdout piped the same way.
  PeerProcess(const std::string& program, const std::vector<std::string>& args,
              const std::map<std::string, std::string>& env = {});
  ~PeerProcess();
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  // Send one command and return its reply line ("ok ..." / "err ..."). A peer that does not
  // answer within `timeout_s` (a hang, not a speed limit) gives "timeout".
  std::string cmd(const std::string& line, int timeout_s = 120);
  // Send without reading the reply; read it later with reply().
  void send(const std::string& line);
  std::string reply(int timeout_s = 120);
  // True if a reply line is ready within `ms` milliseconds.
  bool reply_ready(int ms);
  // SIGSTOP returns once every thread of the peer has stopped: kill() returns before (one
  // thread takes the signal, then stops the others), and a thread not yet stopped may still
  // answer a registry or a reader (seen under AddressSanitizer).
  void signal(int sig);
  // Every thread of `pid` is stopped (state T in /proc/PID/task/*/stat), or none is left.
  static bool all_threads_stopped(pid_t pid);
  pid_t pid() const { return pid_; }
  // SIGKILL and reap now (a crash, for failover tests).
  void kill_now();

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  std::string buf_;
};

// "ok 1.2.3.4:5" -> "1.2.3.4:5"; the second word of a reply.
std::string word(const std::string& reply, int n);
bool ok(const std::string& reply);
// The status code of an "err CODE ..." reply, 0 for "ok".
int status_of(const std::string& reply);

}  // namespace thub::test
