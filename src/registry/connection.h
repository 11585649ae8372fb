// A client's connection to the registry: request/reply with request ids (replies may be
// deferred by the registry for as long as a drain or a busy source takes), heartbeats
// from a reader thread, and registry-initiated messages (retention offload orders).
// Nothing waits on the registry without a bound: HELLO has a deadline, a registry that
// sends nothing (not even heartbeat answers) for registry_timeout_ms is lost and the next
// address is tried, and requests it answers at once have a default deadline. The list is in
// order of preference: the first address that answers leads (the primary while it lives), a
// client on a backup moves back when an earlier one answers again, and a client that lost
// every registry keeps trying in the background.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sched/snapshot.h"
#include "sched/types.h"
#include "src/common/status.h"

namespace thub::registry {

struct ConnectionOptions {
  std::vector<std::string> addresses;  // "host:port", tried in order
  std::string etcd;                 // "etcd://host:port[,host:port]/prefix": instead of `addresses`, the
                                    // registry that leads there, read before every connection attempt
  std::string auth_token;           // "": the client cannot answer a registry's CHALLENGE
  bool auth_mutual = true;          // with a token: the registry must prove it knows it too
  std::string datacenter = "default";
  int heartbeat_ms = 1000;
  int connect_timeout_ms = 5000;    // per address: TCP connect, then the HELLO exchange
  int reconnect_ms = 10000;         // after a loss, keep trying the address list this long; then
                                    // requests fail at once (kGone) and the list is tried every
                                    // second in the background until one answers (kBack)
  int probe_ms = 2000;              // on a backup: ask the earlier addresses this often and move
                                    // back to the first that answers (0: never)
  int registry_timeout_ms = 5000;   // no byte from the registry, and none of ours taken by it,
                                    // for this long: it is lost, as if it had closed (0: never)
  int request_timeout_ms = 30000;   // default deadline of requests answered at once (0: none)
};

// Whether a registry answers at `address` within `budget_ms`: a whole handshake (with opts'
// token; a registry that does not lead does not answer). A backup asks its primary so, and a
// client on a backup the earlier addresses. *why: otherwise, why not.
bool registry_answers(const ConnectionOptions& opts, const std::string& address, int budget_ms,
                      std::string* why = nullptr);

// A registry-initiated order: retention offload (kOffload) or discard (kDiscard).
struct Order {
  bool offload = true;
  sched::MemberId member = 0;
  sched::Version version = -1;
};

// The outcome of an asynchronous request: the registry's reply (code kSuccess), or why there
// is none (kRegistry: the connection was lost or is not up; kTimeout; kArg: over the limits).
struct RequestResult {
  RequestResult(Code c = Code::kSuccess, sched::Reply r = {}, std::string d = {}, std::string p = {})
      : code(c), reply(std::move(r)), detail(std::move(d)), payload(std::move(p)) {}
  Code code;
  sched::Reply reply;
  std::string detail;
  std::string payload;  // an answer other than a REPLY (INFO's SNAPSHOT): its payload
};

// What became of the connection to the registry.
enum class ConnectionEvent {
  kLost,  // lost; reconnecting to the address list (requests in flight failed with kRegistry)
  kBack,  // connected again (to a registry that knows nothing of this client)
  kGone,  // no registry answered within reconnect_ms: requests fail at once while the list is
          // still tried in the background (a kBack follows when one answers)
};

class Connection {
 public:
  // Connects to the first reachable address and completes the handshake (HELLO; with a token
  // CHALLENGE, AUTH, AUTH_OK). Throws Error(kRegistry), or Error(kAuth) when a registry refuses
  // our proof, asks for a token we do not have, or (auth_mutual) cannot prove it knows ours.
  explicit Connection(const ConnectionOptions& opts);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Send a request and wait for its reply, at most timeout_ms (Error(kTimeout)). With
  // timeout_ms 0 the default applies (kNoDeadline: none): request_timeout_ms for requests the registry answers
  // at once; none for those it may defer (REPLICATE, SOURCE_FAILED, UNPUBLISH: drains and
  // busy sources last as long as transfers), which wait as long as the registry is alive.
  // Throws Error(kRegistry) if the connection is lost (or the registry falls silent) before
  // the reply, Error(kArg) for a request over the registry's size limits. While a
  // reconnection is under way, waits for it first.
  sched::Reply call(const sched::Event& ev, int64_t timeout_ms = 0);
  // The same, without waiting: `done` runs once, with the reply or why there is none, on the
  // connection's reader thread (replies, timeouts, a lost connection) or on the caller's (a
  // request that could not be sent: not connected, over the limits). It must not block.
  // Does not wait out a reconnection: then it fails at once with kRegistry.
  // With `for_generation` set, the request is refused (kRegistry) unless the connection is
  // still at that generation: a request with member ids of an earlier registry never reaches
  // the next one.
  static constexpr uint64_t kAnyGeneration = ~uint64_t{0};
  // timeout_ms: > 0 a deadline; 0 request_timeout_ms for requests answered at once, none for
  // those the registry may defer; kNoDeadline none (as long as the registry is alive).
  static constexpr int64_t kNoDeadline = -1;
  void send(const sched::Event& ev, int64_t timeout_ms, std::function<void(RequestResult)> done,
            uint64_t for_generation = kAnyGeneration);
  // The registry's state as text (debugging).
  std::string describe(int64_t timeout_ms = 5000);
  // The registry's state as values, at most `max_entries` models, holders and transfers each
  // (0: the registry's caps): tensorhub-info --registry. Read-only. Throws Error(kRegistry)
  // for a lost connection or an answer that does not decode, Error(kTimeout).
  sched::Snapshot snapshot(uint32_t max_entries = 0, int64_t timeout_ms = 0);
  // Registry-initiated orders: `fn` runs on the reader thread and must not block.
  void on_order(std::function<void(const Order&)> fn);
  // The connection's life: `fn(event, generation, why)` runs on the reader thread and must not
  // block. After kBack the registry knows nothing of this client any more (stateless
  // failover), so members must be opened and published again.
  void on_event(std::function<void(ConnectionEvent, uint64_t, const std::string&)> fn);
  [[nodiscard]] std::string address() const;
  [[nodiscard]] bool connected() const;
  // Incremented by every successful reconnection.
  [[nodiscard]] uint64_t generation() const;
  // Blocks while a reconnection is under way; returns the generation then.
  uint64_t wait_connected();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace thub::registry
