// A hostile or careless client for registry tests: a raw TCP socket that speaks (or abuses)
// the wire format of docs/protocol.md. Every read has a hang guard: a registry that does not
// answer makes the test fail after the guard instead of hanging it; the guard is never a
// pass criterion.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "src/common/codec.h"
#include "src/common/crypto.h"
#include "src/registry/auth.h"
#include "src/registry/protocol.h"
#include "src/registry/socket.h"

namespace thub::registry::test {

constexpr int kGuardMs = 20000;

struct Frame {
  FrameHeader header;
  std::string payload;
  [[nodiscard]] sched::Reply reply() const { return decode_reply(payload); }
};

class RawClient {
 public:
  explicit RawClient(const std::string& address) : fd_(connect_tcp(parse_host_port(address), 5000)) {}

  [[nodiscard]] int fd() const { return fd_.get(); }
  bool send_bytes(std::string_view b) { return write_all(fd_.get(), b.data(), b.size()); }
  bool send_frame(MsgType t, uint64_t req, std::string_view payload) {
    return send_bytes(encode_frame(t, req, payload));
  }
  bool send_event(const sched::Event& ev, uint64_t req) { return send_frame(type_of(ev), req, encode_event(ev)); }

  // The next frame, or nullopt on EOF, error or the hang guard.
  std::optional<Frame> read_frame(int guard_ms = kGuardMs) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(guard_ms);
    for (;;) {
      if (buf_.size() >= kHeaderBytes) {
        FrameHeader h = decode_header(std::string_view(buf_).substr(0, kHeaderBytes));
        if (buf_.size() >= kHeaderBytes + h.length) {
          Frame f{h, buf_.substr(kHeaderBytes, h.length)};
          buf_.erase(0, kHeaderBytes + h.length);
          return f;
        }
      }
      if (!fill(deadline)) return std::nullopt;
    }
  }
  // The next REPLY (skipping heartbeat answers), or nullopt.
  std::optional<sched::Reply> read_reply(int guard_ms = kGuardMs) {
    for (;;) {
      auto f = read_frame(guard_ms);
      if (!f) return std::nullopt;
      if (f->header.type == MsgType::kReply) return f->reply();
    }
  }
  // The handshake (HELLO; with a token CHALLENGE, AUTH, AUTH_OK); true when accepted.
  bool hello(const std::string& token = "", const std::string& dc = "dc") {
    const std::string nonce = random_bytes(kNonceBytes);
    if (!send_frame(MsgType::kHello, 1, encode_hello({nonce, dc}))) return false;
    auto f = read_frame();
    if (!f) return false;
    if (f->header.type == MsgType::kReply) return f->reply().status == sched::Status::kOk;
    if (f->header.type != MsgType::kChallenge) return false;
    const std::string theirs = decode_challenge(f->payload);
    const Transcript t{nonce, theirs, dc};
    if (!send_frame(MsgType::kAuth, 2, encode_auth(client_proof(token, t)))) return false;
    f = read_frame();
    return f && f->header.type == MsgType::kAuthOk &&
           decode_auth_ok(f->payload) == registry_proof(token, t);
  }
  // True once the registry closed this connection (reading and discarding what it sent
  // before); false if it is still open when the guard passes.
  bool closed_by_peer(int guard_ms = kGuardMs) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(guard_ms);
    for (;;) {
      buf_.clear();
      int r = fill_once(deadline);
      if (r == 0) return true;   // EOF or reset
      if (r < 0) return false;   // guard
    }
  }

 private:
  // 1: bytes read; 0: EOF/error; -1: the guard passed.
  int fill_once(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return -1;
      pollfd p{fd_.get(), POLLIN, 0};
      int n = ::poll(&p, 1, static_cast<int>(left.count()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) continue;
      char tmp[65536];
      ssize_t k = ::recv(fd_.get(), tmp, sizeof tmp, MSG_DONTWAIT);
      if (k > 0) {
        buf_.append(tmp, static_cast<size_t>(k));
        return 1;
      }
      if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      return 0;
    }
  }
  bool fill(std::chrono::steady_clock::time_point deadline) { return fill_once(deadline) == 1; }

  Fd fd_;
  std::string buf_;
};

}  // namespace thub::registry::test
