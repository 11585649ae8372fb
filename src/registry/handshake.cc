// The client's side of a registry handshake (handshake.h).
#include "src/registry/handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>

#include "src/common/crypto.h"

namespace thub::registry {

// Appends what `sock` has to `in` without blocking: 1 something came, 0 nothing now, -1 the
// peer closed or the socket failed.
int receive_some(int sock, ByteQueue& in) {
  char buf[65536];
  for (;;) {
    ssize_t k = ::recv(sock, buf, sizeof buf, MSG_DONTWAIT);
    if (k > 0) {
      in.append(buf, static_cast<size_t>(k));
      return 1;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
  }
}

// The next frame of the handshake into *h/*payload (a view valid until in.consume). A registry
// that accepted (the kernel does that even for a stopped process) but does not answer within
// the deadline is skipped like an unreachable one.
namespace {
void await_frame(HandshakeLink& l, const std::string& a, int64_t deadline, int64_t budget_ms, const char* what,
                 FrameHeader* h, std::string_view* payload) {
  for (;;) {
    // Before it has proven anything, a registry gets no more room than it gives a client.
    if (l.in.size() >= kHeaderBytes) {
      FrameHeader peek = decode_header(l.in.view().substr(0, kHeaderBytes));
      if (peek.length > kMaxHelloPayload) {
        throw Error(Code::kRegistry, "registry " + a + " answered " + what + " with a frame of " +
                                         std::to_string(peek.length) + " bytes");
      }
      if (l.in.size() >= kHeaderBytes + peek.length) {
        *h = peek;
        *payload = l.in.view().substr(kHeaderBytes, peek.length);
        return;
      }
    }
    int64_t left = deadline - steady_ms();
    if (left <= 0) {
      throw Error(Code::kRegistry, "registry " + a + " did not answer " + what + " within " +
                                       std::to_string(budget_ms) + " ms");
    }
    pollfd p{l.sock, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) > 0 && l.receive() < 0) {
      throw Error(Code::kRegistry, "registry " + a + " closed the connection during " + what);
    }
  }
}

}  // namespace

// Nothing else writes to the socket meanwhile: it is not yet the connection's.
void handshake(const ConnectionOptions& opts, HandshakeLink& l, const std::string& a, int64_t deadline,
               int64_t budget_ms, Transcript* authed) {
  const std::string nonce = random_bytes(kNonceBytes);
  l.send(MsgType::kHello, encode_hello(Hello{nonce, opts.datacenter}), a);
  FrameHeader h;
  std::string_view payload;
  await_frame(l, a, deadline, budget_ms, "HELLO", &h, &payload);
  auto refused = [&](const char* what) {
    sched::Reply r = decode_reply(payload);
    l.in.consume(kHeaderBytes + h.length);
    if (r.status == sched::Status::kAuth) return Error(Code::kAuth, "registry " + a + ": " + r.detail);
    if (r.status != sched::Status::kOk) return Error(Code::kRegistry, "registry " + a + ": " + r.detail);
    return Error(Code::kRegistry, "registry " + a + " answered " + what + " with an empty REPLY");
  };
  if (h.type == MsgType::kNotLeader) throw NotLeading(a, decode_not_leader(payload));
  if (h.type == MsgType::kReply) {
    sched::Reply r = decode_reply(payload);
    if (r.status != sched::Status::kOk) throw refused("HELLO");
    l.in.consume(kHeaderBytes + h.length);
    if (!opts.auth_token.empty() && opts.auth_mutual) {
      throw Error(Code::kAuth, "registry " + a +
                                   " asks for no auth token, so it cannot prove that it knows ours: refused "
                                   "(give the registry the token, or set auth_mutual=false to accept it)");
    }
    return;
  }
  if (h.type != MsgType::kChallenge) {
    throw Error(Code::kRegistry, "registry " + a + " answered HELLO with a " + type_name(h.type));
  }
  if (opts.auth_token.empty()) {
    throw Error(Code::kAuth, "registry " + a + " requires an auth token: set auth_token_file (or auth_token)");
  }
  const std::string theirs = decode_challenge(payload);
  l.in.consume(kHeaderBytes + h.length);
  const Transcript t{nonce, theirs, opts.datacenter};
  l.send(MsgType::kAuth, encode_auth(client_proof(opts.auth_token, t)), a);
  await_frame(l, a, deadline, budget_ms, "AUTH", &h, &payload);
  if (h.type == MsgType::kReply) throw refused("AUTH");
  if (h.type != MsgType::kAuthOk) {
    throw Error(Code::kRegistry, "registry " + a + " answered AUTH with a " + type_name(h.type));
  }
  const std::string proof = decode_auth_ok(payload);
  l.in.consume(kHeaderBytes + h.length);
  if (opts.auth_mutual && !constant_time_equal(proof, registry_proof(opts.auth_token, t))) {
    throw Error(Code::kAuth, "registry " + a +
                                 " could not prove that it knows the auth token: an impostor, or a registry "
                                 "with another token");
  }
  if (authed) *authed = t;
}

}  // namespace thub::registry
