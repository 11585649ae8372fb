// A TCP relay between one client and a registry that records every byte each way: what an
// eavesdropper on the control plane sees, and what it could replay. No sleeps: tests wait on
// the frames they expect, with a hang guard.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "src/registry/protocol.h"
#include "src/registry/socket.h"

namespace thub::registry::test {

class RecordingProxy {
 public:
  explicit RecordingProxy(std::string upstream) : upstream_(std::move(upstream)) {
    uint16_t port = 0;
    listener_ = listen_tcp(parse_host_port("127.0.0.1:0"), &port);
    address_ = "127.0.0.1:" + std::to_string(port);
    thread_ = std::thread([this] { run(); });
  }
  ~RecordingProxy() {
    stop_ = true;
    thread_.join();
  }
  [[nodiscard]] const std::string& address() const { return address_; }
  [[nodiscard]] std::string to_registry() const {
    std::lock_guard<std::mutex> lk(mu_);
    return up_;
  }
  [[nodiscard]] std::string to_client() const {
    std::lock_guard<std::mutex> lk(mu_);
    return down_;
  }
  // Waits until at least `n` complete frames went towards the registry and `m` towards the
  // client; false after the hang guard.
  bool wait_frames(size_t n, size_t m, int guard_ms = 20000) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, std::chrono::milliseconds(guard_ms),
                        [&] { return frames(up_) >= n && frames(down_) >= m; });
  }
  // The first `n` frames of a recorded stream, byte for byte.
  static std::string first_frames(const std::string& s, size_t n) {
    size_t off = 0;
    for (size_t i = 0; i < n && s.size() - off >= kHeaderBytes; ++i) {
      FrameHeader h = decode_header(std::string_view(s).substr(off, kHeaderBytes));
      off += kHeaderBytes + h.length;
    }
    return s.substr(0, off);
  }

 private:
  static size_t frames(const std::string& s) {
    size_t off = 0, n = 0;
    while (s.size() - off >= kHeaderBytes) {
      FrameHeader h = decode_header(std::string_view(s).substr(off, kHeaderBytes));
      if (s.size() - off < kHeaderBytes + h.length) break;
      off += kHeaderBytes + h.length;
      ++n;
    }
    return n;
  }
  void run() {
    Fd client, server;
    while (!stop_ && !client.valid()) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 20) > 0) client = Fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    }
    if (stop_) return;
    server = connect_tcp(parse_host_port(upstream_), 5000);
    while (!stop_) {
      pollfd p[2] = {{client.get(), POLLIN, 0}, {server.get(), POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buf[65536];
        ssize_t k = ::recv(p[i].fd, buf, sizeof buf, MSG_DONTWAIT);
        if (k <= 0) return;  // either side closed: the relay ends (its sockets close)
        {
          std::lock_guard<std::mutex> lk(mu_);
          (i == 0 ? up_ : down_).append(buf, static_cast<size_t>(k));
        }
        cv_.notify_all();
        if (!write_all(i == 0 ? server.get() : client.get(), buf, static_cast<size_t>(k))) return;
      }
    }
  }

  std::string upstream_;
  Fd listener_;
  std::string address_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string up_, down_;
  std::thread thread_;
};

}  // namespace thub::registry::test
