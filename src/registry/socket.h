// Small TCP helpers for the control plane (blocking sockets, RAII file descriptors).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace thub::registry {

// Milliseconds of the steady clock: the registry's and its clients' deadlines.
inline int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset();

 private:
  int fd_ = -1;
};

struct HostPort {
  std::string host;
  uint16_t port = 0;
};
// "host:port" (host may be empty or "*" for all interfaces). Throws Error(kArg).
HostPort parse_host_port(const std::string& s);
// "a:p,b:q" -> list. Throws Error(kArg).
std::vector<HostPort> parse_address_list(const std::string& s);

// Listen on `hp` (port 0: ephemeral). Returns the socket and sets the bound port.
Fd listen_tcp(const HostPort& hp, uint16_t* bound_port);
// Connect within `timeout_ms`; throws Error(kRegistry) naming the address.
Fd connect_tcp(const HostPort& hp, int timeout_ms);
// The address others should use for a socket bound to `host` ("0.0.0.0" -> an interface address).
std::string advertised_host(const std::string& bound_host);

// Blocking full read/write; false on EOF or error.
bool write_all(int fd, const void* p, size_t n);
bool read_all(int fd, void* p, size_t n);

}  // namespace thub::registry
