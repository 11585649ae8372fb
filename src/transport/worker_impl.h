// The worker's private parts, shared by worker.cc (UCX), peers.cc and own_paths.cc (the reads that
// bypass UCX: sockets, process reads). Inside src/transport only.
#pragma once

#include <poll.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "src/transport/process_reads.h"
#include "src/transport/socket_reads.h"
#include "src/transport/wire_format.h"
#include "src/transport/worker.h"

namespace thub::transport {

using Clock = std::chrono::steady_clock;

// An endpoint to one remote worker. Owned by the cache and by the operations that use it.
class Peer {
 public:
  ucp_ep_h ep = nullptr;
  std::unique_ptr<ReadConnection> sock;  // reads over a socket instead of `ep` (socket_reads.h)
  std::unique_ptr<ProcessReader> proc;   // reads with process_vm_readv instead (process_reads.h)
  std::string address;
  int lane = 0;
  bool failed = false;
  bool error_handling = false;
  bool across = false;     // in another datacenter (WorkerOptions::wan picks its path)
  std::string error;
};

struct Worker::Impl {
  WorkerOptions opts;
  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  std::string address;
  std::thread thread;
  std::thread::id thread_id;

  std::mutex mu;
  // eventfd: commands and timers for the progress thread. Closed by ~Impl, after the thread
  // is joined, never by the thread itself: ~Worker writes to it after setting stop, when the
  // thread may already be past its loop; a close there let that write reach a closed
  // descriptor, or another file that had reused its number.
  int wake_fd = -1;
  int ucx_fd = -1;     // the worker's event fd (UCP_FEATURE_WAKEUP), -1 if unavailable
  std::deque<std::function<void()>> queue;
  std::multimap<Clock::time_point, std::function<void()>> timers;  // progress thread only
  std::multimap<Clock::time_point, std::function<void()>> pending_timers;  // under mu
  bool stop = false;

  std::map<std::pair<std::string, int>, std::shared_ptr<Peer>> peers;  // (address, lane); progress thread only
  std::vector<void*> closing;                          // ep close requests in flight
  std::vector<std::shared_ptr<Peer>> abandoned;        // forgotten peers, closed at shutdown
  size_t outstanding = 0;                               // gets in flight
  std::unordered_set<void*> ops;                        // their GetOps (shutdown frees the orphans)
  // Unpacked rkeys by (endpoint, packed rkey), most recently used first (Worker::remote_key).
  using RkeyKey = std::pair<const Peer*, std::string>;
  std::list<std::pair<RkeyKey, std::shared_ptr<RemoteKey>>> rkeys;
  std::map<RkeyKey, decltype(rkeys)::iterator> rkey_index;
  void forget_rkeys(const Peer* p);
  bool serve_sockets = false;  // sockets carry reads from peers with failure handling; UCX has no tcp
  std::string tls_in_use;      // the UCX_TLS list the context was made with ("" = UCX chooses)
  bool local_failure_detected = false;  // every transport in use detects a failed peer (tcp, self)
  // Reads from peers that need failure handling go over sockets (socket_reads.h): UCX would
  // carry them over its tcp transport (no RDMA device, or UCX_TLS allows only tcp). Readers
  // in another datacenter use them too (WorkerOptions::wan, socket: the server then runs
  // whatever serve_sockets says).
  std::unique_ptr<ReadServer> server;
  // `a` names another datacenter than ours (both labelled).
  [[nodiscard]] bool across(const DecodedAddress& a) const {
    return !opts.datacenter.empty() && !a.datacenter.empty() && a.datacenter != opts.datacenter;
  }
  using SocketDone = std::vector<std::pair<ReadConnection::Done, std::string>>;
  std::vector<pollfd> socket_fds;
  void add_socket_fds();
  int progress_sockets();
  unsigned socket_passes = 0;  // loop passes, to poll idle sockets only now and then
  void finish_socket_reads(SocketDone& done);
  // Reads from sources on this host go through their memory (process_reads.h), unless
  // THUB_PROCESS_READS=0 or UCX_TLS leaves shared memory out; the nonce word is what readers
  // check this process by.
  bool process_reads = false;
  ProcessIdentityWord identity;
  std::set<std::string> path_logged;  // sources whose path was logged (THUB_DEBUG: once each)
  // Regions UCX allocated are read over UCX's mapped segment even from a process-read peer
  // (RemoteKey), unless THUB_PROCESS_READS=all.
  bool mapped_over_ucx = true;
  int progress_process_reads();
  // A get over `p`'s UCX endpoint (ucp_get_nbx): the UCX entries of read_paths.h.
  void ucx_get(const std::shared_ptr<Peer>& p, void* local, size_t len, uint64_t remote, const RemoteKey& key,
               GetCallback cb);
  // Read over a path of ours (process reads or a socket), with no UCX endpoint.
  static bool own_path(const Peer& p) { return p.sock || p.proc; }
  // Inside ucp_get_nbx or ucp_ep_close_nbx: a completion now is deferred to the loop (see
  // Worker::get; a forced close completes the endpoint's gets with CANCELED inside the call).
  int in_ucx_call = 0;
  Clock::time_point busy_since{};     // arm has said BUSY, with nothing progressed, since then
  bool progressed_since_sleep = false;  // ucp_worker_progress did something since the last attempt

  ~Impl() {
    if (wake_fd >= 0) ::close(wake_fd);
  }
  void init();
  std::string serve_region(uint64_t addr, size_t len, std::string ucx_rkey, bool allocated = false);
  // Gives `p` a UCX endpoint to the worker at `ucx_address` (error handling as p says).
  void connect(Peer& p, const std::string& ucx_address);
  void loop();
  void shutdown();
  void fail_peer(Peer* p, ucs_status_t st);
  void reap_closing();  // free endpoint-close requests that have completed
  // Drops a cached endpoint: closed (FORCE, cancelling what is in flight) when it has error
  // handling, else kept open until the worker goes (closing it could block on a dead peer).
  void retire(const std::shared_ptr<Peer>& p);
  void wake();
  void sleep_until(Clock::time_point until);
  void post(std::function<void()> fn);
  // Runs a get's callback, later (from the loop) if the get is still being submitted.
  void complete(GetCallback cb, bool ok, std::string err);
};

}  // namespace thub::transport
