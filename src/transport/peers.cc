// A worker's peers: one endpoint per source address and lane, its read path chosen once
// (read_paths.h), the remote keys read through it (a bounded cache), and how a peer is given
// up: forgotten when its process is gone, retired (closed, what is in flight failed) when it
// stopped answering.
#include <ucp/api/ucp.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>

#include "src/common/status.h"
#include "src/transport/read_paths.h"
#include "src/transport/wire_format.h"
#include "src/transport/worker.h"
#include "src/transport/worker_impl.h"

namespace thub::transport {

namespace {
void ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<Peer*>(arg);
  peer->failed = true;
  peer->error = std::string("endpoint error: ") + ucs_status_string(status);
}
}  // namespace

std::shared_ptr<Peer> Worker::peer(const std::string& address, bool error_handling, int lane) {
  const std::pair<std::string, int> key{address, lane};
  auto it = impl_->peers.find(key);
  if (it != impl_->peers.end()) {
    if (!it->second->failed) return it->second;
    // A failed endpoint is closed and forgotten; its operations already completed with errors.
    std::shared_ptr<Peer> old = it->second;
    impl_->peers.erase(it);
    impl_->retire(old);
  }
  auto p = std::make_shared<Peer>();
  p->address = address;
  p->lane = lane;
  p->error_handling = error_handling;
  const DecodedAddress a = decode_address(address);
  p->across = impl_->across(a);
  // The source's path: the first entry that takes it (read_paths.h; UCX's endpoint takes any).
  std::string refused;
  const ReadPathOps* taken = nullptr;
  for (const ReadPathOps* o : kSourceOrder) {
    std::string why;
    if (o->open(*impl_, *p, a, &why)) {
      taken = o;
      break;
    }
    if (!why.empty()) refused += std::string("; not ") + o->name + ": " + why;
  }
  // Said once per source, where asked (THUB_DEBUG).
  if (taken && std::getenv("THUB_DEBUG") && impl_->path_logged.insert(address).second) {
    const std::string where =
        p->across ? " in datacenter " + a.datacenter + " (wan_transport=" + wan_name(impl_->opts.wan) + ")" : "";
    std::fprintf(stderr, "tensorhub: debug: reads from pid %u%s over %s%s\n", static_cast<unsigned>(a.proc.pid),
                 where.c_str(), taken->name, refused.c_str());
  }
  impl_->peers[key] = p;
  return p;
}

void Worker::Impl::connect(Peer& p, const std::string& ucx_address) {
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep.address = reinterpret_cast<const ucp_address_t*>(ucx_address.data());
  if (p.error_handling) {
    ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = ep_error;
    ep.err_handler.arg = &p;
  }
  ucs_status_t st = ucp_ep_create(worker, &ep, &p.ep);
  if (st != UCS_OK) throw Error(Code::kTransport, "ucp_ep_create: " + std::string(ucs_status_string(st)));
}

void Worker::forget_peer(const std::shared_ptr<Peer>& peer) {
  // The process is gone: every endpoint to it (each lane) goes. The endpoints themselves are
  // left open: closing one without error handling could block on a dead peer. They are
  // released with the worker.
  auto abandon = [this](const std::shared_ptr<Peer>& p) {
    impl_->forget_rkeys(p.get());
    p->failed = true;
    if (p->error.empty()) p->error = "forgotten: the peer is gone";
    Impl::SocketDone done;
    for (const ReadPathOps* o : kReadOrder)
      if (o->close) o->close(*p, p->error, &done);
    impl_->finish_socket_reads(done);
    if (p->ep) impl_->abandoned.push_back(p);  // a process-read peer's, for mapped regions
  };
  const std::string address = peer->address;
  auto& peers = impl_->peers;
  auto it = peers.lower_bound({address, std::numeric_limits<int>::min()});
  while (it != peers.end() && it->first.first == address) {
    abandon(it->second);
    it = peers.erase(it);
  }
  if (!peer->failed) abandon(peer);  // already dropped from the cache (replaced)
}

void Worker::Impl::forget_rkeys(const Peer* p) {
  for (auto it = rkey_index.lower_bound({p, std::string()}); it != rkey_index.end() && it->first.first == p;) {
    rkeys.erase(it->second);
    it = rkey_index.erase(it);
  }
}

std::shared_ptr<RemoteKey> Worker::remote_key(const std::shared_ptr<Peer>& peer, const std::string& packed) {
  auto& im = *impl_;
  Impl::RkeyKey key{peer.get(), packed};
  if (auto it = im.rkey_index.find(key); it != im.rkey_index.end()) {
    im.rkeys.splice(im.rkeys.begin(), im.rkeys, it->second);
    return it->second->second;
  }
  if (peer->proc && !peer->ep && im.mapped_over_ucx && decode_rkey(packed).ucx_mapped) {
    // UCX's segment, which this process maps and copies from itself: about 3x a process
    // read's bandwidth (docs/faults.md), and a get sends nothing to the source. What may still
    // reach the source's FIFO is UCX's connection set-up for this endpoint, once per peer
    // (not verified either way), instead of a request per get. THUB_PROCESS_READS=all: none.
    im.connect(*peer, decode_address(peer->address).ucx);
  }
  auto rk = std::make_shared<RemoteKey>(peer, packed);
  im.rkeys.emplace_front(key, rk);
  im.rkey_index[key] = im.rkeys.begin();
  while (im.rkeys.size() > kRemoteKeyCache) {
    im.rkey_index.erase(im.rkeys.back().first);
    im.rkeys.pop_back();
  }
  return rk;
}

void Worker::Impl::retire(const std::shared_ptr<Peer>& p) {
  forget_rkeys(p.get());
  p->failed = true;
  if (p->error.empty()) p->error = "closed: the peer stopped answering";
  // Nothing can land after this: the socket is closed, or the reads still queued are
  // dropped (none is ever half done between loop passes); they fail (from the loop).
  SocketDone done;
  for (const ReadPathOps* o : kReadOrder)
    if (o->close) o->close(*p, p->error, &done);
  finish_socket_reads(done);
  if (p->ep && p->error_handling) {
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    in_ucx_call++;
    void* r = ucp_ep_close_nbx(p->ep, &prm);
    in_ucx_call--;
    if (UCS_PTR_IS_PTR(r)) closing.push_back(r);
    p->ep = nullptr;
  } else if (p->ep) {
    abandoned.push_back(p);
  }
}

void Worker::cancel_peer(const std::shared_ptr<Peer>& peer) {
  // By value: `peer` is often a member of the job whose gets this cancels.
  const std::string address = peer->address;
  auto& peers = impl_->peers;
  auto it = peers.lower_bound({address, std::numeric_limits<int>::min()});
  while (it != peers.end() && it->first.first == address) {
    if (!it->second->error_handling && !it->second->proc) {
      ++it;
      continue;
    }
    std::shared_ptr<Peer> p = it->second;
    it = peers.erase(it);
    impl_->retire(p);
  }
}

bool Worker::detects_local_peer_failure() const { return impl_->local_failure_detected; }

bool Worker::reads_cancel_cleanly(const std::shared_ptr<Peer>& peer) const { return peer->proc && !peer->ep; }

}  // namespace thub::transport
