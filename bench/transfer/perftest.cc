#include "bench/transfer/perftest.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "bench/common/cpu_time.h"

extern char** environ;

namespace thub::bench {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A port nobody listens on now (the kernel's choice for an ephemeral bind). Another process
// may take it before ucx_perftest does: run() retries the pair then.
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

// Whether some socket listens on `port` (/proc/net/tcp and tcp6: state 0A is LISTEN). A
// probe connection would be taken by the server as its client, so we look instead.
bool listening(int port) {
  char want[8];
  std::snprintf(want, sizeof want, ":%04X", port);
  for (const char* f : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(f);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream s(line);
      std::string sl, local, remote, st;
      s >> sl >> local >> remote >> st;
      if (st == "0A" && local.size() >= 5 && local.compare(local.size() - 5, 5, want) == 0) return true;
    }
  }
  return false;
}

pid_t spawn(const std::vector<std::string>& args, int out_fd) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// Reads what is there (non-blocking fd) into `buf`; false at end of file.
bool drain(int fd, std::string* buf) {
  char tmp[4096];
  for (;;) {
    ssize_t n = read(fd, tmp, sizeof tmp);
    if (n > 0) {
      buf->append(tmp, static_cast<size_t>(n));
      if (buf->size() > (1u << 16)) buf->erase(0, buf->size() - (1u << 15));  // keep the tail
      continue;
    }
    if (n == 0) return false;
    return errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

// The client's final line with -f: 8 numbers (iters, p50 lat, avg lat, overall lat in us,
// avg and overall MiB/s, avg and overall msg/s), after an empty test-name column.
bool parse_final(const std::string& line, double v[8]) {
  std::istringstream s(line);
  int n = 0;
  std::string tok;
  while (s >> tok) {
    if (n == 8) return false;
    char* end = nullptr;
    v[n] = std::strtod(tok.c_str(), &end);
    if (!end || *end) return false;
    n++;
  }
  return n == 8;
}

struct Sample {
  double t, reader, source;
};

// CPU of one process at time t, linear between the samples around it.
double cpu_at(const std::vector<Sample>& s, double t, bool source) {
  auto val = [&](const Sample& x) { return source ? x.source : x.reader; };
  if (s.empty()) return -1;
  if (t <= s.front().t) return val(s.front());
  for (size_t i = 1; i < s.size(); ++i) {
    if (s[i].t >= t) {
      double a = val(s[i - 1]), b = val(s[i]);
      if (a < 0 || b < 0) return -1;
      double f = (t - s[i - 1].t) / (s[i].t - s[i - 1].t);
      return a + f * (b - a);
    }
  }
  return val(s.back());
}

void reap(pid_t pid, double deadline) {
  if (pid <= 0) return;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (now_s() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return;
    }
    usleep(2000);
  }
}

std::string last_lines(const std::string& out) {
  std::string s = out;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  size_t p = s.size();
  for (int k = 0; k < 3 && p != std::string::npos && p > 0; ++k) p = s.rfind('\n', p - 1);
  std::string t = p == std::string::npos ? s : s.substr(p + 1);
  for (char& c : t) {
    if (c == '\n') c = '|';
    if (c == '"' || c == '\\') c = '\'';
  }
  return t;
}

}  // namespace

bool Perftest::available() const {
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  pid_t pid = spawn({bin_, "-h"}, devnull);
  close(devnull);
  if (pid <= 0) return false;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) != 127;
}

PerftestResult Perftest::run(uint64_t size, int iters, int warmup, int window, double timeout_s) const {
  PerftestResult r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    r = run_once(size, iters, warmup, window, timeout_s);
    if (r.ok) break;
  }
  return r;
}

PerftestResult Perftest::run_once(uint64_t size, int iters, int warmup, int window, double timeout_s) const {
  PerftestResult r;
  r.size = size;
  r.window = window;
  r.iters = iters;
  r.warmup = warmup;
  const double deadline = now_s() + timeout_s;
  int port = free_port();
  if (port <= 0) {
    r.error = "no free TCP port";
    return r;
  }
  int sp[2], cp[2];
  if (pipe2(sp, O_CLOEXEC) != 0) {
    r.error = "pipe";
    return r;
  }
  if (pipe2(cp, O_CLOEXEC) != 0) {
    close(sp[0]);
    close(sp[1]);
    r.error = "pipe";
    return r;
  }
  fcntl(sp[0], F_SETFL, O_NONBLOCK);
  fcntl(cp[0], F_SETFL, O_NONBLOCK);
  std::string sout, cout;
  pid_t server = spawn({bin_, "-p", std::to_string(port)}, sp[1]);
  close(sp[1]);
  pid_t client = -1;
  auto finish = [&](const std::string& err) {
    if (!err.empty()) {
      r.error = err;
      if (client > 0) kill(client, SIGKILL);
      if (server > 0) kill(server, SIGKILL);
    }
    reap(client, now_s() + 5);
    reap(server, now_s() + 5);
    close(sp[0]);
    close(cp[0]);
    return r;
  };
  if (server <= 0) {
    close(cp[1]);
    return finish("cannot start " + bin_);
  }
  // Wait for the server to listen (it exits at once if the port was taken meanwhile).
  while (!listening(port)) {
    (void)drain(sp[0], &sout);
    int status = 0;
    if (waitpid(server, &status, WNOHANG) == server) {
      server = -1;
      close(cp[1]);
      return finish("server exited before listening: " + last_lines(sout));
    }
    if (now_s() > deadline) {
      close(cp[1]);
      return finish("server did not listen on port " + std::to_string(port));
    }
    usleep(2000);
  }
  client = spawn({bin_, "127.0.0.1", "-p", std::to_string(port), "-t", "ucp_get", "-s", std::to_string(size), "-n",
                  std::to_string(iters), "-w", std::to_string(warmup), "-O", std::to_string(window), "-f"},
                 cp[1]);
  close(cp[1]);
  if (client <= 0) return finish("cannot start the client");

  std::vector<Sample> samples;
  samples.reserve(4096);
  double t_end = -1, v[8] = {};
  size_t scanned = 0;
  bool client_open = true;
  while (client_open) {
    pollfd p[2] = {{cp[0], POLLIN, 0}, {sp[0], POLLIN, 0}};
    (void)poll(p, 2, 5);
    double t = now_s();
    samples.push_back({t, pid_cpu_s(client), pid_cpu_s(server)});
    client_open = drain(cp[0], &cout);
    (void)drain(sp[0], &sout);
    // Look for the final line among the complete lines read so far.
    size_t nl;
    while (t_end < 0 && (nl = cout.find('\n', scanned)) != std::string::npos) {
      std::string line = cout.substr(scanned, nl - scanned);
      scanned = nl + 1;
      if (parse_final(line, v)) {
        t_end = t;
        r.line = line;
      }
    }
    if (t > deadline) return finish("timed out after " + std::to_string(static_cast<int>(timeout_s)) + " s");
  }
  int status = 0;
  waitpid(client, &status, 0);
  client = -1;
  reap(server, now_s() + 10);
  server = -1;
  if (t_end < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return finish("client failed (status " + std::to_string(status) + "): " + last_lines(cout));
  }
  const double lat_p50 = v[1] * 1e-6, lat_overall = v[3] * 1e-6;
  r.iters = static_cast<int>(v[0]);
  r.seconds = r.iters * lat_overall;
  r.gbps = r.seconds > 0 ? static_cast<double>(size) * r.iters / r.seconds / 1e9 : 0;
  r.p50_gbps = lat_p50 > 0 ? static_cast<double>(size) / lat_p50 / 1e9 : 0;
  const double t_start = t_end - r.seconds;
  double c0 = cpu_at(samples, t_start, false), c1 = cpu_at(samples, t_end, false);
  double s0 = cpu_at(samples, t_start, true), s1 = cpu_at(samples, t_end, true);
  r.reader_cpu_s = c0 >= 0 && c1 >= 0 ? c1 - c0 : -1;
  r.source_cpu_s = s0 >= 0 && s1 >= 0 ? s1 - s0 : -1;
  r.ok = true;
  return finish("");
}

}  // namespace thub::bench
