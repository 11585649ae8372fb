#include "tests/multiproc/peer_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#ifndef THUB_PEER_PATH
#error "THUB_PEER_PATH must name the thub_peer executable"
#endif

namespace thub::test {

namespace {
// The peer program: THUB_TEST_PEER where set (a test binary carried to another machine, e.g.
// bench/gpu/run-device-check.sh), else the one this test was built with.
std::string peer_program() {
  const char* p = std::getenv("THUB_TEST_PEER");
  return p && *p ? p : THUB_PEER_PATH;
}
}  // namespace

PeerProcess::PeerProcess(const std::map<std::string, std::string>& env) : PeerProcess(peer_program(), {}, env) {}

bool PeerProcess::all_threads_stopped(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return true;  // gone: nothing of it runs
  bool all = true;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(dir + "/" + e->d_name + "/stat");
    std::string line;
    std::getline(f, line);
    const size_t paren = line.rfind(')');
    if (paren == std::string::npos || paren + 2 >= line.size()) continue;  // the thread just ended
    const char state = line[paren + 2];
    all = all && (state == 'T' || state == 't' || state == 'Z' || state == 'X');
  }
  ::closedir(d);
  return all;
}

void PeerProcess::signal(int sig) {
  ::kill(pid_, sig);
  if (sig != SIGSTOP) return;
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // a hang guard
  while (!all_threads_stopped(pid_))
    if (std::chrono::steady_clock::now() > limit) {
      std::fprintf(stderr, "peer %d did not stop within 60 s\n", static_cast<int>(pid_));
      return;
    } else {
      ::sched_yield();
    }
}

PeerProcess::PeerProcess(const std::string& program, const std::vector<std::string>& args,
                         const std::map<std::string, std::string>& env) {
  ::signal(SIGPIPE, SIG_IGN);  // a dead peer shows as "eof", not as a dead test
  int to_child[2], from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork");
  if (pid_ == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(program.c_str(), argv.data());
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  in_ = to_child[1];
  out_ = from_child[0];
}

PeerProcess::~PeerProcess() {
  if (pid_ <= 0) {
    if (in_ >= 0) close(in_);
    if (out_ >= 0) close(out_);
    return;
  }
  if (in_ >= 0) {
    [[maybe_unused]] ssize_t n = write(in_, "quit\n", 5);
    close(in_);
  }
  // Give it a moment to finalize (a program that does not read stdin, such as the registry
  // daemon, is asked with SIGTERM); then make sure it is gone.
  int status = 0;
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    if (i == 10) ::kill(pid_, SIGTERM);
    poll(nullptr, 0, 50);
  }
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
  if (out_ >= 0) close(out_);
}

void PeerProcess::kill_now() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void PeerProcess::send(const std::string& line) {
  std::string l = line + "\n";
  if (write(in_, l.data(), l.size()) != static_cast<ssize_t>(l.size())) throw std::runtime_error("write to peer");
}

bool PeerProcess::reply_ready(int ms) {
  if (buf_.find('\n') != std::string::npos) return true;
  pollfd p{out_, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return false;
  char tmp[4096];
  ssize_t n = read(out_, tmp, sizeof tmp);
  if (n > 0) buf_.append(tmp, static_cast<size_t>(n));
  return buf_.find('\n') != std::string::npos;
}

std::string PeerProcess::reply(int timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (buf_.find('\n') == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return "timeout";
    pollfd p{out_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char tmp[4096];
    ssize_t n = read(out_, tmp, sizeof tmp);
    if (n <= 0) return "eof";
    buf_.append(tmp, static_cast<size_t>(n));
  }
  size_t nl = buf_.find('\n');
  std::string line = buf_.substr(0, nl);
  buf_.erase(0, nl + 1);
  return line;
}

std::string PeerProcess::cmd(const std::string& line, int timeout_s) {
  send(line);
  return reply(timeout_s);
}

std::string word(const std::string& reply, int n) {
  std::istringstream is(reply);
  std::string w;
  for (int i = 0; i <= n; ++i) {
    if (!(is >> w)) return {};
  }
  return w;
}

bool ok(const std::string& reply) { return reply.rfind("ok", 0) == 0; }

int status_of(const std::string& reply) {
  if (ok(reply)) return 0;
  if (reply.rfind("err ", 0) != 0) return -1000;
  return std::atoi(word(reply, 1).c_str());
}

}  // namespace thub::test
