// One process of the fault soak: a soak worker or a registry daemon, started with its
// stdin/stdout on pipes and its stderr in a log file, so that the driver can order steps by
// replies, signal it, and tell a death it caused from one it did not.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace thub::soak {

class Child {
 public:
  // Starts `program args...` with `env` added to this process's environment; stderr (and
  // anything the child prints after it dies) goes to `log_path`. Throws std::runtime_error.
  Child(const std::string& program, const std::vector<std::string>& args,
        const std::map<std::string, std::string>& env, const std::string& log_path);
  ~Child();  // SIGKILL and reap, if still there
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  int out_fd() const { return out_; }  // poll it for replies
  const std::string& log_path() const { return log_path_; }

  // Writes one command line (false if the child is gone).
  bool send(const std::string& line);
  // Reads what is available on stdout; returns complete lines. Sets eof() at end of stream.
  std::vector<std::string> read_lines();
  bool eof() const { return eof_; }

  void signal(int sig);
  // Reaps the child without blocking; returns its wait status once it is gone.
  std::optional<int> try_reap();
  // Blocks until the child is gone (after SIGKILL); returns its wait status.
  int reap();
  bool reaped() const { return reaped_; }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  std::string buf_;
  std::string log_path_;
  bool eof_ = false;
  bool reaped_ = false;
};

// "killed by signal 6 (Aborted)", "exit 3", ... for a wait status.
std::string describe_wait_status(int status);
// The last `max_bytes` of a file (the tail of a child's log).
std::string file_tail(const std::string& path, size_t max_bytes);

}  // namespace thub::soak
