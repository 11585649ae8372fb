// A client's connection to the registry: request/reply with request ids (replies may be
// deferred by the registry for as long as a drain or a busy source takes), heartbeats
// from a reader thread, and registry-initiated messages (retention offload orders).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sched/types.h"

namespace thub::registry {

struct ConnectionOptions {
  std::vector<std::string> addresses;  // "host:port", tried in order
  std::string auth_token;
  std::string datacenter = "default";
  int heartbeat_ms = 1000;
  int connect_timeout_ms = 5000;
};

class Connection {
 public:
  // Connects to the first reachable address and says HELLO. Throws Error(kRegistry/kAuth).
  explicit Connection(const ConnectionOptions& opts);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Send a request and wait for its reply. timeout_ms <= 0: no deadline (Error(kTimeout)
  // otherwise). Throws Error(kRegistry) if the connection is lost before the reply.
  sched::Reply call(const sched::Event& ev, int64_t timeout_ms = 0);
  // The registry's state as text (tensorhub-info --registry).
  std::string describe(int64_t timeout_ms = 5000);
  // Registry-initiated retention offload orders run `fn` on a separate thread.
  void on_offload(std::function<void(const sched::Offload&)> fn);
  [[nodiscard]] std::string address() const;
  [[nodiscard]] bool connected() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace thub::registry
