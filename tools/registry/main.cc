// tensorhub-registry: the standalone registry daemon.
//   tensorhub-registry --listen HOST:PORT [--auth-token-file F] [--heartbeat-timeout-ms N]
//                      [--max-readers N] [--no-pipeline] [--verbose] [limits, see usage()]
// Prints "listening HOST:PORT" once ready (port 0 picks a free one), serves until SIGINT/SIGTERM.
// It listens on HOST only: there is no default address, and all interfaces only when asked
// (0.0.0.0 or *).
#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "src/common/info.h"
#include "src/common/status.h"
#include "src/registry/auth.h"
#include "src/registry/server.h"
#include "src/registry/socket.h"

namespace {
thub::registry::Server* g_server = nullptr;
void on_signal(int) {
  if (g_server) g_server->stop();
}

int usage(const char* argv0, int rc) {
  std::fprintf(rc ? stderr : stdout,
               "usage: %s --listen HOST:PORT [--auth-token-file FILE | --auth-token T]\n"
               "          [--heartbeat-timeout-ms N] [--max-readers N] [--no-pipeline] [--verbose]\n"
               "          [--max-connections N] [--max-connections-per-host N]\n"
               "          [--hello-timeout-ms N] [--frame-timeout-ms N]\n"
               "          [--output-pause-bytes N] [--max-output-bytes N]\n"
               "The TensorHub registry: records which worker holds which version; moves no data.\n"
               "It listens on HOST only (0.0.0.0:PORT or *:PORT: every interface). With a token, every\n"
               "client must prove it knows it (HMAC challenge-response; the token never travels).\n"
               "FILE must be readable by its owner only (chmod 600); a trailing newline is stripped.\n"
               "Limits (docs/protocol.md): connections in all (8192) and per peer address (1024);\n"
               "HELLO within 10000 ms of connecting; a partial frame or unread replies that make no\n"
               "progress for 30000 ms close the connection; replies queued beyond 4 MiB pause reading\n"
               "that client, beyond 128 MiB close it. Refusals are logged to stderr.\n"
               "Environment: TENSORHUB_AUTH_TOKEN_FILE, else TENSORHUB_AUTH_TOKEN, when neither flag\n"
               "is given. docs/security.md says what the token protects and what it does not.\n",
               argv0);
  return rc;
}
}  // namespace

int main(int argc, char** argv) {
  thub::registry::ServerOptions o;
  o.listen.clear();
  std::string token, token_file;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw thub::Error(thub::Code::kArg, a + " needs a value");
        return argv[++i];
      };
      if (a == "--listen") o.listen = value();
      else if (a == "--auth-token") token = value();
      else if (a == "--auth-token-file") token_file = value();
      else if (a == "--heartbeat-timeout-ms") o.sched.heartbeat_timeout = std::stoll(value()) * 1000;
      else if (a == "--max-readers") o.sched.max_readers_per_source = std::stoi(value());
      else if (a == "--no-pipeline") o.sched.pipeline = false;
      else if (a == "--max-connections") o.max_connections = std::stoi(value());
      else if (a == "--max-connections-per-host") o.max_connections_per_host = std::stoi(value());
      else if (a == "--hello-timeout-ms") o.hello_timeout_ms = std::stoi(value());
      else if (a == "--frame-timeout-ms") o.frame_timeout_ms = std::stoi(value());
      else if (a == "--output-pause-bytes") o.output_pause_bytes = std::stoull(value());
      else if (a == "--max-output-bytes") o.max_output_bytes = std::stoull(value());
      else if (a == "--verbose") o.verbose = true;
      else if (a == "--help" || a == "-h") return usage(argv[0], 0);
      else return usage(argv[0], 2);
    }
    if (o.sched.max_readers_per_source < 1) throw thub::Error(thub::Code::kArg, "--max-readers must be >= 1");
    if (o.listen.empty()) {
      throw thub::Error(thub::Code::kArg,
                        "--listen HOST:PORT is required (the address to serve on; 0.0.0.0:PORT for every interface)");
    }
    if (!token.empty() && !token_file.empty()) {
      throw thub::Error(thub::Code::kArg, "give --auth-token or --auth-token-file, not both");
    }
    if (token.empty() && token_file.empty()) {
      if (const char* f = std::getenv("TENSORHUB_AUTH_TOKEN_FILE"); f && *f) token_file = f;
      else if (const char* t = std::getenv("TENSORHUB_AUTH_TOKEN")) token = t;
    } else if (!token.empty()) {
      std::fprintf(stderr,
                   "tensorhub-registry: warning: --auth-token puts the secret in the process list; "
                   "prefer --auth-token-file\n");
    }
    o.auth_token = token_file.empty() ? token : thub::registry::read_token_file(token_file);
    const std::string host = thub::registry::parse_host_port(o.listen).host;
    if (o.auth_token.empty() && (host.empty() || host == "0.0.0.0")) {
      std::fprintf(stderr,
                   "tensorhub-registry: warning: listening on every interface without an auth token: anyone "
                   "who reaches this port may publish, replicate and learn where the weights are\n");
    }
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
