#include "tools/info/registry_section.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <exception>
#include <memory>
#include <sstream>
#include <vector>

#include "src/client/context.h"
#include "src/common/info.h"
#include "src/registry/connection.h"
#include "tools/info/print_registry.h"

namespace thub::info {
namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// Sleeps `s` seconds in short slices, so that SIGINT/SIGTERM (which may be delivered to the
// connection's thread rather than this one) ends the wait soon.
void nap(double s) {
  auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(s * 1e6));
  while (!g_stop) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    if (left <= 0) return;
    ::poll(nullptr, 0, static_cast<int>(std::min<int64_t>(left, 100)));
  }
}

std::vector<std::string> split(const std::string& list) {
  if (list.rfind("etcd://", 0) == 0) return {list};  // the leader there (its endpoints are a list of their own)
  std::vector<std::string> out;
  std::istringstream is(list);
  std::string a;
  while (std::getline(is, a, ',')) {
    if (!a.empty()) out.push_back(a);
  }
  return out;
}

std::string local_time() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%H:%M:%S", &tm);
  return b;
}

}  // namespace

int registry_section(const RegistryOptions& opt, std::ostream& out, std::ostream& err) {
  // Ctrl-C ends a watch cleanly from the start: a signal while the connection is set up or a
  // snapshot is read only marks the stop (SA_RESTART: the calls under way carry on), so the
  // exit status is 0 whenever it comes.
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {}, old_term {};
  if (opt.watch_s > 0) {
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  auto restore = [&] {
    if (opt.watch_s > 0) {
      sigaction(SIGINT, &old_int, nullptr);
      sigaction(SIGTERM, &old_term, nullptr);
    }
  };
  std::unique_ptr<registry::Connection> conn;
  try {
    // The client's own configuration (info keys from the environment: TENSORHUB_AUTH_TOKEN,
    // the registry timeouts), so the tool connects exactly as a THUB_Context would.
    InfoMap info;
    info.set("registry", opt.address);
    client::ContextConfig cfg = client::ContextConfig::from_info(info);
    conn = std::make_unique<registry::Connection>(cfg.connection_options(split(opt.address)));
  } catch (const std::exception& e) {
    err << "tensorhub-info: cannot connect to the registry at " << opt.address << ": " << e.what() << "\n";
    restore();
    return 1;
  }
  const bool clear = opt.watch_s > 0 && !opt.json && ::isatty(STDOUT_FILENO);
  int rc = 0;
  for (int64_t n = 1; !g_stop; ++n) {
    try {
      sched::Snapshot s = conn->snapshot(opt.max_entries);
      if (opt.json) {
        print_registry_json(out, conn->address(), s);
      } else {
        if (clear) out << "\x1b[H\x1b[2J";
        if (opt.watch_s > 0) {
          out << (n > 1 && !clear ? "\n" : "") << "# " << local_time() << ", every " << opt.watch_s
              << " s (Ctrl-C stops)\n";
        }
        print_registry(out, conn->address(), s);
      }
      out.flush();
    } catch (const std::exception& e) {
      err << "tensorhub-info: " << e.what() << "\n";
      rc = 1;
      break;
    }
    if (opt.watch_s <= 0 || (opt.count > 0 && n >= opt.count)) break;
    nap(opt.watch_s);
  }
  restore();
  return rc;
}

}  // namespace thub::info
