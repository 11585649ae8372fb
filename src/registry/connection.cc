#include "src/registry/connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "src/common/codec.h"
#include "src/common/status.h"
#include "src/registry/protocol.h"
#include "src/registry/socket.h"

namespace thub::registry {

struct Connection::Impl {
  ConnectionOptions opts;
  Fd fd;
  std::string address;
  std::mutex write_mu;
  std::mutex mu;  // pending, offload handler, helper threads
  std::map<uint64_t, std::promise<sched::Reply>> pending;
  std::atomic<uint64_t> next_req{1};
  std::atomic<bool> stop{false};
  std::atomic<bool> alive{false};
  std::function<void(const sched::Offload&)> offload_fn;
  std::vector<std::thread> helpers;
  std::thread reader;

  void connect_any();
  void send_frame(MsgType t, uint64_t req, const std::string& payload);
  void read_loop();
  void fail_pending(const std::string& why);
  bool read_frame(FrameHeader* h, std::string* payload);
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

void Connection::Impl::connect_any() {
  std::string errors;
  for (const auto& a : opts.addresses) {
    try {
      Fd f = connect_tcp(parse_host_port(a), opts.connect_timeout_ms);
      fd = std::move(f);
      address = a;
      Hello hello{opts.auth_token, opts.datacenter};
      send_frame(MsgType::kHello, 0, encode_hello(hello));
      FrameHeader h;
      std::string payload;
      if (!read_frame(&h, &payload) || h.type != MsgType::kReply) {
        throw Error(Code::kRegistry, "registry " + a + " closed the connection during HELLO");
      }
      sched::Reply r = decode_reply(payload);
      if (r.status == sched::Status::kAuth) throw Error(Code::kAuth, "registry " + a + ": " + r.detail);
      if (r.status != sched::Status::kOk) throw Error(Code::kRegistry, "registry " + a + ": " + r.detail);
      alive = true;
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

void Connection::Impl::read_loop() {
  auto last_beat = std::chrono::steady_clock::now();
  while (!stop) {
    pollfd p{fd.get(), POLLIN, 0};
    int n = ::poll(&p, 1, opts.heartbeat_ms / 2 > 0 ? opts.heartbeat_ms / 2 : 1);
    if (stop) break;
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
    bool ok = false;
    std::string why = "lost the connection to registry " + address;
    try {
      ok = read_frame(&h, &payload);
    } catch (const CodecError& e) {
      why = "registry " + address + " sent a malformed frame: " + e.what();
    }
    if (!ok) {
      alive = false;
      fail_pending(why);
      return;
    }
    try {
      if (h.type == MsgType::kReply) {
        sched::Reply r = decode_reply(payload);
        std::lock_guard<std::mutex> lk(mu);
        auto it = pending.find(h.req);
        if (it != pending.end()) {
          it->second.set_value(std::move(r));
          pending.erase(it);
        } else if (h.req == 0 && r.status != sched::Status::kOk) {
          // The registry rejected the connection as a whole.
          why = "registry " + address + ": " + r.detail;
        }
      } else if (h.type == MsgType::kOffload) {
        sched::Offload o = decode_offload(payload);
        std::lock_guard<std::mutex> lk(mu);
        if (offload_fn) helpers.emplace_back([fn = offload_fn, o] { fn(o); });
      }
    } catch (const CodecError&) {
      // A reply we cannot decode: the registry is broken; give up on this connection.
      alive = false;
      fail_pending("registry " + address + " sent an undecodable message");
      return;
    }
  }
}

Connection::Connection(const ConnectionOptions& opts) : impl_(std::make_unique<Impl>()) {
  impl_->opts = opts;
  if (impl_->opts.heartbeat_ms <= 0) impl_->opts.heartbeat_ms = 1000;
  impl_->connect_any();
  impl_->reader = std::thread([this] { impl_->read_loop(); });
}

Connection::~Connection() {
  impl_->stop = true;
  ::shutdown(impl_->fd.get(), SHUT_RDWR);
  if (impl_->reader.joinable()) impl_->reader.join();
  impl_->fail_pending("connection closed");
  std::vector<std::thread> hs;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    hs.swap(impl_->helpers);
  }
  for (auto& t : hs) t.join();
}

sched::Reply Connection::call(const sched::Event& ev, int64_t timeout_ms) {
  uint64_t req = impl_->next_req++;
  std::future<sched::Reply> f;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (!impl_->alive) throw Error(Code::kRegistry, "not connected to registry " + impl_->address);
    f = impl_->pending[req].get_future();
  }
  std::string payload = encode_event(ev);
  try {
    impl_->send_frame(type_of(ev), req, payload);
  } catch (...) {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->pending.erase(req);
    throw;
  }
  if (timeout_ms > 0 && f.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->pending.erase(req);
    throw Error(Code::kTimeout, std::string("no reply from registry ") + impl_->address + " to " +
                                    type_name(type_of(ev)) + " within " + std::to_string(timeout_ms) + " ms");
  }
  return f.get();
}

std::string Connection::describe(int64_t timeout_ms) {
  uint64_t req = impl_->next_req++;
  std::future<sched::Reply> f;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    f = impl_->pending[req].get_future();
  }
  impl_->send_frame(MsgType::kDescribe, req, {});
  if (f.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    throw Error(Code::kTimeout, "no DESCRIBE reply from registry " + impl_->address);
  }
  return f.get().detail;
}

void Connection::on_offload(std::function<void(const sched::Offload&)> fn) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->offload_fn = std::move(fn);
}

std::string Connection::address() const { return impl_->address; }
bool Connection::connected() const { return impl_->alive; }

}  // namespace thub::registry
