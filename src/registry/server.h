// The registry service: sched::Registry behind a TCP server. One thread polls the
// listening socket and every client connection, turns frames into sched events, and
// sends the actions back. A malformed frame gets an error reply and closes that
// connection only; the registry keeps serving the others.
#pragma once

#include <memory>
#include <string>

#include "sched/types.h"

namespace thub::registry {

struct ServerOptions {
  std::string listen = "0.0.0.0:0";  // host:port; port 0 = ephemeral
  std::string auth_token;            // when set, clients must present it in HELLO
  sched::Config sched;
  int tick_ms = 100;                 // how often deadlines are checked
  bool verbose = false;              // log connections and protocol errors to stderr
};

class Server {
 public:
  explicit Server(const ServerOptions& opts);  // binds; throws Error(kArg/kRegistry)
  ~Server();                                   // stops the thread if running
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void start();         // serve on a background thread (the embedded registry)
  void run();           // serve on this thread until stop() (the daemon)
  void stop();          // thread-safe; run() returns soon after
  [[nodiscard]] std::string address() const;  // "host:port" for clients

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace thub::registry
