// The fuzz targets of the control plane (issue 13, item 5), deterministic for a seed:
//  - DecoderFuzzer: the frame header, every request payload (decode_event for each type, with
//    type swaps), HELLO, the 32-byte handshake fields, REPLY, OFFLOAD/DISCARD and the client's
//    descriptor, from valid seeds and structure-aware mutations;
//  - SessionFuzzer: whole sessions through the registry's own frame handler
//    (Server::Impl::handle_frames -> sched::Registry::step -> replies), stateful (it reuses
//    the member and lease ids it was given), with and without a token;
//  - SocketFuzzer: sessions over real TCP to a running Server, written in random pieces.
// Every input is checked against invariants (docs/security.md, "Fuzzing"); a violated one is a
// finding with the seed and input number that reproduce it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace thub::fuzz {

struct Outcome {
  uint64_t inputs = 0;    // messages (decoders) or sessions (server)
  uint64_t frames = 0;    // frames sent, for sessions
  uint64_t refused = 0;   // inputs refused (decode errors, error replies, closed connections)
  uint64_t largest_allocation = 0;  // the largest single allocation any input caused
  std::map<std::string, uint64_t> answers;  // sessions: "<REQUEST> <status>" counts, how deep they went
  std::vector<std::string> findings;
  void finding(const std::string& s) {
    if (findings.size() < 20) findings.push_back(s);
  }
};

class DecoderFuzzer {
 public:
  explicit DecoderFuzzer(uint64_t seed) : seed_(seed) {}
  void run(uint64_t inputs, Outcome* out);

 private:
  uint64_t seed_;
};

class SessionFuzzer {
 public:
  SessionFuzzer(uint64_t seed, bool with_token);
  ~SessionFuzzer();
  void run(uint64_t sessions, Outcome* out);

  struct State;

 private:
  std::unique_ptr<State> s_;
};

class SocketFuzzer {
 public:
  SocketFuzzer(uint64_t seed, bool with_token);
  ~SocketFuzzer();
  void run(uint64_t sessions, Outcome* out);

  struct State;

 private:
  std::unique_ptr<State> s_;
};

// The client's side: registry::Connection's handshake and reader against an impostor or
// broken registry that answers HELLO with mutated CHALLENGE / AUTH_OK / REPLY frames, knowing
// the token or not, then sends mutated orders and replies. Only thub::Error may come out, and
// a client with a token must never accept a registry that did not prove it.
class HostileRegistryFuzzer {
 public:
  explicit HostileRegistryFuzzer(uint64_t seed) : seed_(seed) {}
  void run(uint64_t sessions, Outcome* out);

 private:
  uint64_t seed_;
};

// The transport's peer-facing formats (issue 19, item 2): the worker address and packed rkey
// codecs (every version; a decoder refuses with Error(kTransport) or returns what re-encodes
// to exactly its input), the socket-read server against hostile request streams (it answers
// exactly what the protocol says, never a byte it does not serve, and keeps serving the real
// reader), and the socket reader against a hostile server (each read succeeds with exactly the
// bytes sent or fails, every read completes, nothing is written outside its destination).
class TransportCodecFuzzer {
 public:
  explicit TransportCodecFuzzer(uint64_t seed) : seed_(seed) {}
  void run(uint64_t inputs, Outcome* out);

 private:
  uint64_t seed_;
};

class ReadServerFuzzer {  // inputs: sessions; frames: the requests they carried
 public:
  explicit ReadServerFuzzer(uint64_t seed);
  ~ReadServerFuzzer();
  void run(uint64_t sessions, Outcome* out);

  struct State;

 private:
  uint64_t seed_;
  std::unique_ptr<State> s_;
};

class ReadClientFuzzer {  // inputs: sessions; frames: the reads they asked for
 public:
  explicit ReadClientFuzzer(uint64_t seed);
  ~ReadClientFuzzer();
  void run(uint64_t sessions, Outcome* out);

  struct State;

 private:
  uint64_t seed_;
  std::unique_ptr<State> s_;
};

}  // namespace thub::fuzz
