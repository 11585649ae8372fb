#include "tools/soak/child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace thub::soak {

Child::Child(const std::string& program, const std::vector<std::string>& args,
             const std::map<std::string, std::string>& env, const std::string& log_path)
    : log_path_(log_path) {
  int to_child[2], from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0) throw std::runtime_error("pipe: " + std::string(strerror(errno)));
  if (pipe2(from_child, O_CLOEXEC) != 0) {
    close(to_child[0]);
    close(to_child[1]);
    throw std::runtime_error("pipe: " + std::string(strerror(errno)));
  }
  int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork: " + std::string(strerror(errno)));
  if (pid_ == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    if (log >= 0) dup2(log, 2);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(program.c_str(), argv.data());
    _exit(127);
  }
  if (log >= 0) close(log);
  close(to_child[0]);
  close(from_child[1]);
  in_ = to_child[1];
  out_ = from_child[0];
  fcntl(out_, F_SETFL, fcntl(out_, F_GETFL) | O_NONBLOCK);
}

Child::~Child() {
  if (!reaped_ && pid_ > 0) {
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    reap();
  }
  if (in_ >= 0) close(in_);
  if (out_ >= 0) close(out_);
}

bool Child::send(const std::string& line) {
  if (in_ < 0 || reaped_) return false;
  std::string l = line + "\n";
  // Commands are short: the pipe takes them whole, even while the child is stopped.
  return write(in_, l.data(), l.size()) == static_cast<ssize_t>(l.size());
}

std::vector<std::string> Child::read_lines() {
  std::vector<std::string> lines;
  char tmp[4096];
  for (;;) {
    ssize_t n = read(out_, tmp, sizeof tmp);
    if (n > 0) {
      buf_.append(tmp, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) eof_ = true;
    break;  // EAGAIN, EOF or an error
  }
  size_t start = 0;
  for (size_t nl; (nl = buf_.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(buf_.substr(start, nl - start));
  }
  buf_.erase(0, start);
  return lines;
}

void Child::signal(int sig) {
  if (!reaped_ && pid_ > 0) ::kill(pid_, sig);
}

std::optional<int> Child::try_reap() {
  if (reaped_) return std::nullopt;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    return status;
  }
  return std::nullopt;
}

int Child::reap() {
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  return status;
}

std::string describe_wait_status(int status) {
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  }
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  return "status " + std::to_string(status);
}

std::string file_tail(const std::string& path, size_t max_bytes) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
}

}  // namespace thub::soak
