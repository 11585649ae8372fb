// The client's side of a registry handshake (HELLO, and CHALLENGE/AUTH/AUTH_OK with a token:
// docs/protocol.md), over a socket that is not yet the connection's: the connection's own and
// the probes of earlier addresses each run one. Inside src/registry only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "src/common/status.h"
#include "src/registry/auth.h"
#include "src/registry/byte_queue.h"
#include "src/registry/connection.h"
#include "src/registry/protocol.h"
#include "src/registry/socket.h"

namespace thub::registry {

// Appends what `sock` has to `in` without blocking: 1 something came, 0 nothing now, -1 the
// peer closed or the socket failed.
int receive_some(int sock, ByteQueue& in);

// A registry that does not lead (NOT_LEADER): why, and who does ("" unknown).
class NotLeading : public Error {
 public:
  NotLeading(const std::string& address, const NotLeader& n)
      : Error(Code::kRegistry, "registry " + address + " does not lead: " + n.detail +
                                   (n.leader.empty() ? "" : "; the leader is " + n.leader)),
        leader(n.leader) {}
  std::string leader;
};

// One side of a handshake: a socket of our own and what came from it. The reader's own
// connection and a probe of an earlier address (which runs beside it) each have one.
struct HandshakeLink {
  int sock;
  ByteQueue& in;
  int receive() { return receive_some(sock, in); }
  void send(MsgType t, const std::string& payload, const std::string& a) {
    std::string f = encode_frame(t, 0, payload);
    if (!write_all(sock, f.data(), f.size())) throw Error(Code::kRegistry, "lost the connection to registry " + a);
  }
};

// HELLO with a fresh nonce of ours. A registry with a token answers CHALLENGE (its nonce); we
// answer AUTH (our HMAC over both nonces), it answers AUTH_OK (its own HMAC, which we check
// when auth_mutual) or refuses. The token itself never travels (docs/protocol.md). Throws
// Error(kRegistry/kAuth), NotLeading; *authed (when given) gets the transcript.
void handshake(const ConnectionOptions& opts, HandshakeLink& l, const std::string& a, int64_t deadline,
               int64_t budget_ms, Transcript* authed = nullptr);

}  // namespace thub::registry
