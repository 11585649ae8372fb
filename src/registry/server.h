// The registry service: sched::Registry behind a TCP server. One thread polls the
// listening socket and every client connection, turns frames into sched events, and
// sends the actions back. A malformed frame gets an error reply and closes that
// connection only; the registry keeps serving the others. Every resource a peer can make
// the registry hold (connections, buffered input and output, time) is bounded before the
// peer has authenticated, and fairly shared after (docs/protocol.md, "Limits").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "sched/types.h"

namespace thub {
class InfoMap;
}

namespace thub::registry {

struct ServerOptions {
  // host:port (port 0: ephemeral; 0.0.0.0 or * for every interface); "": the one address the
  // registry advertises (advertised_host: the first non-loopback IPv4 interface), port 0.
  std::string listen;
  std::string auth_token;             // when set, clients must prove they know it (CHALLENGE, AUTH)
  sched::Config sched;
  // How often deadlines are checked while anything waits on time. An idle registry (every
  // connection past its handshake with nothing half read or unsent, no leadership to keep,
  // nothing deferred or held in sched/) sleeps until its next deadline (sched::Registry::
  // quiet_until(): a client's heartbeat deadline, a lease's progress) instead, at most
  // max_idle_wait_ms: it wakes for frames, not for the clock.
  int tick_ms = 100;
  int max_idle_wait_ms = 5000;
  bool verbose = false;              // log connections and protocol errors to stderr

  // Connections beyond these are refused at accept (an error reply, then closed).
  int max_connections = 8192;           // in all
  int max_connections_per_host = 1024;  // from one peer IP address
  // A new connection must have completed its HELLO within this.
  int hello_timeout_ms = 10000;
  // A partial frame that receives no byte, or queued replies that the peer takes no byte
  // of, for this long: the connection is closed.
  int frame_timeout_ms = 30000;
  // Replies queued for one connection beyond `output_pause_bytes`: its requests are not
  // read until it has read its replies (back-pressure); beyond `max_output_bytes` it is
  // closed. A single reply may be as large as a frame, so the hard cap is well above that.
  size_t output_pause_bytes = 4u << 20;
  size_t max_output_bytes = 128u << 20;
  // Fairness: per connection and loop turn, at most this many frames and bytes read.
  int frames_per_turn = 64;
  size_t read_bytes_per_turn = 256u << 10;
  // INFO's answer (SNAPSHOT) is cut to this many bytes, marked truncated (at least 1 KiB, at
  // most a frame): a registry of any size answers with a bounded reply.
  size_t max_snapshot_bytes = 4u << 20;  // kMaxSnapshotBytes
  // accept() failing for lack of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM)
  // pauses accepting for this long instead of retrying at once.
  int accept_pause_ms = 100;

  // One registry leads at a time (src/registry/leadership.h). `primary` ("host:port"): this
  // registry is a backup that serves only while the primary does not answer (asked every
  // primary_probe_ms). `election` ("etcd://host:port[,host:port]/prefix"): it serves only while
  // it holds the prefix's leader key in etcd, under a lease of election_ttl_s. Neither: it leads.
  std::string primary;
  int primary_probe_ms = 500;
  std::string election;
  int election_ttl_s = 5;

  // The registry's info keys (registry scope in src/common/info_keys.h: THUB_Init's for the
  // embedded registry, tensorhub-registry's flags); the rest keep the defaults above, which
  // match the table's (tests/registry/server_options_test.cc). Throws Error(kArg).
  static ServerOptions from_info(const InfoMap& info);
};

// What the registry holds for its peers now (and at most, since it started).
struct ServerStats {
  uint64_t connections = 0;        // open
  uint64_t before_hello = 0;       // of those, not yet past the handshake (HELLO, and AUTH with a token)
  uint64_t paused = 0;             // of those, not read: too many unread replies
  uint64_t input_bytes = 0;        // buffered requests, not yet handled
  uint64_t output_bytes = 0;       // queued replies, not yet taken by the kernel
  uint64_t peak_input_bytes = 0;
  uint64_t peak_output_bytes = 0;
  uint64_t refusals = 0;           // connections refused or closed for a limit, bad input included
  uint64_t accept_pauses = 0;      // accept() failed for lack of descriptors or memory
  uint64_t frames = 0;             // frames handled
  uint64_t internal_errors = 0;    // bugs caught (an exception in the loop, the state machine, a reply): should stay 0
  bool leading = true;             // serving clients (src/registry/leadership.h)
  uint64_t leadership_changes = 0; // how often it started or stopped leading
  uint64_t turns = 0;              // turns of the serving loop (its wake-ups and busy turns)
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
  // Thread-safe; updated once per turn of the serving loop.
  [[nodiscard]] ServerStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace thub::registry
