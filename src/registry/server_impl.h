// The registry service's insides (src/registry/server.cc), visible to its tests: the fuzz
// harness (tests/fuzz/) drives the frame handler of a connection without a socket, exactly as
// the serving loop does after a read. Nothing else includes this.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "sched/registry.h"
#include "src/registry/auth.h"
#include "src/registry/byte_queue.h"
#include "src/registry/leadership.h"
#include "src/registry/protocol.h"
#include "src/registry/refusal_log.h"
#include "src/registry/server.h"
#include "src/registry/socket.h"

namespace thub::registry {

struct Server::Impl {
  // A connection's handshake: HELLO first; with a token, then CHALLENGE -> AUTH; only a
  // connection that is ready is a sched client. Before that, the header alone decides whether
  // a frame is read, and nothing but the challenge and error replies is ever sent.
  enum class Phase { kHello, kChallenged, kReady };

  struct Conn {
    Fd fd;
    std::string host;        // peer IP address (per-host cap)
    ByteQueue in;
    ByteQueue out;
    Phase phase = Phase::kHello;
    std::string client_nonce;    // from HELLO, while challenged
    std::string registry_nonce;  // ours, while challenged
    std::string datacenter;      // from HELLO
    FrameMac mac_in, mac_out;    // after AUTH_OK (a token): every frame either way is MACed
    bool closing = false;    // flush `out`, then close
    bool failed = false;     // close now, without flushing
    bool gone = false;       // the peer closed or the socket failed
    bool more = false;       // stopped at the per-turn frame budget with complete frames left
    int64_t hello_deadline_ms = 0;
    int64_t in_progress_ms = 0;   // last byte received, or reading resumed
    int64_t out_progress_ms = 0;  // last byte sent, or output became non-empty
  };

  ServerOptions opts;
  sched::Registry reg;
  Fd listener;
  std::string address;
  int wake[2] = {-1, -1};
  std::atomic<bool> stop{false};
  std::thread thread;
  std::map<sched::ClientId, Conn> conns;
  std::map<std::string, int> per_host;
  RecentNonces hello_nonces;        // with a token: a HELLO repeating one is a replay
  sched::ClientId next_client = 1;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  int64_t now_ms = 0;               // the loop's clock (steady, ms), read once per turn
  int64_t accept_paused_until_ms = 0;
  std::unique_ptr<Leadership> leadership;  // nullptr: leads alone
  bool leading = true;              // as of this turn
  RefusalLog refusals;
  ServerStats counters;             // this thread's running counts
  mutable std::mutex stats_mu;
  ServerStats published;            // the snapshot stats() returns

  explicit Impl(const ServerOptions& o);  // binds nothing: Server's constructor does
  sched::Time now() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
  }
  void serve();
  void turn();
  int idle_wait_ms() const;  // how long turn() may wait for the sockets when no work is left
  void accept_some();
  void check_leadership();  // once per turn: tells and closes every client when it stops leading
  void send_not_leader(sched::ClientId id, Conn& c, uint64_t req);
  void refuse_connection(int fd, const std::string& host, const std::string& why);
  void serve_conn(sched::ClientId id, Conn& c, short revents);
  [[nodiscard]] bool paused(const Conn& c) const { return c.out.size() > opts.output_pause_bytes; }
  [[nodiscard]] bool wants_input(const Conn& c) const;
  void read_some(Conn& c);
  bool flush(Conn& c);  // true when bytes went out
  void handle_frames(sched::ClientId id, Conn& c);
  void handle_frame(sched::ClientId id, Conn& c, const FrameHeader& h, std::string_view payload);
  void on_hello(sched::ClientId id, Conn& c, const FrameHeader& h, std::string_view payload);
  void on_auth(sched::ClientId id, Conn& c, const FrameHeader& h, std::string_view payload);
  void admit(sched::ClientId id, Conn& c);
  void check_deadlines(sched::ClientId id, Conn& c);
  void apply(const sched::Event& ev);
  template <typename Encode>
  void queue(sched::ClientId id, const char* what, Encode&& encode);
  void send_reply(const sched::Reply& r, size_t max_detail = kMaxDetailBytes);
  void reject(sched::ClientId id, Conn& c, uint64_t req, sched::Status st, const std::string& kind,
              const std::string& why);
  void refuse(sched::ClientId id, uint64_t req, sched::Status st, const std::string& kind, const std::string& why);
  void fail(sched::ClientId id, Conn& c, const std::string& kind, const std::string& why);
  void sweep();
  void drop(sched::ClientId id);
  void publish_stats();
  [[nodiscard]] std::string describe_server() const;
  void log(const std::string& s) const {
    if (opts.verbose) std::fprintf(stderr, "tensorhub-registry: %s\n", s.c_str());
  }
  void refusal(const std::string& kind, const std::string& why) {
    ++counters.refusals;
    if (kind == "internal") ++counters.internal_errors;
    refusals.add(kind, why, now_ms);
  }
};

}  // namespace thub::registry
