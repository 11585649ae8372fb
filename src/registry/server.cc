#include "src/registry/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "sched/registry.h"
#include "src/common/codec.h"
#include "src/common/crypto.h"
#include "src/common/status.h"
#include "src/registry/auth.h"
#include "src/registry/byte_queue.h"
#include "src/registry/protocol.h"
#include "src/registry/refusal_log.h"
#include "src/registry/server_impl.h"
#include "src/registry/socket.h"

namespace thub::registry {

namespace {
// Status of a refusal for the registry's own limits: THUB_ERR_REGISTRY (not a sched status:
// the client tries its next address).
constexpr auto kRefused = static_cast<sched::Status>(-6);

}  // namespace

Server::Impl::Impl(const ServerOptions& o) : opts(o), reg(o.sched), now_ms(steady_ms()) {}

Server::Server(const ServerOptions& opts) : impl_(std::make_unique<Impl>(opts)) {
  auto positive = [](long long v, const char* name) {
    if (v < 1) throw Error(Code::kArg, std::string("registry option ") + name + " must be >= 1");
  };
  positive(opts.max_connections, "max_connections");
  positive(opts.max_connections_per_host, "max_connections_per_host");
  positive(opts.hello_timeout_ms, "hello_timeout_ms");
  positive(opts.frame_timeout_ms, "frame_timeout_ms");
  positive(opts.frames_per_turn, "frames_per_turn");
  positive(static_cast<long long>(opts.read_bytes_per_turn), "read_bytes_per_turn");
  positive(opts.accept_pause_ms, "accept_pause_ms");
  positive(opts.tick_ms, "tick_ms");
  positive(opts.max_idle_wait_ms, "max_idle_wait_ms");
  if (opts.max_snapshot_bytes < 1024 || opts.max_snapshot_bytes > kMaxPayload) {
    throw Error(Code::kArg, "registry option max_snapshot_bytes must be between 1 KiB and 64 MiB");
  }
  if (opts.max_output_bytes < opts.output_pause_bytes) {
    throw Error(Code::kArg, "registry option max_output_bytes must be >= output_pause_bytes");
  }
  HostPort hp = parse_host_port(opts.listen.empty() ? advertised_host("") + ":0" : opts.listen);
  uint16_t port = 0;
  impl_->listener = listen_tcp(hp, &port);
  fcntl(impl_->listener.get(), F_SETFL, fcntl(impl_->listener.get(), F_GETFL) | O_NONBLOCK);
  impl_->address = advertised_host(hp.host) + ":" + std::to_string(port);
  if (pipe2(impl_->wake, O_CLOEXEC | O_NONBLOCK) != 0) throw Error(Code::kNoMemory, "pipe2 failed");
  // Before the first client: whether this registry leads is known once this returns.
  impl_->leadership = start_leadership(opts, impl_->address);
  if (impl_->leadership) {
    impl_->leading = impl_->leadership->leading(steady_ms());
    impl_->counters.leading = impl_->published.leading = impl_->leading;
    impl_->log(impl_->leadership->describe());
  }
}

Server::~Server() {
  stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->leadership.reset();  // an elected leader resigns now: a standby need not wait out the lease
  ::close(impl_->wake[0]);
  ::close(impl_->wake[1]);
}

void Server::start() {
  impl_->thread = std::thread([this] { impl_->serve(); });
}
void Server::run() { impl_->serve(); }
void Server::stop() {
  impl_->stop = true;
  char c = 1;
  [[maybe_unused]] ssize_t n = ::write(impl_->wake[1], &c, 1);
}
std::string Server::address() const { return impl_->address; }
ServerStats Server::stats() const {
  std::lock_guard<std::mutex> lk(impl_->stats_mu);
  return impl_->published;
}

void Server::Impl::serve() {
  auto last_tick = now();
  while (!stop) {
    try {
      turn();
      if (now() - last_tick >= static_cast<sched::Time>(opts.tick_ms) * 1000) {
        last_tick = now();
        apply(sched::Tick{});
        sweep();
      }
      publish_stats();
    } catch (const std::exception& e) {
      // Not one client's doing (those are caught per connection): log, back off a little
      // (so that a failing poll cannot spin), and go on serving.
      refusal("internal", std::string("internal error in the serving loop: ") + e.what());
      ::poll(nullptr, 0, 10);
    }
  }
  conns.clear();
  per_host.clear();
}

// One turn: wait for the sockets (or not at all while work is left), then give each
// connection its share: flush replies, read a bounded amount, handle a bounded number of frames.
void Server::Impl::turn() {
  std::vector<pollfd> fds;
  std::vector<sched::ClientId> ids;
  fds.reserve(conns.size() + 2);
  ids.reserve(conns.size());
  now_ms = steady_ms();
  bool accepting = now_ms >= accept_paused_until_ms;
  fds.push_back({accepting ? listener.get() : -1, POLLIN, 0});
  fds.push_back({wake[0], POLLIN, 0});
  bool work_left = false;
  for (auto& [id, c] : conns) {
    short ev = wants_input(c) ? POLLIN : 0;
    if (!c.out.empty()) ev |= POLLOUT;
    fds.push_back({c.fd.get(), ev, 0});
    ids.push_back(id);
    work_left = work_left || (c.more && !c.closing && !paused(c));
  }
  ++counters.turns;
  int n = ::poll(fds.data(), fds.size(), work_left ? 0 : idle_wait_ms());
  if (n < 0 && errno != EINTR) throw Error(Code::kInternal, std::string("poll: ") + std::strerror(errno));
  now_ms = steady_ms();
  if (n > 0 && (fds[1].revents & POLLIN)) {
    char buf[64];
    while (::read(wake[0], buf, sizeof buf) > 0) {
    }
  }
  check_leadership();
  if (n > 0 && accepting && (fds[0].revents & POLLIN)) accept_some();
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = conns.find(ids[i]);
    if (it == conns.end()) continue;
    // Nothing one client does may end the loop that serves all of them.
    try {
      serve_conn(ids[i], it->second, n > 0 ? fds[i + 2].revents : 0);
    } catch (const std::exception& e) {
      auto again = conns.find(ids[i]);
      if (again != conns.end()) fail(ids[i], again->second, "internal", std::string("internal error: ") + e.what());
    }
  }
  sweep();
}

// tick_ms while anything of the server's own waits on the clock (a handshake's or a frame's
// deadline, a pause of accept, leadership's lease or probe) or sched/ may act at any tick;
// otherwise until sched/'s next deadline, at most max_idle_wait_ms. Never below tick_ms:
// deadlines are checked as often as before, and an idle registry takes no more wake-ups
// than its clients' heartbeats and its deadlines.
int Server::Impl::idle_wait_ms() const {
  if (leadership || now_ms < accept_paused_until_ms) return opts.tick_ms;
  for (const auto& [id, c] : conns)
    if (c.phase != Phase::kReady || c.closing || c.failed || c.gone || !c.in.empty() || !c.out.empty())
      return opts.tick_ms;
  const sched::Time t = now();
  const sched::Time until = reg.quiet_until();
  if (until <= t) return opts.tick_ms;
  const int64_t ms = until == sched::Registry::kNever ? opts.max_idle_wait_ms : (until - t + 999) / 1000;
  return static_cast<int>(std::clamp<int64_t>(ms, opts.tick_ms, std::max(opts.tick_ms, opts.max_idle_wait_ms)));
}

// A registry that stops leading tells every client who leads instead (NOT_LEADER) and closes
// it; what it knew goes with them (a fresh sched state), so that if it leads again later it
// starts as a registry that takes over does. While it does not lead, HELLO is answered so.
// Checked before any frame of the turn is handled: a registry resumed after a stop longer
// than its lease serves nothing it read meanwhile.
void Server::Impl::check_leadership() {
  if (!leadership) return;
  const bool now_leading = leadership->leading(now_ms);
  if (now_leading == leading) return;
  leading = now_leading;
  counters.leading = leading;
  ++counters.leadership_changes;
  // Always logged (rare, and what an operator looks for first).
  std::fprintf(stderr, "tensorhub-registry: %s: %s\n", leading ? "leading" : "stopped leading",
               leadership->describe().c_str());
  if (leading) return;
  for (auto& [id, c] : conns) {
    if (c.phase == Phase::kReady) {
      c.phase = Phase::kHello;  // so that its drop does not reach the fresh state
      apply(sched::Disconnect{id});
    }
  }
  for (auto& [id, c] : conns) send_not_leader(id, c, 0);
  reg = sched::Registry(opts.sched);
}

void Server::Impl::send_not_leader(sched::ClientId id, Conn& c, uint64_t req) {
  const NotLeader n = leadership->elsewhere();
  queue(id, "NOT_LEADER", [&] { return encode_frame(MsgType::kNotLeader, req, encode_not_leader(n)); });
  c.closing = true;
  c.more = false;
  c.in.clear();
}

void Server::Impl::accept_some() {
  for (int k = 0; k < 64 && !stop; ++k) {  // a bounded batch: the others get their turn too
    sockaddr_in sa{};
    socklen_t len = sizeof sa;
    int fd = ::accept4(listener.get(), reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // Out of descriptors or memory (or anything else that would fail again at once): the
      // listener stays readable, so retrying now would spin. Pause accepting.
      int e = errno;
      accept_paused_until_ms = now_ms + opts.accept_pause_ms;
      ++counters.accept_pauses;
      refusal("accept", std::string("cannot accept connections: ") + std::strerror(e) + " (" +
                            std::to_string(conns.size()) + " open); pausing accepts for " +
                            std::to_string(opts.accept_pause_ms) + " ms");
      return;
    }
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
    std::string host = ip;
    if (conns.size() >= static_cast<size_t>(opts.max_connections)) {
      refuse_connection(fd, host, "the registry has " + std::to_string(conns.size()) +
                                      " connections (max_connections " + std::to_string(opts.max_connections) + ")");
      continue;
    }
    int& from_host = per_host[host];
    if (from_host >= opts.max_connections_per_host) {
      refuse_connection(fd, host, "host " + host + " has " + std::to_string(from_host) +
                                      " connections (max_connections_per_host " +
                                      std::to_string(opts.max_connections_per_host) + ")");
      continue;
    }
    ++from_host;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // replies are small and latency-bound
    sched::ClientId id = next_client++;
    Conn& c = conns[id];
    c.fd = Fd(fd);
    c.host = host;
    c.hello_deadline_ms = now_ms + opts.hello_timeout_ms;
    c.in_progress_ms = now_ms;
    log("client " + std::to_string(id) + " connected from " + host);
  }
}

// Best effort: say why, then close. The peer gets THUB_ERR_REGISTRY and tries its next address.
void Server::Impl::refuse_connection(int fd, const std::string& host, const std::string& why) {
  Fd f(fd);
  refusal("connections", "refused a connection from " + host + ": " + why);
  sched::Reply r{};
  r.status = kRefused;
  r.detail = "the registry refused the connection: " + why;
  std::string frame = encode_frame(MsgType::kReply, 0, encode_reply(r));
  [[maybe_unused]] ssize_t k = ::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  // Whatever the peer sent already (its HELLO) is read away: closing with unread input
  // would reset the connection and could discard the reply before the peer reads it.
  char scratch[4096];
  for (int i = 0; i < 4 && ::recv(fd, scratch, sizeof scratch, MSG_DONTWAIT) > 0; ++i) {
  }
}

bool Server::Impl::wants_input(const Conn& c) const {
  if (c.closing || c.failed || c.gone || paused(c)) return false;
  if (c.more) return false;  // complete frames are waiting: the kernel buffers the rest
  // Before authentication, no more than one handshake frame is ever buffered.
  return c.phase == Phase::kReady || c.in.size() < kHeaderBytes + kMaxHelloPayload;
}

void Server::Impl::serve_conn(sched::ClientId id, Conn& c, short revents) {
  if (c.failed || c.gone) return;
  bool sent = (revents & POLLOUT) && flush(c);
  if (c.gone) return;
  if ((revents & (POLLIN | POLLHUP | POLLERR)) && wants_input(c)) read_some(c);
  if (c.gone) return;
  handle_frames(id, c);
  if (!c.out.empty()) sent = flush(c) || sent;  // most replies go out now, without waiting a turn
  // A client we stopped reading (its replies are unread) cannot be heard: its heartbeats wait
  // in our socket. That it takes our bytes is its sign of life until we read again.
  if (sent && c.phase == Phase::kReady && !c.gone && paused(c)) apply(sched::Heartbeat{id});
  check_deadlines(id, c);
  // While we hold its input back (frames waiting, replies unread, closing), a partial frame
  // is our doing, not the peer's: its clock starts when we read again.
  if (!wants_input(c)) c.in_progress_ms = now_ms;
}

void Server::Impl::read_some(Conn& c) {
  char buf[65536];
  size_t budget = opts.read_bytes_per_turn;
  while (budget > 0) {
    size_t want = std::min(budget, sizeof buf);
    if (c.phase != Phase::kReady) {
      size_t cap = kHeaderBytes + kMaxHelloPayload;
      if (c.in.size() >= cap) break;
      want = std::min(want, cap - c.in.size());
    }
    ssize_t k = ::recv(c.fd.get(), buf, want, MSG_DONTWAIT);
    if (k > 0) {
      c.in.append(buf, static_cast<size_t>(k));
      c.in_progress_ms = now_ms;
      budget -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    c.gone = true;  // EOF or error: the client is gone
    break;
  }
}

bool Server::Impl::flush(Conn& c) {
  bool sent = false;
  while (!c.out.empty()) {
    std::string_view v = c.out.view();
    ssize_t k = ::send(c.fd.get(), v.data(), v.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      c.out.consume(static_cast<size_t>(k));
      c.out_progress_ms = now_ms;
      sent = true;
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return sent;
    c.gone = true;
    return sent;
  }
  return sent;
}

void Server::Impl::handle_frames(sched::ClientId id, Conn& c) {
  c.more = false;
  for (int n = 0; !c.closing && !c.failed; ++n) {
    std::string_view v = c.in.view();
    if (v.size() < kHeaderBytes) return;
    if (paused(c)) {
      // Frames already read wait for the replies to drain; then they are handled at once,
      // not when the socket next has input (there may be none: they were read already).
      c.more = true;
      return;
    }
    FrameHeader h;
    try {
      h = decode_header(v.substr(0, kHeaderBytes));
    } catch (const CodecError& e) {
      return reject(id, c, 0, sched::Status::kArg, "frame", std::string("malformed frame: ") + e.what());
    }
    // Before authentication the header alone decides: no payload is awaited that the next
    // handshake message cannot be, and no request is read, let alone answered.
    if (c.phase == Phase::kHello && h.type != MsgType::kHello) {
      return reject(id, c, h.req, sched::Status::kState, "hello", "the first message must be HELLO");
    }
    if (c.phase == Phase::kChallenged && h.type != MsgType::kAuth) {
      return reject(id, c, h.req, sched::Status::kAuth, "auth",
                    std::string("not authenticated: a ") + type_name(h.type) +
                        " before the AUTH that must answer the registry's CHALLENGE");
    }
    if (c.phase != Phase::kReady && h.length > kMaxHelloPayload) {
      return reject(id, c, h.req, sched::Status::kArg, "hello",
                    std::string("a ") + type_name(h.type) + " of " + std::to_string(h.length) + " bytes (at most " +
                        std::to_string(kMaxHelloPayload) + ")");
    }
    if (v.size() < kHeaderBytes + h.length) return;
    if (n == opts.frames_per_turn) {
      c.more = true;  // fairness: the others get their turn first
      return;
    }
    ++counters.frames;
    std::string_view payload = v.substr(kHeaderBytes, h.length);
    try {
      payload = c.mac_in.open(v.substr(0, kHeaderBytes), payload);
    } catch (const CodecError& e) {
      return reject(id, c, h.req, sched::Status::kAuth, "auth", e.what());
    }
    handle_frame(id, c, h, payload);
    if (!c.closing) c.in.consume(kHeaderBytes + h.length);  // after: the payload was a view into `in`
  }
}

void Server::Impl::check_deadlines(sched::ClientId id, Conn& c) {
  if (c.failed || c.gone) return;
  if (c.phase != Phase::kReady && !c.closing && now_ms >= c.hello_deadline_ms) {
    return reject(id, c, 0, sched::Status::kState, "hello",
                  std::string(c.phase == Phase::kHello ? "no HELLO" : "no AUTH") + " within " +
                      std::to_string(opts.hello_timeout_ms) + " ms of connecting");
  }
  // A partial frame that gets no byte while we read: a stalled or silent peer.
  if (wants_input(c) && !c.in.empty() && now_ms - c.in_progress_ms >= opts.frame_timeout_ms) {
    return reject(id, c, 0, sched::Status::kArg, "frame",
                  "a partial frame (" + std::to_string(c.in.size()) + " bytes) received no byte for " +
                      std::to_string(opts.frame_timeout_ms) + " ms");
  }
  if (!c.out.empty() && now_ms - c.out_progress_ms >= opts.frame_timeout_ms) {
    fail(id, c, "output",
         "its replies (" + std::to_string(c.out.size()) + " bytes) were not read for " +
             std::to_string(opts.frame_timeout_ms) + " ms");
  }
}

void Server::Impl::handle_frame(sched::ClientId id, Conn& c, const FrameHeader& h, std::string_view payload) {
  try {
    if (h.type == MsgType::kHello) return on_hello(id, c, h, payload);
    if (h.type == MsgType::kAuth) return on_auth(id, c, h, payload);
    if (h.type == MsgType::kDescribe) {
      if (!payload.empty()) {  // an empty message, checked like every other: nothing trails
        throw CodecError(std::to_string(payload.size()) + " trailing bytes (DESCRIBE has no payload)");
      }
      apply(sched::Heartbeat{id});  // any frame is a sign of life
      sched::Reply r{};
      r.client = id;
      r.req = h.req;
      r.detail = describe_server() + reg.describe();
      send_reply(r, kMaxDescribeBytes);
      return;
    }
    if (h.type == MsgType::kInfo) {
      // Read-only: a query of the state machine, not an event.
      uint32_t n = decode_info_request(payload);
      sched::SnapshotLimits lim;
      if (n > 0) {
        lim.max_models = std::min(lim.max_models, n);
        lim.max_holders = std::min(lim.max_holders, n);
        lim.max_transfers = std::min(lim.max_transfers, n);
      }
      sched::Snapshot snap = reg.snapshot(lim);
      queue(id, "a snapshot",
            [&] { return encode_frame(MsgType::kSnapshot, h.req, encode_snapshot(snap, opts.max_snapshot_bytes)); });
      return;
    }
    apply(decode_event(h.type, h.req, id, payload));
    if (h.type == MsgType::kHeartbeat) {
      // Answered, so that a client can tell a live registry from a stopped one whose kernel
      // still accepts its bytes (docs/protocol.md).
      queue(id, "a heartbeat", [&] { return encode_frame(MsgType::kHeartbeat, h.req, {}); });
    }
  } catch (const LimitError& e) {
    // Well-formed but too large to store: refuse the request, keep the connection.
    refuse(id, h.req, sched::Status::kArg, "limit", std::string(type_name(h.type)) + " refused: " + e.what());
  } catch (const CodecError& e) {
    reject(id, c, h.req, sched::Status::kArg, "frame",
           std::string("malformed ") + type_name(h.type) + " message: " + e.what());
  } catch (const std::exception& e) {
    // A bug must not take the registry down for everybody: refuse this client only.
    reject(id, c, h.req, sched::Status::kInternal, "internal",
           std::string("internal error on ") + type_name(h.type) + ": " + e.what());
  }
}

// HELLO: without a token the client is admitted; with one, a HELLO that repeats a recent
// client nonce is refused as a replay, and any other is challenged with a fresh nonce of ours,
// so that no earlier handshake's AUTH can answer it.
void Server::Impl::on_hello(sched::ClientId id, Conn& c, const FrameHeader& h, std::string_view payload) {
  if (c.phase != Phase::kHello) return reject(id, c, h.req, sched::Status::kState, "frame", "HELLO sent twice");
  Hello hello = decode_hello(payload);
  if (!leading) return send_not_leader(id, c, h.req);
  c.datacenter = std::move(hello.datacenter);  // as sent: the proofs cover it
  if (opts.auth_token.empty()) {
    admit(id, c);
    sched::Reply r{};
    r.client = id;
    r.req = h.req;
    send_reply(r);
    return;
  }
  if (hello_nonces.seen_before(hello.nonce)) {
    return reject(id, c, h.req, sched::Status::kAuth, "auth",
                  "replayed HELLO: its nonce was used by an earlier connection (a client draws a fresh one "
                  "for every connection)");
  }
  c.client_nonce = std::move(hello.nonce);
  c.registry_nonce = random_bytes(kNonceBytes);  // getrandom: fresh for every connection
  c.phase = Phase::kChallenged;
  queue(id, "a challenge", [&] { return encode_frame(MsgType::kChallenge, h.req, encode_challenge(c.registry_nonce)); });
}

// AUTH: the client's HMAC over both nonces, compared in constant time. A wrong one is
// answered with THUB_ERR_AUTH (and logged); a right one with the registry's own proof.
void Server::Impl::on_auth(sched::ClientId id, Conn& c, const FrameHeader& h, std::string_view payload) {
  if (c.phase != Phase::kChallenged) {
    return reject(id, c, h.req, sched::Status::kState, "frame", "AUTH without a CHALLENGE to answer");
  }
  std::string proof = decode_auth(payload);
  Transcript t{c.client_nonce, c.registry_nonce, c.datacenter};
  if (!constant_time_equal(proof, client_proof(opts.auth_token, t))) {
    return reject(id, c, h.req, sched::Status::kAuth, "auth",
                  "authentication failed: the client's proof does not match the registry's auth token (wrong "
                  "token)");
  }
  std::string ours = registry_proof(opts.auth_token, t);
  c.client_nonce.clear();
  c.registry_nonce.clear();
  queue(id, "AUTH_OK", [&] { return encode_frame(MsgType::kAuthOk, h.req, encode_auth_ok(ours)); });
  // From here on every frame either way carries a MAC under the session's keys.
  c.mac_in = FrameMac(frame_key(opts.auth_token, t, true));
  c.mac_out = FrameMac(frame_key(opts.auth_token, t, false));
  admit(id, c);
}

void Server::Impl::admit(sched::ClientId id, Conn& c) {
  c.phase = Phase::kReady;
  log("client " + std::to_string(id) + " (" + c.host + ") authenticated" +
      (opts.auth_token.empty() ? " (the registry has no token)" : ""));
  apply(sched::Connect{id, c.datacenter.empty() ? "default" : c.datacenter});
}

void Server::Impl::apply(const sched::Event& ev) {
  std::vector<sched::Action> actions;
  try {
    actions = reg.step(ev, now());
  } catch (const std::exception& e) {
    refusal("internal", std::string("internal error in the registry's state machine: ") + e.what());
    return;
  }
  for (auto& a : actions) {
    if (auto* r = std::get_if<sched::Reply>(&a)) {
      send_reply(*r);
    } else if (auto* o = std::get_if<sched::Offload>(&a)) {
      queue(o->client, "OFFLOAD", [&] { return encode_frame(MsgType::kOffload, 0, encode_order(o->member, o->version)); });
    } else if (auto* x = std::get_if<sched::Discard>(&a)) {
      queue(x->client, "DISCARD", [&] { return encode_frame(MsgType::kDiscard, 0, encode_order(x->member, x->version)); });
    } else if (auto* d = std::get_if<sched::Drop>(&a)) {
      auto it = conns.find(d->client);
      if (it != conns.end()) {
        log("client " + std::to_string(d->client) + " " + d->why + "; dropped");
        it->second.closing = true;
      }
    }
  }
}

// A frame that cannot be encoded (or any failure while queuing it) must not escape into the
// loop: that client is closed, logged, and everybody else goes on. So is a client whose
// unread replies pass the hard cap.
template <typename Encode>
void Server::Impl::queue(sched::ClientId id, const char* what, Encode&& encode) {
  auto it = conns.find(id);
  if (it == conns.end() || it->second.failed || it->second.gone) return;
  Conn& c = it->second;
  try {
    std::string f = encode();
    c.mac_out.seal(f);
    if (c.out.empty()) c.out_progress_ms = now_ms;
    c.out.append(f);
  } catch (const std::exception& e) {
    return fail(id, c, "internal", std::string("cannot send ") + what + ": " + e.what());
  }
  if (c.out.size() > opts.max_output_bytes) {
    fail(id, c, "output",
         std::to_string(c.out.size()) + " bytes of replies unread (max_output_bytes " +
             std::to_string(opts.max_output_bytes) + ")");
  }
}

void Server::Impl::send_reply(const sched::Reply& r, size_t max_detail) {
  queue(r.client, "a reply", [&] { return encode_frame(MsgType::kReply, r.req, encode_reply(r, max_detail)); });
}

// Answer with an error and close once it is sent.
void Server::Impl::reject(sched::ClientId id, Conn& c, uint64_t req, sched::Status st, const std::string& kind,
                          const std::string& why) {
  refuse(id, req, st, kind, why + "; closing the connection");
  c.closing = true;
  c.more = false;
  c.in.clear();
}

// Answer with an error; the connection stays.
void Server::Impl::refuse(sched::ClientId id, uint64_t req, sched::Status st, const std::string& kind,
                          const std::string& why) {
  auto it = conns.find(id);
  refusal(kind, "client " + std::to_string(id) + (it != conns.end() ? " (" + it->second.host + ")" : "") + ": " + why);
  sched::Reply r{};
  r.client = id;
  r.req = req;
  r.status = st;
  r.detail = why;
  send_reply(r);
}

void Server::Impl::fail(sched::ClientId id, Conn& c, const std::string& kind, const std::string& why) {
  refusal(kind, "client " + std::to_string(id) + " (" + c.host + ") closed: " + why);
  c.failed = true;
  c.closing = true;
}

// Closes what is done: failed and gone connections, closing ones whose replies are out.
// Dropping one may fail or close another (its Disconnect answers others): repeat until none.
void Server::Impl::sweep() {
  for (;;) {
    std::vector<sched::ClientId> done;
    for (auto& [id, c] : conns) {
      if (c.failed || c.gone || (c.closing && c.out.empty())) done.push_back(id);
    }
    if (done.empty()) return;
    for (sched::ClientId id : done) drop(id);
  }
}

void Server::Impl::drop(sched::ClientId id) {
  auto it = conns.find(id);
  if (it == conns.end()) return;
  bool hello = it->second.phase == Phase::kReady;
  log("client " + std::to_string(id) + " disconnected");
  auto h = per_host.find(it->second.host);
  if (h != per_host.end() && --h->second <= 0) per_host.erase(h);
  conns.erase(it);
  if (hello) apply(sched::Disconnect{id});
}

void Server::Impl::publish_stats() {
  ServerStats s = counters;
  s.connections = conns.size();
  s.before_hello = s.paused = s.input_bytes = s.output_bytes = 0;
  for (const auto& [id, c] : conns) {
    s.before_hello += c.phase == Phase::kReady ? 0 : 1;
    s.paused += paused(c) ? 1 : 0;
    s.input_bytes += c.in.size();
    s.output_bytes += c.out.size();
  }
  counters.peak_input_bytes = std::max(counters.peak_input_bytes, s.input_bytes);
  counters.peak_output_bytes = std::max(counters.peak_output_bytes, s.output_bytes);
  s.peak_input_bytes = counters.peak_input_bytes;
  s.peak_output_bytes = counters.peak_output_bytes;
  std::lock_guard<std::mutex> lk(stats_mu);
  published = s;
}

std::string Server::Impl::describe_server() const {
  std::lock_guard<std::mutex> lk(stats_mu);
  const ServerStats& s = published;
  return "server: connections " + std::to_string(s.connections) + " (before hello " + std::to_string(s.before_hello) +
         ", paused " + std::to_string(s.paused) + "), input " + std::to_string(s.input_bytes) + " B, output " +
         std::to_string(s.output_bytes) + " B, refusals " + std::to_string(s.refusals) + ", accept pauses " +
         std::to_string(s.accept_pauses) + ", internal errors " + std::to_string(s.internal_errors) + "\n" +
         (leadership ? "leadership: " + leadership->describe() + "\n" : "");
}

}  // namespace thub::registry
