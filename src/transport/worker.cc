#include "src/transport/worker.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <future>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_set>
#include <vector>

#include "src/common/status.h"
#include "src/transport/cuda_staging.h"
#include "src/transport/process_reads.h"
#include "src/transport/read_paths.h"
#include "src/transport/served_regions.h"
#include "src/transport/socket_reads.h"
#include "src/transport/wire_format.h"
#include "src/transport/worker_impl.h"

namespace thub::transport {

namespace {
std::string status_text(ucs_status_t st) { return ucs_status_string(st); }

// With gets in flight, never sleep longer than this, in case a transport raises no event (the
// worker's event fd is armed, so completions wake the thread anyway). At 1 ms a chain of 8
// readers woke 8000 times a second for nothing (docs/pipeline.md, "busy sleep").
constexpr auto kBusySleep = std::chrono::microseconds(10000);
constexpr auto kParkedPoll = std::chrono::microseconds(1000);
// ucp_worker_arm says BUSY while UCX cannot sleep: sends wait for room in a peer's
// shared-memory FIFO (a source answering emulated gets), or an event is half delivered. The
// thread keeps progressing then. Only when BUSY lasts this long with nothing progressed does it
// fall back to polling every millisecond: UCX 1.13 also says BUSY for ever, with nothing to
// progress, while a get waits on a peer that stopped reading (SIGSTOP).
constexpr auto kBusySpin = std::chrono::milliseconds(5);
// How many times a context and worker are made while an interface vanishes between the two.
constexpr int kWorkerCreateAttempts = 5;

// The items of a UCX_TLS list ("" for none).
std::vector<std::string> tls_items(const std::string& tls) {
  std::vector<std::string> out;
  size_t start = 0;
  while (!tls.empty()) {
    size_t comma = tls.find(',', start);
    out.push_back(tls.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// True when the list names tcp and self only: every transport detects a failed peer.
bool only_tcp_and_self(const std::string& tls) {
  auto items = tls_items(tls);
  if (items.empty()) return false;
  for (const auto& t : items) {
    if (t != "tcp" && t != "self") return false;
  }
  return true;
}

// True when this machine has an RDMA device UCX can use: then UCX's own transports carry
// reads to other hosts, one-sided and zero-copy, and sockets are not used.
bool rdma_present() {
  uct_component_h* comps = nullptr;
  unsigned n = 0;
  if (uct_query_components(&comps, &n) != UCS_OK) return true;
  bool found = false;
  for (unsigned i = 0; i < n && !found; ++i) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (uct_component_query(comps[i], &attr) != UCS_OK) continue;
    std::string name = attr.name;
    found = (name == "ib" || name == "rdmacm" || name == "gga") && attr.md_resource_count > 0;
  }
  uct_release_component_list(comps);
  return found;
}
}  // namespace

std::string tls_without_tcp(const std::string& tls) {
  auto items = tls_items(tls);
  if (items.empty() || items == std::vector<std::string>{"all"}) return "^tcp";
  if (items[0].size() > 1 && items[0][0] == '^') {  // a list of what to leave out: add tcp to it
    for (const auto& t : items) {
      if (t == "tcp" || t == "^tcp") return tls;
    }
    return tls + ",tcp";
  }
  std::string out;
  for (const auto& t : items) {
    if (t == "tcp" || t.empty()) continue;
    if (t == "all") return "^tcp";
    out += (out.empty() ? "" : ",") + t;
  }
  return out.empty() ? "self" : out;
}

namespace {
struct GetOp {
  Worker::Impl* impl;
  std::shared_ptr<Peer> peer;
  GetCallback cb;
  bool orphaned = false;  // the worker is shutting down: complete silently
};

void get_done(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<GetOp*>(user_data);
  op->impl->ops.erase(op);
  if (op->orphaned) {
    delete op;
    ucp_request_free(request);
    return;
  }
  op->impl->outstanding--;
  std::string err;
  if (status != UCS_OK) {
    err = "get from peer failed: " + status_text(status);
    if (op->peer->failed && !op->peer->error.empty()) err += " (" + op->peer->error + ")";
  }
  op->impl->complete(std::move(op->cb), status == UCS_OK, std::move(err));
  delete op;
  ucp_request_free(request);
}

}  // namespace

void Worker::Impl::init() {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) throw Error(Code::kTransport, "ucp_config_read: " + status_text(st));
  if (!opts.net_devices.empty() && !std::getenv("UCX_NET_DEVICES")) {
    ucp_config_modify(config, "NET_DEVICES", opts.net_devices.c_str());
  }
  const char* tls_env = std::getenv("UCX_TLS");
  const std::string tls_asked = tls_env ? tls_env : opts.tls;
  local_failure_detected = only_tcp_and_self(tls_asked);
  process_reads = process_reads_wanted(tls_asked);
  {
    const char* pr = std::getenv("THUB_PROCESS_READS");
    mapped_over_ucx = !(pr && std::string(pr) == "all");
  }
  // THUB_SOCKET_READS=0 keeps peers that need failure handling on UCX's tcp transport (to
  // compare the two paths; docs/faults.md). Otherwise, without an RDMA device, sockets carry
  // those reads, and UCX's tcp transport is left out of this worker altogether: UCX 1.13
  // serves a get over tcp in software, from whatever address the request names, so any peer
  // holding one of our rkeys could read all of this process's memory (docs/security.md). Every
  // process then must agree: a peer that kept tcp and serves no socket reads cannot be read
  // from here (a clear error at the first read), nor read us over UCX.
  const char* sr = std::getenv("THUB_SOCKET_READS");
  serve_sockets = !(sr && std::string(sr) == "0") && (local_failure_detected || !rdma_present());
  tls_in_use = serve_sockets ? tls_without_tcp(tls_asked) : tls_asked;
  if (!tls_in_use.empty() && (!tls_env || tls_in_use != tls_env)) {
    st = ucp_config_modify(config, "TLS", tls_in_use.c_str());
    if (st != UCS_OK) {
      ucp_config_release(config);
      throw Error(Code::kTransport, "UCX_TLS=" + tls_in_use + ": " + status_text(st));
    }
  }
  // Bulk reads over TCP: UCX 1.13 serves a get over TCP as active messages of at most one
  // send segment, 8 KiB by default, so 256 MiB cost 32k sends and as many receive handler
  // calls on every hop. 64 KiB segments cut that 8x (measured in the cluster in a box: a
  // chain of 8 at 1 Gbit/s finished 5-10 % sooner). The environment still wins.
  // (The transport's own prefix must be left out here: "TCP_TX_SEG_SIZE" is refused.)
  for (const char* key : {"TX_SEG_SIZE", "RX_SEG_SIZE"}) {
    if (serve_sockets) break;  // no tcp in this worker (above): UCX would warn of unused settings
    if (!std::getenv((std::string("UCX_TCP_") + key).c_str())) {
      st = ucp_config_modify(config, key, "64K");
      if (st != UCS_OK) std::fprintf(stderr, "tensorhub: warning: UCX TCP_%s not set: %s\n", key, status_text(st).c_str());
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  // WAKEUP lets an idle progress thread sleep until a peer's request arrives: UCX 1.13
  // emulates gets of user memory with active messages that the source's worker answers (over
  // shared memory too: its zero-copy cma lane serves rendezvous, not RMA, whatever features
  // are asked for), so the source must wake fast and keep progressing while it answers.
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  // The context lists the network interfaces when it is made, the worker opens them: one that
  // goes away in between (a container's or a namespace's veth torn down) fails the worker
  // with "No such device". The context is made again from a fresh list, a few times.
  for (int attempt = 1;; ++attempt) {
    st = ucp_init(&params, config, &ctx);
    if (st != UCS_OK) {
      ucp_config_release(config);
      throw Error(Code::kTransport, "ucp_init: " + status_text(st));
    }
    st = ucp_worker_create(ctx, &wp, &worker);
    if (st == UCS_OK) break;
    ucp_cleanup(ctx);
    ctx = nullptr;
    if (st != UCS_ERR_NO_DEVICE || attempt == kWorkerCreateAttempts) {
      ucp_config_release(config);
      throw Error(Code::kTransport, "ucp_worker_create: " + status_text(st));
    }
  }
  ucp_config_release(config);
  ucp_address_t* a = nullptr;
  size_t alen = 0;
  st = ucp_worker_get_address(worker, &a, &alen);
  if (st != UCS_OK) throw Error(Code::kTransport, "ucp_worker_get_address: " + status_text(st));
  address.assign(reinterpret_cast<const char*>(a), alen);
  ucp_worker_release_address(worker, a);
  // Sockets also serve readers in other datacenters (wan_transport=socket, the default), so
  // every labelled worker listens, RDMA device or not.
  if (serve_sockets || (!opts.datacenter.empty() && opts.wan == WorkerOptions::Wan::kSocket)) {
    const char* env = std::getenv("UCX_NET_DEVICES");
    server = std::make_unique<ReadServer>(local_ipv4(env ? env : opts.net_devices));
  }
  if (server || process_reads || !opts.datacenter.empty()) {
    address = encode_address(address, server ? server->endpoint() : SocketEndpoint{},
                             process_reads ? identity.identity() : ProcessIdentity{}, opts.datacenter);
  }
  if (ucp_worker_get_efd(worker, &ucx_fd) != UCS_OK) ucx_fd = -1;
  wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) throw Error(Code::kNoMemory, "eventfd failed");
}

void Worker::Impl::wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof one);
}

// Sleeps until a command, a timer, or (when the worker could be armed) a UCX event.
void Worker::Impl::sleep_until(Clock::time_point until) {
  {
    std::lock_guard<std::mutex> lk(mu);
    if (stop || !queue.empty()) return;
  }
  bool armed = false;
  if (ucx_fd >= 0) {
    ucs_status_t st = ucp_worker_arm(worker);
    if (st == UCS_ERR_BUSY) {
      // Progress again (see kBusySpin). The previous version of this loop slept after a few
      // BUSY turns, and both ends of a shared-memory transfer then answered each other once a
      // millisecond (256 MiB: 580 ms instead of 25).
      auto now = Clock::now();
      if (progressed_since_sleep || busy_since == Clock::time_point{}) busy_since = now;
      progressed_since_sleep = false;
      if (now - busy_since < kBusySpin) return;
    } else {
      busy_since = Clock::time_point{};
    }
    armed = st == UCS_OK;
  }
  progressed_since_sleep = false;
  // Nanoseconds, not poll()'s milliseconds: a sleep under 1 ms (the busy cap) must not
  // truncate to 0 and turn the loop into a spin. Without an armed worker, poll UCX at least
  // every millisecond.
  int64_t left = std::chrono::duration_cast<std::chrono::nanoseconds>(until - Clock::now()).count();
  left = std::max<int64_t>(0, armed ? left : std::min<int64_t>(left, 1000000));
  timespec ts{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
  std::vector<pollfd> fds = {{wake_fd, POLLIN, 0}, {ucx_fd, POLLIN, 0}};
  if (!armed) fds.pop_back();
  add_socket_fds();
  fds.insert(fds.end(), socket_fds.begin(), socket_fds.end());
  ::ppoll(fds.data(), fds.size(), &ts, nullptr);
  uint64_t v;
  while (::read(wake_fd, &v, sizeof v) > 0) {
  }
}

void Worker::Impl::loop() {
  const auto spin_window = std::chrono::microseconds(opts.spin_us);
  auto last_active = Clock::now();
  for (;;) {
    std::deque<std::function<void()>> work;
    {
      std::unique_lock<std::mutex> lk(mu);
      if (stop) break;
      work.swap(queue);
      timers.merge(pending_timers);
    }
    bool active = !work.empty();
    for (auto& fn : work) fn();
    auto now = Clock::now();
    while (!timers.empty() && timers.begin()->first <= now) {
      auto fn = std::move(timers.begin()->second);
      timers.erase(timers.begin());
      fn();
      active = true;
    }
    unsigned n = 0;
    for (int i = 0; i < 64; ++i) {
      unsigned k = ucp_worker_progress(worker);
      n += k;
      if (k == 0) break;
    }
    reap_closing();
    // A poll() per pass costs shared-memory transfers about 7 % (measured, docs/faults.md):
    // with no socket peer and no reader connected only the listening socket matters, and one
    // pass in 16 is soon enough for it (the idle sleep polls it too).
    bool socket_work = server && server->connections() > 0;
    for (auto it = peers.begin(); !socket_work && it != peers.end(); ++it) socket_work = it->second->sock != nullptr;
    if (socket_work || ++socket_passes % 16 == 0) n += static_cast<unsigned>(progress_sockets());
    n += static_cast<unsigned>(progress_process_reads());
    now = Clock::now();
    if (n > 0) progressed_since_sleep = true;
    if (n > 0 || active || (outstanding > 0 && ucx_fd < 0)) last_active = now;
    if (now - last_active > spin_window) {
      auto until = now + (outstanding > 0 ? std::chrono::duration_cast<Clock::duration>(kBusySleep)
                                          : std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(1)));
      {
        std::lock_guard<std::mutex> lk(mu);
        timers.merge(pending_timers);
      }
      if (!timers.empty() && timers.begin()->first < until) until = timers.begin()->first;
      // A parked socket read waits for a counter that the copy engine may move (staging
      // behind a publish) without waking this thread: look again within a millisecond.
      if (server && server->parked()) until = std::min<Clock::time_point>(until, now + kParkedPoll);
      sleep_until(until);
    }
  }
}

void Worker::Impl::shutdown() {
  // Drop timers (they may hold references to peers), then close every endpoint.
  timers.clear();
  pending_timers.clear();
  rkey_index.clear();
  rkeys.clear();
  // Gets that never completed (abandoned on a dead or stopped peer) give up their callbacks
  // now, while the worker lives: those hold the transfers and their rkeys, which must go
  // before the worker does. UCX may still complete the requests while it destroys the
  // endpoints; what it does not complete is freed after it.
  {
    std::vector<GetCallback> callbacks;
    for (void* p : ops) {
      auto* op = static_cast<GetOp*>(p);
      op->orphaned = true;
      callbacks.push_back(std::move(op->cb));
    }
  }
  // Socket reads end with their sockets; their callbacks were taken above or never run.
  for (auto& [addr, p] : peers) {
    p->sock.reset();
    p->proc.reset();
  }
  server.reset();
  // Endpoints to abandoned (dead) peers are left to ucp_worker_destroy: a flush would wait
  // for them forever, and FORCE needs error handling on both sides.
  abandoned.clear();
  // Endpoints without error handling are left to ucp_worker_destroy too: their peer may
  // already be gone, and a flush towards it only ends in an "Endpoint timeout" error.
  for (auto& [addr, p] : peers) {
    if (!p->ep || !p->error_handling) continue;
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void* r = ucp_ep_close_nbx(p->ep, &prm);
    if (UCS_PTR_IS_PTR(r)) closing.push_back(r);
    p->ep = nullptr;
  }
  peers.clear();
  auto deadline = Clock::now() + std::chrono::seconds(2);
  while (!closing.empty() && Clock::now() < deadline) {
    ucp_worker_progress(worker);
    reap_closing();
  }
  ucp_worker_destroy(worker);
  worker = nullptr;
  for (void* p : ops) delete static_cast<GetOp*>(p);
  ops.clear();
  ucp_cleanup(ctx);
  ctx = nullptr;
}

void Worker::Impl::reap_closing() {
  for (size_t i = 0; i < closing.size();) {
    if (ucp_request_check_status(closing[i]) != UCS_INPROGRESS) {
      ucp_request_free(closing[i]);
      closing[i] = closing.back();
      closing.pop_back();
    } else {
      ++i;
    }
  }
}

void Worker::Impl::fail_peer(Peer* p, ucs_status_t st) {
  p->failed = true;
  if (p->error.empty()) p->error = status_text(st);
}

Worker::Worker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<Worker> Worker::create(const WorkerOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  std::promise<void> ready;
  auto started = ready.get_future();
  Impl* ip = impl.get();
  impl->thread = std::thread([ip, &ready] {
    try {
      ip->init();
    } catch (...) {
      ready.set_exception(std::current_exception());
      return;
    }
    ip->thread_id = std::this_thread::get_id();
    ready.set_value();
    ip->loop();
    ip->shutdown();
  });
  try {
    started.get();
  } catch (...) {
    impl->thread.join();
    throw;
  }
  return std::unique_ptr<Worker>(new Worker(std::move(impl)));
}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stop = true;
  }
  impl_->wake();
  if (impl_->thread.joinable()) impl_->thread.join();
}

const std::string& Worker::address() const { return impl_->address; }

bool Worker::on_progress_thread() const { return std::this_thread::get_id() == impl_->thread_id; }

void Worker::Impl::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lk(mu);
    queue.push_back(std::move(fn));
  }
  wake();
}

void Worker::post(std::function<void()> fn) { impl_->post(std::move(fn)); }

// UCX may complete a get inside ucp_get_nbx, NO_IMM_CMPL notwithstanding (the self
// transport, shared memory): its callback then runs before get() returns. A caller that
// issues the next get from the callback (Job::pump) would recurse once per chunk, and see its
// own state half updated; so such a completion waits for the loop.
void Worker::Impl::complete(GetCallback cb, bool ok, std::string err) {
  if (in_ucx_call == 0) return cb(ok, err);
  post([cb = std::move(cb), ok, err = std::move(err)] { cb(ok, err); });
}

void Worker::post_after(int64_t usec, std::function<void()> fn) {
  auto when = Clock::now() + std::chrono::microseconds(usec);
  if (on_progress_thread()) {
    impl_->timers.emplace(when, std::move(fn));
    return;
  }
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->pending_timers.emplace(when, std::move(fn));
  }
  impl_->wake();
}

void Worker::call(const std::function<void()>& fn) {
  if (on_progress_thread()) {
    fn();
    return;
  }
  std::promise<void> done;
  auto f = done.get_future();
  // The exception travels as an exception_ptr the caller owns, set before the signal: this
  // thread drops its last reference to it before the caller can run, and the caller frees
  // it. (Passed with set_exception, which copies it, this thread dropped a reference after
  // the caller was woken, and the free could come from here after the caller had read it:
  // correct through the C++ runtime's atomic reference count, which ThreadSanitizer does
  // not see, so it reported a race.)
  std::exception_ptr failed;
  post([&] {
    try {
      fn();
    } catch (...) {
      failed = std::current_exception();
    }
    done.set_value();
  });
  f.get();
  if (failed) std::rethrow_exception(failed);
}

ReadPath Worker::read_path(const Peer& peer, const RemoteKey& key) { return read_path_for(peer, key).kind; }

bool Worker::watches(const Peer& peer, const RemoteKey& key, const RemoteKey& word_key) {
  return read_path_for(peer, key).read_watched != nullptr && key.token() != 0 && word_key.token() != 0;
}

void Worker::get_watched(const std::shared_ptr<Peer>& peer, void* local, size_t len, uint64_t remote,
                         const RemoteKey& key, const Watch& watch, GetCallback cb) {
  const ReadPathOps& path = read_path_for(*peer, key);
  if (peer->failed || !path.read_watched || !watch.key || !watch.sample) {
    std::string err = peer->failed ? "peer failed: " + peer->error : "this path cannot watch the source's counter";
    impl_->post([cb = std::move(cb), err = std::move(err)] { cb(false, err); });
    return;
  }
  path.read_watched(*impl_, peer, local, len, remote, key, watch, std::move(cb));
}

bool Worker::across(const Peer& peer) { return peer.across; }

std::optional<WorkerOptions::Wan> parse_wan(const std::string& s) {
  if (s == "socket") return WorkerOptions::Wan::kSocket;
  if (s == "ucx") return WorkerOptions::Wan::kUcx;
  if (s == "same") return WorkerOptions::Wan::kSame;
  return std::nullopt;
}

const char* wan_name(WorkerOptions::Wan w) {
  switch (w) {
    case WorkerOptions::Wan::kSocket: return "socket";
    case WorkerOptions::Wan::kUcx: return "ucx";
    case WorkerOptions::Wan::kSame: return "same";
  }
  return "?";
}

void Worker::get(const std::shared_ptr<Peer>& peer, void* local, size_t len, uint64_t remote,
                 const RemoteKey& key, GetCallback cb) {
  if (peer->failed || (!peer->ep && !Impl::own_path(*peer))) {  // answered from the loop too, as every completion
    impl_->post([cb = std::move(cb), err = "peer failed: " + peer->error] { cb(false, err); });
    return;
  }
  if (peer->proc && !key.region_contains(remote, len)) {
    // Outside the region the rkey names (a process read then checks what the source itself
    // lists; UCX's mapped segment was checked against it when the rkey was unpacked).
    impl_->post([cb = std::move(cb)] { cb(false, "read outside the region the source registered"); });
    return;
  }
  read_path_for(*peer, key).read(*impl_, peer, local, len, remote, key, std::move(cb));
}

void Worker::Impl::ucx_get(const std::shared_ptr<Peer>& peer, void* local, size_t len, uint64_t remote,
                           const RemoteKey& key, GetCallback cb) {
  auto* op = new GetOp{this, peer, std::move(cb)};
  ops.insert(op);
  ucp_request_param_t prm{};
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  prm.cb.send = get_done;
  prm.user_data = op;
  outstanding++;
  in_ucx_call++;
  ucs_status_ptr_t r = ucp_get_nbx(peer->ep, local, len, remote, static_cast<ucp_rkey_h>(key.handle()), &prm);
  if (UCS_PTR_IS_ERR(r)) {
    outstanding--;
    ucs_status_t st = UCS_PTR_STATUS(r);
    fail_peer(peer.get(), st);
    complete(std::move(op->cb), false, "ucp_get_nbx: " + status_text(st));
    ops.erase(op);
    delete op;
  } else if (r == nullptr) {  // not expected with NO_IMM_CMPL, but complete it anyway
    outstanding--;
    complete(std::move(op->cb), true, {});
    ops.erase(op);
    delete op;
  }
  in_ucx_call--;
}


std::string Worker::describe() const {
  std::string out;
  const_cast<Worker*>(this)->call([&] {
    char* buf = nullptr;
    size_t len = 0;
    FILE* f = open_memstream(&buf, &len);
    if (!f) return;
    ucp_context_print_info(impl_->ctx, f);
    ucp_worker_print_info(impl_->worker, f);
    ucp_context_attr_t attr{};
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    if (ucp_context_query(impl_->ctx, &attr) == UCS_OK) {
      std::fprintf(f, "# memory types:");
      for (int t = 0; t < UCS_MEMORY_TYPE_LAST; ++t) {
        if (attr.memory_types & (1ull << t)) std::fprintf(f, " %s", ucs_memory_type_names[t]);
      }
      std::fprintf(f, "\n");
    }
    if (!impl_->opts.datacenter.empty()) {
      std::fprintf(f, "# datacenter %s; reads from other datacenters: %s (wan_transport)\n",
                   impl_->opts.datacenter.c_str(),
                   impl_->opts.wan == WorkerOptions::Wan::kSocket ? "over sockets"
                   : impl_->opts.wan == WorkerOptions::Wan::kUcx  ? "UCX gets"
                                                                  : "as from this datacenter");
    }
    if (impl_->server && impl_->serve_sockets) {
      SocketEndpoint e = impl_->server->endpoint();
      std::fprintf(f, "# reads from peers with failure handling: over sockets (no RDMA device), port %u, at",
                   static_cast<unsigned>(e.port));
      for (uint32_t ip : e.ipv4) {
        auto* b = reinterpret_cast<const unsigned char*>(&ip);
        std::fprintf(f, " %u.%u.%u.%u", b[0], b[1], b[2], b[3]);
      }
      std::fprintf(f, "\n");
      std::fprintf(f, "# UCX transports: %s (tcp left out: sockets serve other hosts)\n", impl_->tls_in_use.c_str());
    } else {
      std::fprintf(f, "# reads from peers with failure handling: UCX (an RDMA device is present, or THUB_SOCKET_READS=0)\n");
    }
    std::fprintf(f, "# reads from peers on this host: %s\n",
                 impl_->process_reads ? "process_vm_readv where the kernel allows it (else UCX)"
                                      : "UCX (THUB_PROCESS_READS=0, or UCX_TLS without shared memory)");
    // The table a source's path is chosen from (read_paths.h), in the order it is offered.
    std::fprintf(f, "# read paths, in the order a source is offered to them:");
    for (const ReadPathOps* o : kSourceOrder) std::fprintf(f, " %s", o->name);
    std::fprintf(f, " (ucx_mapped per region UCX allocated at a process-read source; THUB_DEBUG=1 logs each source's)\n");
    std::fclose(f);
    out.assign(buf, len);
    std::free(buf);
  });
  return out;
}

bool Worker::can_map_cuda() const {
  unsigned maj = 0, min = 0, rel = 0;
  ucp_get_version(&maj, &min, &rel);
  if (maj < 1 || (maj == 1 && min < 16)) return false;
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(impl_->ctx, &attr) != UCS_OK) return false;
  return (attr.memory_types & (1ull << UCS_MEMORY_TYPE_CUDA)) != 0;
}

std::string ucx_worker_address(const std::string& address) { return decode_address(address).ucx; }

std::string ucx_rkey(const std::string& packed_rkey) { return decode_rkey(packed_rkey).ucx; }

std::string ucx_version() {
  unsigned maj = 0, min = 0, rel = 0;
  ucp_get_version(&maj, &min, &rel);
  return std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel);
}

}  // namespace thub::transport
