// tensorhub-registry: the standalone registry daemon.
//   tensorhub-registry [--listen HOST:PORT] [--KEY-NAME VALUE ...] [--verbose]
// Its settings are the registry's info keys (src/common/info_keys.h): each is a flag
// --key-name VALUE (and TENSORHUB_<KEY> in the environment; a flag wins), so the embedded
// registry and the daemon read the same keys the same way.
// Prints "listening HOST:PORT" once ready (port 0 picks a free one), serves until SIGINT/SIGTERM.
#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "src/common/info.h"
#include "src/common/nearest_name.h"
#include "src/common/status.h"
#include "src/registry/server.h"
#include "tools/vocabulary/render.h"

namespace {
thub::registry::Server* g_server = nullptr;
void on_signal(int) {
  if (g_server) g_server->stop();
}

int usage(const char* argv0, int rc) {
  std::fprintf(rc ? stderr : stdout,
               "usage: %s [--listen HOST:PORT] [--KEY-NAME VALUE ...] [--verbose]\n"
               "The TensorHub registry: records which worker holds which version; moves no data.\n"
               "Settings (the registry's info keys; each also TENSORHUB_<KEY>, a flag wins):\n%s"
               "  --verbose\n"
               "      log connections and protocol errors to stderr (refusals are always logged)\n"
               "Sizes take a K, M, G or T suffix; booleans are true/false, 1/0, yes/no, on/off.\n"
               "Limits: docs/protocol.md. Every key: docs/info-keys.md.\n",
               argv0, thub::vocabulary::registry_flags_help().c_str());
  return rc;
}

// The registry key a flag names: --key-name, or a key's older spelling (--listen).
const thub::InfoKeySpec* flag_key(const std::string& flag) {
  for (const auto& k : thub::kInfoKeys) {
    if (!thub::has_scope(k, thub::InfoScope::kRegistry)) continue;
    if (flag == thub::registry_flag(k) || (*k.flag && flag == k.flag)) return &k;
  }
  return nullptr;
}

std::string nearest_flag(const std::string& flag) {
  std::vector<std::string> flags = {"--verbose", "--help"};
  for (const auto& k : thub::kInfoKeys) {
    if (thub::has_scope(k, thub::InfoScope::kRegistry)) flags.push_back(thub::registry_flag(k));
  }
  std::vector<std::string_view> views(flags.begin(), flags.end());
  return thub::nearest_name(flag, views);
}
}  // namespace

int main(int argc, char** argv) {
  thub::InfoMap settings;
  bool verbose = false;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--verbose") {
        verbose = true;
      } else if (a == "--help" || a == "-h") {
        return usage(argv[0], 0);
      } else if (const thub::InfoKeySpec* k = flag_key(a)) {
        if (i + 1 >= argc) throw thub::Error(thub::Code::kArg, a + " needs a value");
        settings.set(k->name, argv[++i]);
      } else if (const thub::InfoKeySpec* b = a.rfind("--no-", 0) == 0 ? flag_key("--" + a.substr(5)) : nullptr;
                 b && b->type == thub::InfoType::kBool) {
        settings.set(b->name, "false");
      } else {
        std::string near = nearest_flag(a);
        std::fprintf(stderr, "tensorhub-registry: unknown argument '%s'%s; --help lists the settings\n", a.c_str(),
                     near.empty() ? "" : (" (did you mean " + near + "?)").c_str());
        return 2;
      }
    }
    // The daemon's own defaults where they differ from the embedded registry's (its port).
    for (const auto& k : thub::kInfoKeys) {
      if (k.daemon_dflt && !settings.lookup(k.name)) settings.set(k.name, k.daemon_dflt);
    }
    thub::check_info_keys(settings, thub::InfoScope::kRegistry, "tensorhub-registry");
    thub::registry::ServerOptions o = thub::registry::ServerOptions::from_info(settings);
    o.verbose = verbose;
    // A daemon serving thousands of clients needs the descriptors its hard limit allows;
    // beyond them, accept() fails with EMFILE and the server pauses accepting (logged).
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      setrlimit(RLIMIT_NOFILE, &rl);
    }
    thub::registry::Server server(o);
    g_server = &server;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    std::printf("listening %s\n", server.address().c_str());
    std::fflush(stdout);
    server.run();
    g_server = nullptr;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tensorhub-registry: %s\n", e.what());
    return 1;
  }
}
