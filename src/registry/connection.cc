#include "src/registry/connection.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "src/common/codec.h"
#include "src/common/crypto.h"
#include "src/common/status.h"
#include "src/registry/auth.h"
#include "src/registry/byte_queue.h"
#include "src/registry/etcd.h"
#include "src/registry/handshake.h"
#include "src/registry/protocol.h"
#include "src/registry/socket.h"

namespace thub::registry {

namespace {
enum class State { kConnected, kReconnecting, kDead };

// Requests are written in slices; each slice the registry takes counts as a sign of life,
// so that a long upload is not mistaken for a silent registry.
constexpr size_t kWriteSlice = 256u << 10;
// With every address down past reconnect_ms, how often the list is tried again.
constexpr int kRetryGoneMs = 1000;
// Send buffers kept from frame to frame up to this size (a larger one is given back after use).
constexpr size_t kKeepBufferBytes = 4u << 20;
void give_back_if_large(std::string& b) {
  if (b.capacity() > kKeepBufferBytes) std::string().swap(b);
}
}  // namespace

struct Connection::Impl {
  ConnectionOptions opts;
  Fd fd;
  std::string address;
  size_t address_index = 0;
  std::mutex write_mu;
  std::mutex mu;  // pending, state, handlers, helper threads
  std::condition_variable cv;
  State state = State::kDead;
  struct Pending {
    std::function<void(RequestResult)> done;
    int64_t deadline_ms = 0;  // 0: none
    MsgType type = MsgType::kReply;
    MsgType answer = MsgType::kReply;  // the frame that answers it (errors always come as REPLY)
  };
  std::map<uint64_t, Pending> pending;
  std::atomic<uint64_t> next_req{1};
  std::atomic<uint64_t> generation{0};
  std::atomic<bool> stop{false};
  std::function<void(const Order&)> order_fn;
  std::function<void(ConnectionEvent, uint64_t, const std::string&)> event_fn;
  std::thread reader;
  std::thread prober;                    // probe_loop, when there are backups and probe_ms > 0
  int move_back_to = -1;                 // under mu: an earlier address answered the prober
  ByteQueue in;                          // reader thread only
  std::string lost_why;                  // why the last connection was lost (under mu)
  std::atomic<int64_t> tx_progress_ms{0};  // when the registry last took a slice of a request
  FrameMac mac_tx;                       // under write_mu: seals what we send (a token)
  std::string tx_frame;                  // under write_mu: the frame being sent (its capacity kept)
  FrameMac mac_rx;                       // reader thread: opens what the registry sends
  std::string redirect;                  // reader thread: a NOT_LEADER named this leader: try it first
  std::unique_ptr<EtcdClient> etcd;      // registry=etcd://...: where the leader's address is read

  void connect_any(size_t last);  // last: the address just lost (tried last), or n
  void probe_loop();               // on a backup: is an earlier address answering again?
  void send_frame(MsgType t, uint64_t req, const std::string& payload);  // write_mu held
  bool send_heartbeat(int64_t deadline_ms);
  void read_loop();
  bool serve();  // false when the connection is lost
  bool reconnect();
  bool retry_gone();
  void lose(const std::string& why);
  void fail_pending(const std::string& why);
  int receive();  // 1: bytes; 0: nothing now; -1: closed or failed
  bool next_frame(FrameHeader* h, std::string_view* payload);
  void dispatch(const FrameHeader& h, std::string_view payload);
  void start(MsgType type, const std::string& payload, int64_t timeout_ms, std::function<void(RequestResult)> done,
             uint64_t for_generation = Connection::kAnyGeneration);
  void expire(int64_t now_ms);  // pending requests past their deadline get kTimeout
  int64_t next_deadline();     // the earliest pending deadline (0: none)
  void notify(ConnectionEvent ev, const std::string& why);
  int wake_fd = -1;  // eventfd: a new deadline for the reader's poll
  void wake() {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof one);
  }
};

void Connection::Impl::send_frame(MsgType t, uint64_t req, const std::string& payload) {
  // Framed in a buffer kept from frame to frame: a publish of 8,192 tensors sends ~300 KB, and
  // memory fresh at each frame costs a page fault per 4 KiB (more than the copy).
  struct Keep {
    std::string& b;
    ~Keep() { give_back_if_large(b); }
  } keep{tx_frame};
  std::string& f = tx_frame;
  encode_frame(t, req, payload, &f);
  mac_tx.seal(f);  // under the lock: the sequence numbers follow the order on the wire
  for (size_t off = 0; off < f.size();) {
    size_t n = std::min(kWriteSlice, f.size() - off);
    if (!write_all(fd.get(), f.data() + off, n)) {
      throw Error(Code::kRegistry, "lost the connection to registry " + address);
    }
    off += n;
    tx_progress_ms = steady_ms();
  }
}

// From the reader thread, which must go on reading: never waits behind a writer (which is
// busy sending: the registry hears from us anyway), skips the beat when the socket is full
// of our bytes (the same), and only finishes a beat it has begun, never past `deadline_ms`.
// False if the registry does not take that beat's rest by then.
bool Connection::Impl::send_heartbeat(int64_t deadline_ms) {
  std::unique_lock<std::mutex> lk(write_mu, std::try_to_lock);
  if (!lk.owns_lock()) return true;
  std::string f = encode_frame(MsgType::kHeartbeat, 0, encode_event(sched::Heartbeat{0}));
  // A sealed beat takes a sequence number: once sealed it must go out whole. So the beat is
  // skipped before sealing when the socket has no room (as it is for a full socket anyway).
  const bool sealed = mac_tx.on();
  if (sealed) {
    pollfd room{fd.get(), POLLOUT, 0};
    if (::poll(&room, 1, 0) <= 0 || !(room.revents & POLLOUT)) return true;
    mac_tx.seal(f);
  }
  size_t off = 0;
  while (off < f.size()) {
    ssize_t k = ::send(fd.get(), f.data() + off, f.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      off += static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (off == 0 && !sealed) return true;
      int64_t left = deadline_ms - steady_ms();
      if (left <= 0) return false;
      pollfd p{fd.get(), POLLOUT, 0};
      ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      continue;
    }
    return true;  // a broken socket: the reader sees it as a closed connection
  }
  return true;
}


int Connection::Impl::receive() { return receive_some(fd.get(), in); }

// The next complete frame in `in` (a view valid until in.consume); throws CodecError.
bool Connection::Impl::next_frame(FrameHeader* h, std::string_view* payload) {
  if (in.size() < kHeaderBytes) return false;
  *h = decode_header(in.view().substr(0, kHeaderBytes));
  if (in.size() < kHeaderBytes + h->length) return false;
  *payload = in.view().substr(kHeaderBytes, h->length);
  return true;
}

namespace {

// The order in which addresses are tried: the list's own (the first that answers is the
// leader: the primary while it lives), with `last` (the address just lost, n: none) put at
// the end, since it is the likeliest to be down.
std::vector<size_t> preference(size_t n, size_t last) {
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i) {
    if (i != last) order.push_back(i);
  }
  if (last < n) order.push_back(last);
  return order;
}

}  // namespace

// Tries every address once, in the order of preference (a leader named by a NOT_LEADER
// first); with etcd, the one that leads there. Throws Error(kRegistry/kAuth).
void Connection::Impl::connect_any(size_t last) {
  std::vector<std::string> targets = opts.addresses;
  if (etcd) {
    std::optional<std::string> leader = etcd->leader();  // throws kRegistry: etcd unreachable
    if (!leader) throw Error(Code::kRegistry, "no registry leads in " + opts.etcd + " (none holds its leader key)");
    targets = {*leader};
    last = 1;
  }
  std::vector<size_t> order = preference(targets.size(), last);
  std::string errors;
  for (size_t k = 0; k < order.size(); ++k) {
    if (!redirect.empty()) {  // a registry that does not lead named the one that does
      auto named = std::find_if(order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                                [&](size_t i) { return targets[i] == redirect; });
      if (named != order.end()) std::rotate(order.begin() + static_cast<std::ptrdiff_t>(k), named, named + 1);
      redirect.clear();
    }
    const size_t i = order[k];
    const auto& a = targets[i];
    try {
      int64_t started = steady_ms();
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
      in.clear();
      HandshakeLink l{fd.get(), in};
      Transcript t;  // its nonces stay empty without a token
      {
        std::lock_guard<std::mutex> lk(write_mu);
        mac_tx = FrameMac();
      }
      mac_rx = FrameMac();
      handshake(opts, l, a, started + opts.connect_timeout_ms, opts.connect_timeout_ms, &t);
      if (!t.client_nonce.empty()) {  // every frame from here on carries a MAC, either way
        std::lock_guard<std::mutex> lk(write_mu);
        mac_tx = FrameMac(frame_key(opts.auth_token, t, true));
        mac_rx = FrameMac(frame_key(opts.auth_token, t, false));
      }
      return;
    } catch (const NotLeading& e) {
      redirect = e.leader;
      errors += std::string(errors.empty() ? "" : "; ") + e.what();
    } catch (const Error& e) {
      if (e.code() == Code::kAuth || e.code() == Code::kArg) throw;
      errors += std::string(errors.empty() ? "" : "; ") + e.what();
    } catch (const CodecError& e) {
      errors += std::string(errors.empty() ? "" : "; ") + a + ": " + e.what();
    }
  }
  throw Error(Code::kRegistry, "no registry could be reached: " + errors);
}

bool registry_answers(const ConnectionOptions& opts, const std::string& a, int budget_ms, std::string* why) {
  try {
    const int64_t started = steady_ms();
    Fd f = connect_tcp(parse_host_port(a), budget_ms);
    ByteQueue q;
    HandshakeLink l{f.get(), q};
    handshake(opts, l, a, started + budget_ms, budget_ms);
    return true;
  } catch (const Error& e) {
    if (why) *why = e.what();
  } catch (const CodecError& e) {
    if (why) *why = a + ": " + e.what();
  }
  return false;
}

// While the connection is to a backup (not the list's first address), the earlier addresses
// are asked every probe_ms, with a whole handshake (a port that accepts is not yet a registry
// that answers); the first that answers is the leader again, and the reader moves back to it
// (a failover like any other: members open and publish again there). Runs beside the reader,
// so that a slow probe delays no heartbeat.
void Connection::Impl::probe_loop() {
  std::unique_lock<std::mutex> lk(mu);
  while (!stop) {
    cv.wait_for(lk, std::chrono::milliseconds(opts.probe_ms), [&] { return stop.load(); });
    if (stop) return;
    if (state != State::kConnected || address_index == 0 || move_back_to >= 0) continue;
    const size_t upto = address_index;
    lk.unlock();
    int found = -1;
    std::string why;
    for (size_t i = 0; i < upto && !stop && found < 0; ++i) {
      const std::string& a = opts.addresses[i];
      // A probe gets no longer than a heartbeat period to answer: a leader that slow is not
      // worth a failover, and the destructor waits for a probe under way.
      const int64_t budget = std::clamp<int64_t>(opts.probe_ms, 50, std::min(opts.connect_timeout_ms, 1000));
      if (registry_answers(opts, a, static_cast<int>(budget))) {
        found = static_cast<int>(i);
        why = "registry " + a + ", earlier in the list, answers again: moving back to it";
      }
    }
    lk.lock();
    if (found >= 0 && state == State::kConnected && static_cast<size_t>(found) < address_index) {
      move_back_to = found;
      lost_why = why;
      wake();
    }
  }
}

void Connection::Impl::fail_pending(const std::string& why) {
  std::map<uint64_t, Pending> gone;
  {
    std::lock_guard<std::mutex> lk(mu);
    gone.swap(pending);
  }
  for (auto& [req, p] : gone) p.done(RequestResult{Code::kRegistry, {}, why});
}

void Connection::Impl::expire(int64_t now_ms) {
  std::vector<std::pair<Pending, uint64_t>> late;
  {
    std::lock_guard<std::mutex> lk(mu);
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->second.deadline_ms > 0 && it->second.deadline_ms <= now_ms) {
        late.emplace_back(std::move(it->second), it->first);
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [p, req] : late) {
    p.done(RequestResult{Code::kTimeout, {}, std::string("no reply from registry ") + address + " to " +
                                                 type_name(p.type) + " within its deadline"});
  }
}

int64_t Connection::Impl::next_deadline() {
  std::lock_guard<std::mutex> lk(mu);
  int64_t d = 0;
  for (const auto& [req, p] : pending) {
    if (p.deadline_ms > 0 && (d == 0 || p.deadline_ms < d)) d = p.deadline_ms;
  }
  return d;
}

void Connection::Impl::notify(ConnectionEvent ev, const std::string& why) {
  std::function<void(ConnectionEvent, uint64_t, const std::string&)> fn;
  {
    std::lock_guard<std::mutex> lk(mu);
    fn = event_fn;
  }
  if (fn) fn(ev, generation, why);
}

// Shuts the socket (a writer blocked in send() returns) and fails every pending request; the
// reader then reconnects as for a closed connection.
void Connection::Impl::lose(const std::string& why) {
  ::shutdown(fd.get(), SHUT_RDWR);
  {
    std::lock_guard<std::mutex> lk(mu);
    lost_why = why;
  }
  fail_pending(why);
}

void Connection::Impl::dispatch(const FrameHeader& h, std::string_view payload) {
  if (h.type == MsgType::kReply) {
    sched::Reply r = decode_reply(payload);
    Pending p;
    {
      std::lock_guard<std::mutex> lk(mu);
      auto it = pending.find(h.req);
      if (it == pending.end()) return;
      p = std::move(it->second);
      pending.erase(it);
    }
    p.done(RequestResult{Code::kSuccess, std::move(r), {}});
  } else if (h.type == MsgType::kSnapshot) {
    Pending p;
    {
      std::lock_guard<std::mutex> lk(mu);
      auto it = pending.find(h.req);
      if (it == pending.end()) return;
      if (it->second.answer != h.type) {
        throw CodecError(std::string("a SNAPSHOT answers no ") + type_name(it->second.type));
      }
      p = std::move(it->second);
      pending.erase(it);
    }
    p.done(RequestResult{Code::kSuccess, {}, {}, std::string(payload)});
  } else if (h.type == MsgType::kOffload || h.type == MsgType::kDiscard) {
    Order o;
    o.offload = h.type == MsgType::kOffload;
    decode_order(payload, &o.member, &o.version);
    std::function<void(const Order&)> fn;
    {
      std::lock_guard<std::mutex> lk(mu);
      fn = order_fn;
    }
    if (fn) fn(o);
  } else if (h.type == MsgType::kNotLeader) {
    throw NotLeading(address, decode_not_leader(payload));
  }
  // HEARTBEAT (the registry's answer to ours): a sign of life, nothing more.
}

// Reads and dispatches frames, heartbeats every heartbeat_ms (more often if the liveness
// timeout is short), and declares the registry lost when nothing came from it, and nothing
// of ours was taken, for registry_timeout_ms.
bool Connection::Impl::serve() {
  const int64_t live = opts.registry_timeout_ms;
  int64_t beat = opts.heartbeat_ms;
  if (live > 0) beat = std::max<int64_t>(1, std::min<int64_t>(beat, live / 3));
  int64_t now = steady_ms();
  int64_t last_rx = now, last_beat = now;
  tx_progress_ms = now;
  auto dispatch_all = [&] {
    try {
      FrameHeader h;
      std::string_view payload;
      while (next_frame(&h, &payload)) {
        dispatch(h, mac_rx.open(in.view().substr(0, kHeaderBytes), payload));
        in.consume(kHeaderBytes + h.length);
      }
      return true;
    } catch (const NotLeading& e) {  // it stopped leading: to the one it names, if ours
      redirect = e.leader;
      lose(e.what());
      return false;
    } catch (const CodecError& e) {
      lose("registry " + address + " sent a malformed message: " + std::string(e.what()));
      return false;
    }
  };
  if (!dispatch_all()) return false;  // what came right behind the HELLO reply
  while (!stop) {
    auto heard = [&] { return std::max(last_rx, tx_progress_ms.load()); };
    int64_t wait = last_beat + beat - now;
    if (live > 0) wait = std::min(wait, heard() + live - now);
    if (int64_t d = next_deadline(); d > 0) wait = std::min(wait, d - now);
    pollfd ps[2] = {{fd.get(), POLLIN, 0}, {wake_fd, POLLIN, 0}};
    ::poll(ps, 2, static_cast<int>(std::clamp<int64_t>(wait, 0, 1000)));
    if (ps[1].revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] ssize_t k = ::read(wake_fd, &v, sizeof v);
    }
    int n = ps[0].revents ? 1 : 0;
    if (stop) return true;
    {
      std::unique_lock<std::mutex> lk(mu);
      if (move_back_to >= 0) {  // the prober found an earlier address answering again
        std::string why = lost_why;
        lk.unlock();
        lose(why);
        return false;
      }
    }
    now = steady_ms();
    expire(now);
    if (n > 0) {
      int got = receive();
      if (got < 0) {
        lose("lost the connection to registry " + address);
        return false;
      }
      if (got > 0) last_rx = now;
      if (!dispatch_all()) return false;
    }
    if (now - last_beat >= beat) {
      last_beat = now;
      if (!send_heartbeat(live > 0 ? heard() + live : now + beat)) {
        lose("registry " + address + " takes no bytes from this client (stopped, hung or cut off)");
        return false;
      }
    }
    if (live > 0 && now - heard() >= live) {
      lose("registry " + address + " sent nothing for " + std::to_string(live) +
           " ms (registry_timeout_ms): stopped, hung or cut off");
      return false;
    }
  }
  return true;
}

// Within reconnect_ms: false when no address answered (or one refused our credentials).
bool Connection::Impl::reconnect() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(opts.reconnect_ms);
  size_t last;
  {
    std::lock_guard<std::mutex> lk(mu);
    last = address_index;
  }
  int backoff_ms = 20;
  std::string tried;
  auto give_up = [&] {
    std::lock_guard<std::mutex> lk(mu);
    if (!tried.empty()) lost_why += "; reconnecting gave up: " + tried;
    return false;
  };
  while (!stop && std::chrono::steady_clock::now() < deadline) {
    try {
      connect_any(last);
      return true;
    } catch (const Error& e) {
      tried = e.what();
      if (e.code() == Code::kAuth) return give_up();
    }
    std::unique_lock<std::mutex> lk(mu);
    cv.wait_for(lk, std::chrono::milliseconds(backoff_ms), [&] { return stop.load(); });
    backoff_ms = std::min(backoff_ms * 2, 500);
  }
  return give_up();
}

// After reconnect_ms without a registry: requests fail at once (kGone), and the list is
// still tried in the background, every kRetryGoneMs, until one answers (kBack) or the
// connection is closed (false).
bool Connection::Impl::retry_gone() {
  while (!stop) {
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait_for(lk, std::chrono::milliseconds(kRetryGoneMs), [&] { return stop.load(); });
    }
    if (stop) return false;
    try {
      connect_any(opts.addresses.size());
      return true;
    } catch (const Error& e) {
      std::lock_guard<std::mutex> lk(mu);
      lost_why = std::string("no registry answers (still trying every ") + std::to_string(kRetryGoneMs) +
                 " ms): " + e.what();
    }
  }
  return false;
}

void Connection::Impl::read_loop() {
  while (!stop) {
    if (serve()) return;
    std::string why;
    {
      std::lock_guard<std::mutex> lk(mu);
      state = State::kReconnecting;
      why = lost_why;
    }
    notify(ConnectionEvent::kLost, why);
    bool back = reconnect();
    if (!back) {
      {
        std::lock_guard<std::mutex> lk(mu);
        state = State::kDead;
        why = lost_why;
      }
      cv.notify_all();
      notify(ConnectionEvent::kGone, why);
      if (!retry_gone()) return;
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      state = State::kConnected;
      generation++;
      move_back_to = -1;
      why = lost_why;
    }
    cv.notify_all();
    notify(ConnectionEvent::kBack, why);
  }
}

Connection::Connection(const ConnectionOptions& opts) : impl_(std::make_unique<Impl>()) {
  impl_->opts = opts;
  impl_->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl_->wake_fd < 0) throw Error(Code::kNoMemory, "eventfd failed");
  if (impl_->opts.heartbeat_ms <= 0) impl_->opts.heartbeat_ms = 1000;
  if (impl_->opts.connect_timeout_ms <= 0) impl_->opts.connect_timeout_ms = 5000;
  try {
    if (!opts.etcd.empty()) {
      impl_->etcd = std::make_unique<EtcdClient>(parse_etcd_target(opts.etcd), impl_->opts.connect_timeout_ms);
    }
    impl_->connect_any(opts.addresses.size());
  } catch (...) {
    ::close(impl_->wake_fd);
    throw;
  }
  impl_->state = State::kConnected;
  impl_->reader = std::thread([this] { impl_->read_loop(); });
  if (impl_->opts.probe_ms > 0 && impl_->opts.addresses.size() > 1) {
    impl_->prober = std::thread([this] { impl_->probe_loop(); });
  }
}

Connection::~Connection() {
  impl_->stop = true;
  {
    std::lock_guard<std::mutex> lk(impl_->write_mu);
    ::shutdown(impl_->fd.get(), SHUT_RDWR);
  }
  impl_->cv.notify_all();
  impl_->wake();
  if (impl_->reader.joinable()) impl_->reader.join();
  if (impl_->prober.joinable()) impl_->prober.join();
  impl_->fail_pending("connection closed");
  ::close(impl_->wake_fd);
}

// One request frame; `done` gets its reply or why there is none. Deadlines are checked by
// the reader thread.
void Connection::Impl::start(MsgType type, const std::string& payload, int64_t timeout_ms,
                             std::function<void(RequestResult)> done, uint64_t for_generation) {
  // Requests the registry may answer much later (a drain or a busy source lasts as long as a
  // transfer) wait as long as the registry is alive; the others get request_timeout_ms.
  if (timeout_ms == 0 && !may_defer(type)) timeout_ms = opts.request_timeout_ms;
  uint64_t req = next_req++;
  // The check and the write under write_mu: the reader replaces the socket only under it, and
  // only once the state says kReconnecting (read_loop, connect_any). So a request checked
  // against generation g goes out on g's socket (or fails there); never on the next registry's,
  // where its member ids are another session's and its answer would be taken as g's (a request
  // held up here across a whole reconnection did that: its pending entry was made after the
  // loss had failed the others, and lived on).
  std::unique_lock<std::mutex> wl(write_mu);
  {
    std::unique_lock<std::mutex> lk(mu);
    std::string why;
    if (state != State::kConnected || stop) {
      why = "not connected to a registry (last: " + address + (lost_why.empty() ? "" : ", " + lost_why) + ")";
    } else if (for_generation != Connection::kAnyGeneration && for_generation != generation) {
      why = "meant for an earlier registry (generation " + std::to_string(for_generation) + "; " + address +
            " answers now as generation " + std::to_string(generation) + ")";
    }
    if (!why.empty()) {
      lk.unlock();
      wl.unlock();
      return done(RequestResult{Code::kRegistry, {}, why});
    }
    Pending& p = pending[req];
    p.done = std::move(done);
    p.deadline_ms = timeout_ms > 0 ? steady_ms() + timeout_ms : 0;
    p.type = type;
    p.answer = answer_to(type);
  }
  try {
    send_frame(type, req, payload);
    wl.unlock();
  } catch (const Error& e) {
    wl.unlock();
    Pending p;
    {
      std::lock_guard<std::mutex> lk(mu);
      auto it = pending.find(req);
      if (it == pending.end()) return;  // already failed by the reader (the connection was lost)
      p = std::move(it->second);
      pending.erase(it);
    }
    p.done(RequestResult{Code::kRegistry, {}, e.what()});
  }
  if (timeout_ms > 0) wake();  // the reader sees the new deadline (it may sleep up to a second)
}

void Connection::send(const sched::Event& ev, int64_t timeout_ms, std::function<void(RequestResult)> done,
                      uint64_t for_generation) {
  try {
    check_limits(ev);  // the registry would refuse it; say so without sending 63 MiB
  } catch (const LimitError& e) {
    return done(RequestResult{Code::kArg, {}, std::string(type_name(type_of(ev))) + ": " + e.what()});
  }
  // Encoded in a buffer of this thread's kept from call to call (see send_frame).
  thread_local std::string payload;
  encode_event(ev, &payload);
  impl_->start(type_of(ev), payload, timeout_ms, std::move(done), for_generation);
  give_back_if_large(payload);
}

namespace {
// Waits for an asynchronous request: the blocking calls of tools and tests.
RequestResult await_result(const std::function<void(std::function<void(RequestResult)>)>& start) {
  auto promise = std::make_shared<std::promise<RequestResult>>();
  auto f = promise->get_future();
  start([promise](RequestResult r) { promise->set_value(std::move(r)); });
  RequestResult r = f.get();
  if (r.code != Code::kSuccess) throw Error(r.code, r.detail);
  return r;
}
sched::Reply await(const std::function<void(std::function<void(RequestResult)>)>& start) {
  return std::move(await_result(start).reply);
}
}  // namespace

sched::Reply Connection::call(const sched::Event& ev, int64_t timeout_ms) {
  wait_connected();
  return await([&](std::function<void(RequestResult)> done) { send(ev, timeout_ms, std::move(done)); });
}

std::string Connection::describe(int64_t timeout_ms) {
  wait_connected();
  return await([&](std::function<void(RequestResult)> done) {
           impl_->start(MsgType::kDescribe, {}, timeout_ms, std::move(done));
         }).detail;
}

sched::Snapshot Connection::snapshot(uint32_t max_entries, int64_t timeout_ms) {
  wait_connected();
  RequestResult r = await_result([&](std::function<void(RequestResult)> done) {
    impl_->start(MsgType::kInfo, encode_info_request(max_entries), timeout_ms, std::move(done));
  });
  if (r.payload.empty()) {  // refused: a REPLY says why
    std::string why = r.reply.detail.empty() ? "status " + std::to_string(static_cast<int>(r.reply.status))
                                             : r.reply.detail;
    throw Error(Code::kRegistry, "registry " + address() + " refused INFO: " + why);
  }
  try {
    return decode_snapshot(r.payload);
  } catch (const CodecError& e) {
    throw Error(Code::kRegistry, "registry " + address() + " sent a malformed SNAPSHOT: " + e.what());
  }
}

void Connection::on_order(std::function<void(const Order&)> fn) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->order_fn = std::move(fn);
}

void Connection::on_event(std::function<void(ConnectionEvent, uint64_t, const std::string&)> fn) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->event_fn = std::move(fn);
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
