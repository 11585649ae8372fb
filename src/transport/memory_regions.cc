// The memory a worker serves (registered with UCX, listed for socket and process readers) and
// the remote keys a reader unpacks to read a source's memory.
#include <sys/random.h>
#include <ucp/api/ucp.h>

#include <cstdint>
#include <string>
#include <utility>

#include "src/common/status.h"
#include "src/transport/cuda_staging.h"
#include "src/transport/process_reads.h"
#include "src/transport/served_regions.h"
#include "src/transport/socket_reads.h"
#include "src/transport/wire_format.h"
#include "src/transport/worker.h"
#include "src/transport/worker_impl.h"

namespace thub::transport {

namespace {
// Registers (or, with `allocate`, allocates and registers) memory for remote reads only, and
// packs its rkey.
std::pair<ucp_mem_h, std::string> map_memory(ucp_context_h ctx, void* addr, size_t len, bool allocate) {
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_PROT;
  mp.address = addr;
  mp.length = len;
  // Peers only ever read what we serve: no remote write (UCX's default allows it).
  mp.prot = UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_LOCAL_WRITE | UCP_MEM_MAP_PROT_REMOTE_READ;
  if (allocate) {
    mp.field_mask |= UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.flags = UCP_MEM_MAP_ALLOCATE;
  }
  ucp_mem_h memh = nullptr;
  ucs_status_t st = ucp_mem_map(ctx, &mp, &memh);
  if (st != UCS_OK) {
    throw Error(Code::kNoMemory, std::string(allocate ? "allocating and registering " : "ucp_mem_map of ") +
                                     std::to_string(len) + " bytes: " + std::string(ucs_status_string(st)));
  }
  void* rb = nullptr;
  size_t rlen = 0;
  st = ucp_rkey_pack(ctx, memh, &rb, &rlen);
  if (st != UCS_OK) {
    ucp_mem_unmap(ctx, memh);
    throw Error(Code::kNoMemory, "ucp_rkey_pack: " + std::string(ucs_status_string(st)));
  }
  std::string rkey(static_cast<const char*>(rb), rlen);
  ucp_rkey_buffer_release(rb);
  return {memh, std::move(rkey)};
}
}  // namespace

// Lets socket readers read [addr, addr + len) of host memory: a random token travels in the
// packed rkey, as UCX's own key material does, and a read must present it. The rkey also
// names the region, which a process reader checks every read against (process_reads.h).
std::string Worker::Impl::serve_region(uint64_t addr, size_t len, std::string ucx_rkey, bool allocated) {
  if ((!server && !process_reads) || len == 0 || cuda_is_device_pointer(reinterpret_cast<void*>(addr))) {
    return ucx_rkey;
  }
  uint64_t token = 0;
  while (server && token == 0) {
    if (getrandom(&token, sizeof token, 0) != static_cast<ssize_t>(sizeof token)) token = 0;
  }
  if (server) server->serve(addr, len, token);
  // Process readers read what this process lists (served_regions.h), not what a rkey says.
  ServedSlotRef slot;
  if (process_reads) slot.has = ServedRegions::instance().serve(addr, len, &slot.slot, &slot.key);
  return encode_rkey(ucx_rkey, token, addr, len, allocated, slot);
}

std::unique_ptr<MemoryRegion> Worker::map(void* addr, size_t len) {
  std::unique_ptr<MemoryRegion> out;
  call([&] {
    auto [memh, rkey] = map_memory(impl_->ctx, addr, len, false);
    rkey = impl_->serve_region(reinterpret_cast<uint64_t>(addr), len, std::move(rkey));
    out.reset(new MemoryRegion(this, memh, std::move(rkey), reinterpret_cast<uint64_t>(addr), len));
  });
  return out;
}

std::unique_ptr<MemoryRegion> Worker::allocate(size_t len, bool pinned) {
  std::unique_ptr<MemoryRegion> out;
  call([&] {
    auto [memh, rkey] = map_memory(impl_->ctx, nullptr, len ? len : 1, true);
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    if (ucp_mem_query(memh, &attr) != UCS_OK) {
      ucp_mem_unmap(impl_->ctx, memh);
      throw Error(Code::kNoMemory, "ucp_mem_query of an allocated region failed");
    }
    rkey = impl_->serve_region(reinterpret_cast<uint64_t>(attr.address), len, std::move(rkey), true);
    out.reset(new MemoryRegion(this, memh, std::move(rkey), reinterpret_cast<uint64_t>(attr.address), len));
    out->allocated_ = true;
  });
  if (pinned && len > 0) out->pinned_ = pin_host_memory(out->data(), len);
  return out;
}

void Worker::unmap(void* memh, const std::string& packed_rkey) {
  const DecodedRkey d = decode_rkey(packed_rkey);
  if (d.has_slot) ServedRegions::instance().withdraw(d.slot, d.slot_key);  // before the memory can go
  const uint64_t token = d.token;
  call([&] {
    if (impl_->server && token) impl_->server->withdraw(token);  // before the memory can go
    ucp_mem_unmap(impl_->ctx, static_cast<ucp_mem_h>(memh));
  });
}

MemoryRegion::~MemoryRegion() {
  if (pinned_) unpin_host_memory(data());
  worker_->unmap(memh_, rkey_);
}

bool MemoryRegion::contains(const void* p, size_t n) const {
  auto a = reinterpret_cast<uint64_t>(p);
  return a >= addr_ && n <= len_ && a - addr_ <= len_ - n;
}

RemoteKey::RemoteKey(const std::shared_ptr<Peer>& peer, const std::string& packed) : peer_(peer) {
  const DecodedRkey d = decode_rkey(packed);
  const std::string& ucx = d.ucx;
  token_ = d.token;
  if (peer->proc) {
    // What a process reader may read is what the source lists: the rkey names its slot.
    if (!d.has_region || !d.has_slot) throw Error(Code::kTransport, "the source's memory is not served for process reads");
    region_addr_ = d.addr;
    region_len_ = d.len;
    slot_ = d.slot;
    slot_key_ = d.slot_key;
    if (!(d.ucx_mapped && peer->ep)) return;  // a process read checks its slot; nothing to unpack
    // UCX's mapped segment of a process-read peer: copied from without asking the source, so
    // the region the rkey names is checked against the source's own list now.
    std::string why = peer->proc->check_served(slot_, slot_key_, region_addr_, region_len_);
    if (!why.empty()) throw Error(Code::kTransport, "the source's mapped segment: " + why);
    over_ucx_ = true;
  }
  if (peer->sock) {
    if (token_ == 0) throw Error(Code::kTransport, "the source's memory is not served over sockets");
    return;  // a socket read presents the token; nothing to unpack
  }
  if (!peer->ep) throw Error(Code::kTransport, "rkey unpack on a closed endpoint");
  ucp_rkey_h r = nullptr;
  ucs_status_t st = ucp_ep_rkey_unpack(peer->ep, ucx.data(), &r);
  if (st != UCS_OK) throw Error(Code::kTransport, "ucp_ep_rkey_unpack: " + std::string(ucs_status_string(st)));
  rkey_ = r;
}

RemoteKey::~RemoteKey() {
  if (rkey_) ucp_rkey_destroy(static_cast<ucp_rkey_h>(rkey_));
}

}  // namespace thub::transport
