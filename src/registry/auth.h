// The control plane's challenge-response over the shared token (docs/protocol.md,
// "Authentication"; docs/security.md). The token never travels: each side proves it knows it
// with an HMAC-SHA256 over both sides' fresh nonces, under a label per direction, so that a
// proof is good for one connection and one direction only. No sockets here.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_set>

#include "src/registry/protocol.h"  // kNonceBytes, kProofBytes

namespace thub::registry {

// A token file larger than this is not a token (and is not read whole).
constexpr size_t kMaxTokenFileBytes = 64u << 10;

// What both proofs cover: the client's nonce (HELLO), the registry's nonce (CHALLENGE) and the
// datacenter the client announced in its HELLO.
struct Transcript {  // copies, not views: a transcript built from temporaries stays valid
  std::string client_nonce;
  std::string registry_nonce;
  std::string datacenter;
};

// HMAC-SHA256(token, label || transcript), 32 bytes; the labels differ per direction, so a
// registry's proof is never a client's and no proof can be reflected back.
std::string client_proof(std::string_view token, const Transcript& t);
std::string registry_proof(std::string_view token, const Transcript& t);

// The client nonces of the last `capacity` HELLOs a registry with a token accepted: a HELLO
// that repeats one is a replay (a client draws 32 fresh bytes for every connection) and is
// refused at once. The proofs alone already defeat a replay (the registry's nonce is fresh, so
// a recorded AUTH answers nothing); this refuses it one message earlier, and says so. Oldest
// forgotten first, so a peer flooding HELLOs can make it forget, never grow.
class RecentNonces {
 public:
  static constexpr size_t kDefaultCapacity = 16384;  // about 1.5 MiB at most
  explicit RecentNonces(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}
  // True if `nonce` is among the remembered ones; otherwise remembers it and returns false.
  bool seen_before(const std::string& nonce);
  [[nodiscard]] size_t size() const { return order_.size(); }

 private:
  size_t capacity_;
  std::unordered_set<std::string> set_;
  std::deque<std::string> order_;
};

// After a handshake with a token, every frame either way carries a MAC (protocol 4,
// docs/protocol.md "Authentication"): the first kMacBytes of HMAC-SHA256 under a key of
// its direction, derived from the token and the handshake's transcript, over the frame's
// sequence number in that direction and the frame itself (its header counting the tag). So a
// relay that lacks the token can neither change a frame nor drop, replay or reorder one.
constexpr size_t kMacBytes = 16;
std::string frame_key(std::string_view token, const Transcript& t, bool client_to_registry);

// One direction of one connection. Off (no key): frames pass unchanged.
class FrameMac {
 public:
  FrameMac() = default;
  explicit FrameMac(std::string key) : key_(std::move(key)) {}
  [[nodiscard]] bool on() const { return !key_.empty(); }
  // `frame`, a whole frame from encode_frame: its length grows by kMacBytes, the tag is
  // appended. Throws CodecError if it would exceed kMaxPayload.
  void seal(std::string& frame);
  // `header` (kHeaderBytes, as received) and the payload its length announces: the payload
  // without its tag, or CodecError when the tag is missing or wrong.
  std::string_view open(std::string_view header, std::string_view payload);
  [[nodiscard]] uint64_t frames() const { return seq_; }

 private:
  std::string key_;
  uint64_t seq_ = 0;
  std::string tag(std::string_view header, std::string_view body) const;
};

// The token from the info keys auth_token and auth_token_file (either, not both: Error(kArg)).
std::string token_from(const std::string& token, const std::string& file);

// The token kept in `path`: refused (Error(kArg), saying why) if it is not a regular file,
// if group or others may read or write it (as ssh refuses a private key: chmod 600), if it is
// empty or larger than kMaxTokenFileBytes. One trailing newline ("\n" or "\r\n") is stripped.
std::string read_token_file(const std::string& path);

}  // namespace thub::registry
