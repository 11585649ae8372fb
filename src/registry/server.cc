#include "src/registry/server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>
#include <vector>

#include "sched/registry.h"
#include "src/common/codec.h"
#include "src/common/status.h"
#include "src/registry/protocol.h"
#include "src/registry/socket.h"

namespace thub::registry {

namespace {
struct Conn {
  Fd fd;
  std::string in;
  std::string out;
  bool hello = false;
  bool closing = false;  // flush `out`, then close
  bool failed = false;   // close now: something could not be sent to it
};
}  // namespace

struct Server::Impl {
  ServerOptions opts;
  sched::Registry reg;
  Fd listener;
  std::string address;
  int wake[2] = {-1, -1};
  std::atomic<bool> stop{false};
  std::thread thread;
  std::map<sched::ClientId, Conn> conns;
  sched::ClientId next_client = 1;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();

  explicit Impl(const ServerOptions& o) : opts(o), reg(o.sched) {}
  sched::Time now() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
  }
  void serve();
  void accept_one();
  void on_readable(sched::ClientId id, Conn& c);
  void handle_frame(sched::ClientId id, Conn& c, const FrameHeader& h, std::string_view payload);
  void apply(const sched::Event& ev);
  template <typename Encode>
  void queue(sched::ClientId id, const char* what, Encode&& encode);
  void send_reply(const sched::Reply& r, size_t max_detail = kMaxDetailBytes);
  void reject(sched::ClientId id, Conn& c, uint64_t req, sched::Status st, const std::string& why);
  void refuse(sched::ClientId id, uint64_t req, sched::Status st, const std::string& why);
  void fail(sched::ClientId id, Conn& c, const std::string& why);
  void drop_failed();
  void drop(sched::ClientId id);
  void log(const std::string& s) const {
    if (opts.verbose) std::fprintf(stderr, "tensorhub-registry: %s\n", s.c_str());
  }
  static void warn(const std::string& s) { std::fprintf(stderr, "tensorhub-registry: %s\n", s.c_str()); }
};

Server::Server(const ServerOptions& opts) : impl_(std::make_unique<Impl>(opts)) {
  HostPort hp = parse_host_port(opts.listen);
  uint16_t port = 0;
  impl_->listener = listen_tcp(hp, &port);
  fcntl(impl_->listener.get(), F_SETFL, fcntl(impl_->listener.get(), F_GETFL) | O_NONBLOCK);
  impl_->address = advertised_host(hp.host) + ":" + std::to_string(port);
  if (pipe2(impl_->wake, O_CLOEXEC | O_NONBLOCK) != 0) throw Error(Code::kNoMemory, "pipe2 failed");
}

Server::~Server() {
  stop();
  if (impl_->thread.joinable()) impl_->thread.join();
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

void Server::Impl::serve() {
  auto last_tick = now();
  std::vector<pollfd> fds;
  std::vector<sched::ClientId> ids;
  while (!stop) {
    fds.clear();
    ids.clear();
    fds.push_back({listener.get(), POLLIN, 0});
    fds.push_back({wake[0], POLLIN, 0});
    for (auto& [id, c] : conns) {
      short ev = c.closing ? 0 : POLLIN;
      if (!c.out.empty()) ev |= POLLOUT;
      fds.push_back({c.fd.get(), ev, 0});
      ids.push_back(id);
    }
    int n = ::poll(fds.data(), fds.size(), opts.tick_ms);
    if (n < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) accept_one();
    if (fds[1].revents & POLLIN) {
      char buf[64];
      while (::read(wake[0], buf, sizeof buf) > 0) {
      }
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = conns.find(ids[i]);
      if (it == conns.end()) continue;
      Conn& c = it->second;
      // Nothing one client does may end the loop that serves all of them.
      try {
        short re = fds[i + 2].revents;
        if ((re & POLLOUT) && !c.out.empty()) {
          ssize_t k = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
          if (k > 0) c.out.erase(0, static_cast<size_t>(k));
          else if (k < 0 && errno != EAGAIN && errno != EINTR) {
            drop(ids[i]);
            continue;
          }
        }
        if (c.failed || (c.closing && c.out.empty())) {
          drop(ids[i]);
          continue;
        }
        if (re & (POLLIN | POLLHUP | POLLERR)) on_readable(ids[i], c);
      } catch (const std::exception& e) {
        auto again = conns.find(ids[i]);
        if (again != conns.end()) fail(ids[i], again->second, std::string("internal error: ") + e.what());
      }
      drop_failed();
    }
    if (now() - last_tick >= static_cast<sched::Time>(opts.tick_ms) * 1000) {
      last_tick = now();
      apply(sched::Tick{});
      drop_failed();
    }
  }
  conns.clear();
}

void Server::Impl::accept_one() {
  for (;;) {
    int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // replies are small and latency-bound
    sched::ClientId id = next_client++;
    conns[id].fd = Fd(fd);
    log("client " + std::to_string(id) + " connected");
  }
}

void Server::Impl::on_readable(sched::ClientId id, Conn& c) {
  char buf[65536];
  for (;;) {
    ssize_t k = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (k > 0) {
      c.in.append(buf, static_cast<size_t>(k));
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) break;
    // EOF or error: the client is gone.
    log("client " + std::to_string(id) + " disconnected");
    drop(id);
    return;
  }
  while (conns.count(id) && !c.closing && c.in.size() >= kHeaderBytes) {
    FrameHeader h;
    try {
      h = decode_header(std::string_view(c.in.data(), kHeaderBytes));
    } catch (const CodecError& e) {
      reject(id, c, 0, sched::Status::kArg, std::string("malformed frame: ") + e.what());
      return;
    }
    if (c.in.size() < kHeaderBytes + h.length) break;
    std::string payload = c.in.substr(kHeaderBytes, h.length);
    c.in.erase(0, kHeaderBytes + h.length);
    handle_frame(id, c, h, payload);
  }
}

void Server::Impl::handle_frame(sched::ClientId id, Conn& c, const FrameHeader& h, std::string_view payload) {
  try {
    if (h.type == MsgType::kHello) {
      if (c.hello) return reject(id, c, h.req, sched::Status::kState, "HELLO sent twice");
      Hello hello = decode_hello(payload);
      if (!opts.auth_token.empty() && hello.token != opts.auth_token) {
        return reject(id, c, h.req, sched::Status::kAuth, "the registry refused the auth token");
      }
      c.hello = true;
      apply(sched::Connect{id, hello.datacenter.empty() ? "default" : hello.datacenter});
      sched::Reply r{};
      r.client = id;
      r.req = h.req;
      send_reply(r);
      return;
    }
    if (!c.hello) return reject(id, c, h.req, sched::Status::kState, "the first message must be HELLO");
    if (h.type == MsgType::kDescribe) {
      sched::Reply r{};
      r.client = id;
      r.req = h.req;
      r.detail = reg.describe();
      send_reply(r, kMaxDescribeBytes);
      return;
    }
    apply(decode_event(h.type, h.req, id, payload));
  } catch (const LimitError& e) {
    // Well-formed but too large to store: refuse the request, keep the connection.
    refuse(id, h.req, sched::Status::kArg, std::string(type_name(h.type)) + " refused: " + e.what());
  } catch (const CodecError& e) {
    reject(id, c, h.req, sched::Status::kArg,
           std::string("malformed ") + type_name(h.type) + " message: " + e.what());
  } catch (const std::exception& e) {
    // A bug must not take the registry down for everybody: refuse this client only.
    reject(id, c, h.req, sched::Status::kInternal,
           std::string("internal error on ") + type_name(h.type) + ": " + e.what());
  }
}

void Server::Impl::apply(const sched::Event& ev) {
  std::vector<sched::Action> actions;
  try {
    actions = reg.step(ev, now());
  } catch (const std::exception& e) {
    warn(std::string("internal error in the registry's state machine: ") + e.what());
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
        log("client " + std::to_string(d->client) + " missed its heartbeat deadline; dropped");
        it->second.closing = true;
      }
    }
  }
}

// A frame that cannot be encoded (or any failure while queuing it) must not escape into the
// loop: that client is closed, logged, and everybody else goes on.
template <typename Encode>
void Server::Impl::queue(sched::ClientId id, const char* what, Encode&& encode) {
  auto it = conns.find(id);
  if (it == conns.end() || it->second.failed) return;
  try {
    it->second.out += encode();
  } catch (const std::exception& e) {
    fail(id, it->second, std::string("cannot send ") + what + ": " + e.what());
  }
}

void Server::Impl::send_reply(const sched::Reply& r, size_t max_detail) {
  queue(r.client, "a reply", [&] { return encode_frame(MsgType::kReply, r.req, encode_reply(r, max_detail)); });
}

void Server::Impl::reject(sched::ClientId id, Conn& c, uint64_t req, sched::Status st, const std::string& why) {
  refuse(id, req, st, why);
  c.closing = true;
  c.in.clear();
}

void Server::Impl::refuse(sched::ClientId id, uint64_t req, sched::Status st, const std::string& why) {
  log("client " + std::to_string(id) + ": " + why);
  sched::Reply r{};
  r.client = id;
  r.req = req;
  r.status = st;
  r.detail = why;
  send_reply(r);
}

void Server::Impl::fail(sched::ClientId id, Conn& c, const std::string& why) {
  warn("client " + std::to_string(id) + " closed: " + why);
  c.failed = true;
  c.closing = true;
}

void Server::Impl::drop_failed() {
  for (bool again = true; again;) {  // dropping one may fail another (replies to it)
    again = false;
    for (auto& [id, c] : conns) {
      if (c.failed) {
        drop(id);
        again = true;
        break;
      }
    }
  }
}

void Server::Impl::drop(sched::ClientId id) {
  auto it = conns.find(id);
  if (it == conns.end()) return;
  bool hello = it->second.hello;
  conns.erase(it);
  if (hello) apply(sched::Disconnect{id});
}

}  // namespace thub::registry
