// A registry Server in this process on an ephemeral loopback port, with options to taste;
// its own counters (Server::stats) show what it holds for its peers.
#pragma once

#include <poll.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "src/registry/server.h"

namespace thub::registry::test {

// Polls `pred` until it holds; false after the hang guard.
template <typename Pred>
bool eventually(Pred pred, int guard_ms = 20000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(guard_ms);
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    ::poll(nullptr, 0, 5);
  }
  return true;
}

struct Embedded {
  explicit Embedded(const std::function<void(ServerOptions&)>& tune = {}) {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    if (tune) tune(o);
    server = std::make_unique<Server>(o);
    server->start();
  }
  [[nodiscard]] std::string address() const { return server->address(); }
  [[nodiscard]] ServerStats stats() const { return server->stats(); }
  // Polls the server's counters until `pred` holds (they are published once per loop turn);
  // false if it still does not after the hang guard.
  template <typename Pred>
  bool wait_for(Pred pred, int guard_ms = 20000) const {
    return eventually([&] { return pred(stats()); }, guard_ms);
  }
  std::unique_ptr<Server> server;
};

}  // namespace thub::registry::test
