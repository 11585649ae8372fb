#include "src/registry/connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "src/common/codec.h"
#include "src/common/status.h"
#include "src/registry/protocol.h"
#include "src/registry/socket.h"

namespace thub::registry {

namespace {
enum class State { kConnected, kReconnecting, kDead };
}

struct Connection::Impl {
  ConnectionOptions opts;
  Fd fd;
  std::string address;
  size_t address_index = 0;
  std::mutex write_mu;
  std::mutex mu;  // pending, state, handlers, helper threads
  std::condition_variable cv;
  State state = State::kDead;
  std::map<uint64_t, std::promise<sched::Reply>> pending;
  std::atomic<uint64_t> next_req{1};
  std::atomic<uint64_t> generation{0};
  std::atomic<bool> stop{false};
  std::function<void(const Order&)> order_fn;
  std::function<void()> reconnect_fn;
  std::vector<std::thread> helpers;
  std::thread reader;

  void connect_any(size_t first);
  void send_frame(MsgType t, uint64_t req, const std::string& payload);
  void read_loop();
  bool serve();  // false when the connection is lost
  bool reconnect();
  void fail_pending(const std::string& why);
  bool read_frame(FrameHeader* h, std::string* payload);
  sched::Reply request(MsgType type, const std::string& payload, int64_t timeout_ms);
  void spawn(std::function<void()> fn) {
    std::lock_guard<std::mutex> lk(mu);
    helpers.emplace_back(std::move(fn));
  }
};

void Connection::Impl::send_frame(MsgType t, uint64_t req, const std::string& payload) {
  std::string f = encode_frame(t, req, payload);
  std::lock_guard<std::mutex> lk(write_mu);
  if (!write_all(fd.get(), f.data(), f.size())) {
    throw Error(Code::kRegistry, "lost the connection to registry " + address);
  }
}

bool Connection::Impl::read_frame(FrameHeader* h, std::string* payload) {
  char hdr[kHeaderBytes];
  if (!read_all(fd.get(), hdr, sizeof hdr)) return false;
  *h = decode_header(std::string_view(hdr, sizeof hdr));
  payload->resize(h->length);
  return h->length == 0 || read_all(fd.get(), payload->data(), h->length);
}

// Tries every address once, starting at `first`; throws Error(kRegistry/kAuth).
void Connection::Impl::connect_any(size_t first) {
  std::string errors;
  size_t n = opts.addresses.size();
  for (size_t k = 0; k < n; ++k) {
    size_t i = (first + k) % n;
    const auto& a = opts.addresses[i];
    try {
      Fd f = connect_tcp(parse_host_port(a), opts.connect_timeout_ms);
      {
        std::lock_guard<std::mutex> lk(write_mu);
        fd = std::move(f);
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        address = a;
        address_index = i;
      }
      send_frame(MsgType::kHello, 0, encode_hello(Hello{opts.auth_token, opts.datacenter}));
      FrameHeader h;
      std::string payload;
      if (!read_frame(&h, &payload) || h.type != MsgType::kReply) {
        throw Error(Code::kRegistry, "registry " + a + " closed the connection during HELLO");
      }
      sched::Reply r = decode_reply(payload);
      if (r.status == sched::Status::kAuth) throw Error(Code::kAuth, "registry " + a + ": " + r.detail);
      if (r.status != sched::Status::kOk) throw Error(Code::kRegistry, "registry " + a + ": " + r.detail);
      return;
    } catch (const Error& e) {
      if (e.code() == Code::kAuth || e.code() == Code::kArg) throw;
      errors += std::string(errors.empty() ? "" : "; ") + e.what();
    } catch (const CodecError& e) {
      errors += std::string(errors.empty() ? "" : "; ") + a + ": " + e.what();
    }
  }
  throw Error(Code::kRegistry, "no registry could be reached: " + errors);
}

void Connection::Impl::fail_pending(const std::string& why) {
  std::lock_guard<std::mutex> lk(mu);
  for (auto& [req, p] : pending) p.set_exception(std::make_exception_ptr(Error(Code::kRegistry, why)));
  pending.clear();
}

bool Connection::Impl::serve() {
  auto last_beat = std::chrono::steady_clock::now();
  while (!stop) {
    pollfd p{fd.get(), POLLIN, 0};
    int n = ::poll(&p, 1, opts.heartbeat_ms / 2 > 0 ? opts.heartbeat_ms / 2 : 1);
    if (stop) return true;
    auto now = std::chrono::steady_clock::now();
    if (now - last_beat >= std::chrono::milliseconds(opts.heartbeat_ms)) {
      last_beat = now;
      try {
        send_frame(MsgType::kHeartbeat, 0, encode_event(sched::Heartbeat{0}));
      } catch (const Error&) {
      }
    }
    if (n <= 0) continue;
    FrameHeader h;
    std::string payload;
    std::string why = "lost the connection to registry " + address;
    bool ok = false;
    try {
      ok = read_frame(&h, &payload);
      if (ok && h.type == MsgType::kReply) {
        sched::Reply r = decode_reply(payload);
        std::lock_guard<std::mutex> lk(mu);
        auto it = pending.find(h.req);
        if (it != pending.end()) {
          it->second.set_value(std::move(r));
          pending.erase(it);
        }
      } else if (ok && (h.type == MsgType::kOffload || h.type == MsgType::kDiscard)) {
        Order o;
        o.offload = h.type == MsgType::kOffload;
        decode_order(payload, &o.member, &o.version);
        std::function<void(const Order&)> fn;
        {
          std::lock_guard<std::mutex> lk(mu);
          fn = order_fn;
        }
        if (fn) spawn([fn, o] { fn(o); });
      }
    } catch (const CodecError& e) {
      ok = false;
      why = "registry " + address + " sent a malformed message: " + std::string(e.what());
    }
    if (!ok) {
      fail_pending(why);
      return false;
    }
  }
  return true;
}

bool Connection::Impl::reconnect() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(opts.reconnect_ms);
  size_t next = address_index + 1;
  int backoff_ms = 20;
  while (!stop && std::chrono::steady_clock::now() < deadline) {
    try {
      connect_any(next);
      return true;
    } catch (const Error& e) {
      if (e.code() == Code::kAuth) return false;
    }
    std::unique_lock<std::mutex> lk(mu);
    cv.wait_for(lk, std::chrono::milliseconds(backoff_ms), [&] { return stop.load(); });
    backoff_ms = std::min(backoff_ms * 2, 500);
  }
  return false;
}

void Connection::Impl::read_loop() {
  while (!stop) {
    if (serve()) return;
    {
      std::lock_guard<std::mutex> lk(mu);
      state = State::kReconnecting;
    }
    bool back = reconnect();
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lk(mu);
      state = back ? State::kConnected : State::kDead;
      if (back) generation++;
      fn = reconnect_fn;
    }
    cv.notify_all();
    if (!back) return;
    if (fn) spawn(fn);
  }
}

Connection::Connection(const ConnectionOptions& opts) : impl_(std::make_unique<Impl>()) {
  impl_->opts = opts;
  if (impl_->opts.heartbeat_ms <= 0) impl_->opts.heartbeat_ms = 1000;
  impl_->connect_any(0);
  impl_->state = State::kConnected;
  impl_->reader = std::thread([this] { impl_->read_loop(); });
}

Connection::~Connection() {
  impl_->stop = true;
  {
    std::lock_guard<std::mutex> lk(impl_->write_mu);
    ::shutdown(impl_->fd.get(), SHUT_RDWR);
  }
  impl_->cv.notify_all();
  if (impl_->reader.joinable()) impl_->reader.join();
  impl_->fail_pending("connection closed");
  for (;;) {
    std::vector<std::thread> hs;
    {
      std::lock_guard<std::mutex> lk(impl_->mu);
      hs.swap(impl_->helpers);
    }
    if (hs.empty()) break;
    for (auto& t : hs) t.join();
  }
}

// One request frame and its reply: waits out a reconnection first, and forgets the pending
// entry on a send failure or a timeout.
sched::Reply Connection::Impl::request(MsgType type, const std::string& payload, int64_t timeout_ms) {
  uint64_t req = next_req++;
  std::future<sched::Reply> f;
  {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return state != State::kReconnecting || stop; });
    if (state != State::kConnected) {
      throw Error(Code::kRegistry, "not connected to a registry (last: " + address + ")");
    }
    f = pending[req].get_future();
  }
  try {
    send_frame(type, req, payload);
  } catch (...) {
    std::lock_guard<std::mutex> lk(mu);
    pending.erase(req);
    throw;
  }
  if (timeout_ms > 0 && f.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    std::lock_guard<std::mutex> lk(mu);
    pending.erase(req);
    throw Error(Code::kTimeout, std::string("no reply from registry ") + address + " to " + type_name(type) +
                                    " within " + std::to_string(timeout_ms) + " ms");
  }
  return f.get();
}

sched::Reply Connection::call(const sched::Event& ev, int64_t timeout_ms) {
  try {
    check_limits(ev);  // the registry would refuse it; say so without sending 63 MiB
  } catch (const LimitError& e) {
    throw Error(Code::kArg, std::string(type_name(type_of(ev))) + ": " + e.what());
  }
  return impl_->request(type_of(ev), encode_event(ev), timeout_ms);
}

std::string Connection::describe(int64_t timeout_ms) {
  return impl_->request(MsgType::kDescribe, {}, timeout_ms).detail;
}

void Connection::on_order(std::function<void(const Order&)> fn) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->order_fn = std::move(fn);
}

void Connection::on_reconnect(std::function<void()> fn) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->reconnect_fn = std::move(fn);
}

std::string Connection::address() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->address;
}

bool Connection::connected() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->state == State::kConnected;
}

uint64_t Connection::generation() const { return impl_->generation; }

uint64_t Connection::wait_connected() {
  std::unique_lock<std::mutex> lk(impl_->mu);
  impl_->cv.wait(lk, [&] { return impl_->state != State::kReconnecting || impl_->stop; });
  return impl_->generation;
}

}  // namespace thub::registry
