// The read paths' entries (read_paths.h): process reads and the transport's own sockets
// (driven by own_paths.cc's progress functions), UCX's mapped segment and UCX gets (worker.cc's
// endpoint and ucp_get_nbx). The decisions are the ones Worker::peer() and Worker::get() made
// inline before (issue 21 item 1 moved them here unchanged).
#include "src/transport/read_paths.h"

#include <utility>

namespace thub::transport {
namespace {

// A source in another datacenter is read over the WAN path (WorkerOptions::wan): only the
// entry that names it takes it ("same": every entry, as for a source inside).
bool wan_refuses(const Worker::Impl& w, const Peer& p, ReadPath path) {
  if (!p.across) return false;
  switch (w.opts.wan) {
    case WorkerOptions::Wan::kSocket: return path != ReadPath::kSocket;
    case WorkerOptions::Wan::kUcx: return path != ReadPath::kUcxGet;
    case WorkerOptions::Wan::kSame: return false;
  }
  return false;
}

// ---- process_vm_readv of a same-host source (process_reads.h) -------------------------------
// Taken when the source advertises its process identity and the kernel lets us read it (its
// identity word checks out); refused with the probe's reason.
bool process_open(Worker::Impl& w, Peer& p, const DecodedAddress& a, std::string* why) {
  if (!w.process_reads || a.proc.pid == 0 || wan_refuses(w, p, ReadPath::kProcess)) return false;
  auto reader = std::make_unique<ProcessReader>(a.proc);
  *why = reader->probe();
  if (!why->empty()) return false;
  p.proc = std::move(reader);
  return true;
}
// Every region but one UCX allocated, which is read over UCX's mapped segment (remote_key).
bool process_reads_key(const Peer& p, const RemoteKey& key) { return p.proc && !key.over_ucx(); }
void process_read(Worker::Impl& w, const std::shared_ptr<Peer>& p, void* local, size_t len, uint64_t remote,
                  const RemoteKey& key, GetCallback cb) {
  w.outstanding++;
  p->proc->read(local, len, remote, key.slot(), key.slot_key(), [&w, cb = std::move(cb)](bool ok, const std::string& err) {
    w.outstanding--;
    cb(ok, err);
  });
}
void process_close(Peer& p, const std::string& why, Worker::Impl::SocketDone* done) {
  if (p.proc) p.proc->close(why, done);
}

// ---- the transport's own sockets, towards peers UCX would reach over its tcp transport ------
// Taken for a peer that needs failure handling when this worker serves socket reads (no RDMA
// device, or only tcp allowed: socket_reads.h) and the peer serves them too; and for a peer
// in another datacenter with wan_transport=socket when it serves them (else UCX's endpoint
// takes it, with the reason logged).
bool socket_open(Worker::Impl& w, Peer& p, const DecodedAddress& a, std::string* why) {
  if (wan_refuses(w, p, ReadPath::kSocket)) return false;
  const bool wan = p.across && w.opts.wan == WorkerOptions::Wan::kSocket;
  if (wan && a.sock.port == 0) {
    *why = "the source in datacenter " + a.datacenter + " serves no socket reads";
    return false;
  }
  if (!wan && (!p.error_handling || !w.serve_sockets || !w.server || a.sock.port == 0)) return false;
  p.sock = std::make_unique<ReadConnection>(a.sock);
  if (p.sock->failed()) {
    p.failed = true;
    p.error = p.sock->error();
  }
  return true;
}
bool socket_reads_key(const Peer& p, const RemoteKey&) { return p.sock != nullptr; }
void socket_read(Worker::Impl& w, const std::shared_ptr<Peer>& p, void* local, size_t len, uint64_t remote,
                 const RemoteKey& key, GetCallback cb) {
  w.outstanding++;
  p->sock->read(local, len, remote, key.token(), [&w, cb = std::move(cb)](bool ok, const std::string& err) {
    w.outstanding--;
    cb(ok, err);
  });
}
void socket_read_watched(Worker::Impl& w, const std::shared_ptr<Peer>& p, void* local, size_t len, uint64_t remote,
                         const RemoteKey& key, const Worker::Watch& watch, GetCallback cb) {
  w.outstanding++;
  ReadWatch rw{watch.remote, watch.key->token(), watch.lo, watch.hi, watch.sample};
  p->sock->read(
      local, len, remote, key.token(),
      [&w, cb = std::move(cb)](bool ok, const std::string& err) {
        w.outstanding--;
        cb(ok, err);
      },
      &rw);
}
void socket_close(Peer& p, const std::string& why, Worker::Impl::SocketDone* done) {
  if (p.sock) p.sock->close(why, done);
}

// ---- UCX: the segment a same-host source allocated through UCX, mapped here ------------------
// Set up per key (Worker::remote_key connects the endpoint), for a process-read peer.
bool mapped_reads_key(const Peer& p, const RemoteKey&) { return p.proc != nullptr; }

// ---- UCX gets over an endpoint: RDMA, or UCX's shared-memory and tcp transports -------------
// Takes any source (the last offered).
bool ucx_open(Worker::Impl& w, Peer& p, const DecodedAddress& a, std::string*) {
  w.connect(p, a.ucx);
  return true;
}
bool ucx_reads_key(const Peer&, const RemoteKey&) { return true; }
void ucx_read(Worker::Impl& w, const std::shared_ptr<Peer>& p, void* local, size_t len, uint64_t remote,
              const RemoteKey& key, GetCallback cb) {
  w.ucx_get(p, local, len, remote, key, std::move(cb));
}

constexpr ReadPathOps kProcess{ReadPath::kProcess, "process_vm_readv", process_open, process_reads_key, process_read,
                               nullptr, process_close};
constexpr ReadPathOps kSocket{ReadPath::kSocket,  "socket",           socket_open, socket_reads_key,
                              socket_read,        socket_read_watched, socket_close};
constexpr ReadPathOps kUcxMapped{ReadPath::kUcxMapped, "ucx_mapped", nullptr, mapped_reads_key, ucx_read, nullptr,
                                 nullptr};
constexpr ReadPathOps kUcxGet{ReadPath::kUcxGet, "ucx_get", ucx_open, ucx_reads_key, ucx_read, nullptr, nullptr};

}  // namespace

const std::array<const ReadPathOps*, 3> kSourceOrder{&kProcess, &kSocket, &kUcxGet};
const std::array<const ReadPathOps*, kReadPathCount> kReadOrder{&kProcess, &kSocket, &kUcxMapped, &kUcxGet};

const ReadPathOps& read_path_ops(ReadPath k) {
  for (const ReadPathOps* o : kReadOrder)
    if (o->kind == k) return *o;
  return kUcxGet;
}

const char* read_path_name(ReadPath p) { return read_path_ops(p).name; }

const ReadPathOps& read_path_for(const Peer& p, const RemoteKey& key) {
  for (const ReadPathOps* o : kReadOrder)
    if (o->reads(p, key)) return *o;
  return kUcxGet;
}

}  // namespace thub::transport
