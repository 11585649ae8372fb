// tensorhub-registry: the standalone registry daemon.
//   tensorhub-registry --listen HOST:PORT [--auth-token T] [--heartbeat-timeout-ms N]
//                      [--max-readers N] [--no-pipeline] [--verbose]
// Prints "listening HOST:PORT" once ready (port 0 picks a free one), serves until SIGINT/SIGTERM.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "src/common/info.h"
#include "src/common/status.h"
#include "src/registry/server.h"

namespace {
thub::registry::Server* g_server = nullptr;
void on_signal(int) {
  if (g_server) g_server->stop();
}

int usage(const char* argv0, int rc) {
  std::fprintf(rc ? stderr : stdout,
               "usage: %s --listen HOST:PORT [--auth-token T] [--heartbeat-timeout-ms N]\n"
               "          [--max-readers N] [--no-pipeline] [--verbose]\n"
               "The TensorHub registry: records which worker holds which version; moves no data.\n"
               "Environment: TENSORHUB_AUTH_TOKEN is used when --auth-token is not given.\n",
               argv0);
  return rc;
}
}  // namespace

int main(int argc, char** argv) {
  thub::registry::ServerOptions o;
  o.listen = "0.0.0.0:7070";
  if (const char* t = std::getenv("TENSORHUB_AUTH_TOKEN")) o.auth_token = t;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw thub::Error(thub::Code::kArg, a + " needs a value");
        return argv[++i];
      };
      if (a == "--listen") o.listen = value();
      else if (a == "--auth-token") o.auth_token = value();
      else if (a == "--heartbeat-timeout-ms") o.sched.heartbeat_timeout = std::stoll(value()) * 1000;
      else if (a == "--max-readers") o.sched.max_readers_per_source = std::stoi(value());
      else if (a == "--no-pipeline") o.sched.pipeline = false;
      else if (a == "--verbose") o.verbose = true;
      else if (a == "--help" || a == "-h") return usage(argv[0], 0);
      else return usage(argv[0], 2);
    }
    if (o.sched.max_readers_per_source < 1) throw thub::Error(thub::Code::kArg, "--max-readers must be >= 1");
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
