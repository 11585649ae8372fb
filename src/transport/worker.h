// The data plane of one THUB_Context: one UCP context and one worker, owned by a progress
// thread that is the only thread calling UCX. Other threads hand it work with call()/post().
// No UCX type appears in this header, so layers above need no UCX headers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace thub::transport {

struct WorkerOptions {
  std::string net_devices;  // UCX_NET_DEVICES unless the environment sets it ("" = UCX chooses)
  std::string tls;          // UCX_TLS unless the environment sets it ("" = UCX chooses)
  int64_t spin_us = 20;     // progress thread: spin this long after the last event, then sleep
  // Transports per peer (issue 22 item 4): the worker's `datacenter` label travels in its
  // address; a source whose label differs is read over `wan`, one inside over the usual order
  // (read_paths.h). "" labels nothing: every source is then inside.
  std::string datacenter;
  enum class Wan : uint8_t {
    kSocket,  // the transport's own sockets (TCP), served by every worker (the default)
    kUcx,     // UCX gets, over whatever UCX reaches the source with (RDMA across datacenters)
    kSame,    // no difference: the path a source inside would get
  } wan = Wan::kSocket;
};
// "socket", "ucx", "same" (the info key `wan_transport`); nullopt for anything else.
std::optional<WorkerOptions::Wan> parse_wan(const std::string& s);
const char* wan_name(WorkerOptions::Wan w);

// The UCX_TLS list a worker uses when sockets serve reads to other hosts: `tls` (the list
// asked for, "" = UCX chooses) without UCX's tcp transport, which serves gets in software from
// any address a peer names ("" or "all" -> "^tcp", "^sm" -> "^sm,tcp", "tcp,sm" -> "sm",
// "tcp" -> "self").
std::string tls_without_tcp(const std::string& tls);

class MemoryRegion;
class Peer;
class RemoteKey;

// The ways a read reaches a source's memory, chosen per source by Worker::peer() and
// Worker::remote_key() (the order is that of the stat keys bytes_<path> of the last transfer).
enum class ReadPath : uint8_t {
  kUcxGet,      // ucp_get_nbx: RDMA, or UCX's shared-memory/tcp transports answered by the source
  kSocket,      // the transport's own socket reads (socket_reads.h), towards other hosts over TCP
  kProcess,     // process_vm_readv of a same-host source (process_reads.h)
  kUcxMapped,   // UCX's shared-memory segment of a same-host source, mapped and copied here
};
inline constexpr size_t kReadPathCount = 4;
// The path's name, as in the stat keys bytes_<name> ("process_vm_readv", "socket", ...).
const char* read_path_name(ReadPath p);

// Completion of a get: ok, or the failure text (peer, status).
using GetCallback = std::function<void(bool ok, const std::string& err)>;

class Worker {
 public:
  static std::unique_ptr<Worker> create(const WorkerOptions& opts);  // throws Error
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // The packed UCP worker address that peers connect to.
  [[nodiscard]] const std::string& address() const;

  // Run `fn` on the progress thread and wait for it; exceptions propagate to the caller.
  void call(const std::function<void()>& fn);
  // Run `fn` on the progress thread soon / after `usec` microseconds; do not wait.
  void post(std::function<void()> fn);
  void post_after(int64_t usec, std::function<void()> fn);
  [[nodiscard]] bool on_progress_thread() const;

  // Register host memory for remote reads (any thread). Throws Error(kNoMemory).
  std::unique_ptr<MemoryRegion> map(void* addr, size_t len);
  // Allocate and register `len` bytes of host memory through UCX (any thread): shared memory
  // where UCX can (sysv/posix), which a reader on this host maps and copies from itself,
  // with no work by this process; over UCX 1.13 a get of memory registered with map() is
  // instead answered by this process's worker. `pinned`: also page-locked for CUDA copies
  // (cudaHostRegister) when CUDA is usable. Freed with the region. Throws Error(kNoMemory).
  std::unique_ptr<MemoryRegion> allocate(size_t len, bool pinned = false);

  // ---- progress thread only ----
  // The endpoint to the worker at `address` (created on first use, cached; a failed peer
  // is dropped from the cache so that a later call starts afresh). `error_handling` asks
  // for UCP_ERR_HANDLING_MODE_PEER: UCX 1.13's shared-memory transports have no peer
  // failure handler, so a peer on this host is reached without it (and watched by the
  // caller), a peer on another host with it. Where UCX would carry such a peer's reads over
  // its tcp transport (no RDMA device here, or only tcp allowed), they go over a socket of
  // our own instead (socket_reads.h): UCX 1.13's software gets abort the source when a reader
  // dies at the wrong moment. A peer on this host that advertises its process identity, and
  // whose memory the kernel lets us read, is read with process_vm_readv instead, with no UCX
  // endpoint at all (process_reads.h): UCX 1.13's shared-memory FIFOs wedge when a sender
  // dies mid-send. `lane` picks one of several endpoints to the same worker: each
  // has its own connection (over TCP, its own socket), so that small reads on lane 1
  // (progress counters) do not queue behind bulk reads on lane 0.
  std::shared_ptr<Peer> peer(const std::string& address, bool error_handling, int lane = 0);
  // Forget a peer whose operations will never finish (its process is gone): every lane's
  // endpoint to its worker; later calls to peer() create fresh ones; operations still in
  // flight are abandoned.
  void forget_peer(const std::shared_ptr<Peer>& peer);
  // Close every lane's endpoint to a peer that stopped answering, cancelling what is in
  // flight to it, where the endpoints have error handling (otherwise UCX cannot close them
  // safely and they stay open; see forget_peer). Later calls to peer() create fresh ones.
  void cancel_peer(const std::shared_ptr<Peer>& peer);
  // True when every transport this worker may use detects a failed peer (TCP and self only,
  // e.g. transfer_mode=tcp), so that peers on this host get error handling too.
  [[nodiscard]] bool detects_local_peer_failure() const;
  // True when cancelling this peer (cancel_peer, forget_peer) leaves none of its reads able
  // to land later: process reads are synchronous, and the ones still queued are dropped.
  [[nodiscard]] bool reads_cancel_cleanly(const std::shared_ptr<Peer>& peer) const;
  // The unpacked form of a peer's packed rkey, cached per endpoint: unpacking one of memory a
  // peer allocated through UCX attaches (maps) its shared-memory segment here, and doing
  // that for every transfer cost a page fault per page read (1 GiB: ~0.3 s). At most
  // kRemoteKeyCache keys are kept (least recently used go first); a retired peer's go with it.
  std::shared_ptr<RemoteKey> remote_key(const std::shared_ptr<Peer>& peer, const std::string& packed);
  static constexpr size_t kRemoteKeyCache = 1024;
  // One-sided read of `len` bytes at `remote` into `local`; `cb` runs on this thread, never
  // before get() has returned (a completion inside UCX's call is deferred to the loop).
  void get(const std::shared_ptr<Peer>& peer, void* local, size_t len, uint64_t remote,
           const RemoteKey& key, GetCallback cb);
  // The path get() takes for reads of `key`'s memory at `peer`.
  [[nodiscard]] static ReadPath read_path(const Peer& peer, const RemoteKey& key);
  // A get that watches an 8-byte word of the same source (its progress counter, at `remote`
  // in `key`'s memory): the source holds the read back while the word lies in [lo, hi), and
  // stores the word's value as it was after the data was read into *sample before `cb` runs
  // (socket_reads.h: a parked read, and the seqlock's vouch with the data). Only where
  // watches() says so.
  struct Watch {
    uint64_t remote = 0;
    const RemoteKey* key = nullptr;
    uint64_t lo = 0, hi = 0;
    uint64_t* sample = nullptr;
  };
  void get_watched(const std::shared_ptr<Peer>& peer, void* local, size_t len, uint64_t remote, const RemoteKey& key,
                   const Watch& watch, GetCallback cb);
  // True when the path of reads of `key`'s memory at `peer` can watch a word of `word_key`'s.
  [[nodiscard]] static bool watches(const Peer& peer, const RemoteKey& key, const RemoteKey& word_key);
  // True when `peer` is in another datacenter than this worker (WorkerOptions::datacenter):
  // its reads then take the WAN path (WorkerOptions::wan).
  [[nodiscard]] static bool across(const Peer& peer);

  // True when this UCX can register and move CUDA memory itself: its context lists the
  // CUDA memory type and it is >= 1.16 (older RMA paths treat every buffer as host memory).
  [[nodiscard]] bool can_map_cuda() const;

  // Text for tensorhub-info: UCX version, transports/devices in use, memory types.
  [[nodiscard]] std::string describe() const;

  struct Impl;

 private:
  friend class MemoryRegion;
  void unmap(void* memh, const std::string& packed_rkey);
  explicit Worker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A registered buffer: a UCP memory handle and its packed remote key. Unmapped on destruction
// (and freed, when Worker::allocate made it).
class MemoryRegion {
 public:
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  [[nodiscard]] const std::string& packed_rkey() const { return rkey_; }
  [[nodiscard]] uint64_t address() const { return addr_; }
  [[nodiscard]] size_t length() const { return len_; }
  [[nodiscard]] char* data() const { return reinterpret_cast<char*>(addr_); }
  [[nodiscard]] bool allocated() const { return allocated_; }
  [[nodiscard]] bool pinned() const { return pinned_; }
  // True when [p, p + n) lies inside this region.
  [[nodiscard]] bool contains(const void* p, size_t n) const;

 private:
  friend class Worker;
  MemoryRegion(Worker* w, void* memh, std::string rkey, uint64_t addr, size_t len)
      : worker_(w), memh_(memh), rkey_(std::move(rkey)), addr_(addr), len_(len) {}
  Worker* worker_;
  void* memh_;
  std::string rkey_;
  uint64_t addr_;
  size_t len_;
  bool allocated_ = false;
  bool pinned_ = false;
};

// A peer's packed rkey unpacked on one endpoint (progress thread only).
class RemoteKey {
 public:
  RemoteKey(const std::shared_ptr<Peer>& peer, const std::string& packed);  // throws Error
  ~RemoteKey();
  RemoteKey(const RemoteKey&) = delete;
  RemoteKey& operator=(const RemoteKey&) = delete;
  [[nodiscard]] void* handle() const { return rkey_; }
  // What a read over a socket presents (0 when the region is not served over sockets).
  [[nodiscard]] uint64_t token() const { return token_; }
  // For process reads: true when [remote, remote + len) lies inside the region the rkey names.
  // Read over UCX although the peer is read with process reads: a region UCX allocated, whose
  // segment this process maps (Worker::remote_key).
  [[nodiscard]] bool over_ucx() const { return over_ucx_; }
  [[nodiscard]] bool region_contains(uint64_t remote, uint64_t len) const {
    return remote >= region_addr_ && len <= region_len_ && remote - region_addr_ <= region_len_ - len;
  }
  // The slot of the source's table of served regions that lists it (process reads).
  [[nodiscard]] uint32_t slot() const { return slot_; }
  [[nodiscard]] uint64_t slot_key() const { return slot_key_; }

 private:
  std::shared_ptr<Peer> peer_;
  void* rkey_ = nullptr;
  uint64_t token_ = 0;
  uint64_t region_addr_ = 0, region_len_ = 0;
  uint32_t slot_ = 0;
  uint64_t slot_key_ = 0;
  bool over_ucx_ = false;
};

// Library version of the UCX in use, e.g. "1.13.1".
std::string ucx_version();

// The UCX worker address inside Worker::address(), and the UCX rkey inside
// MemoryRegion::packed_rkey() (both carry the socket path's details as well; tests that talk
// to a worker with plain UCX need the bare UCX part).
std::string ucx_worker_address(const std::string& address);
std::string ucx_rkey(const std::string& packed_rkey);

}  // namespace thub::transport
