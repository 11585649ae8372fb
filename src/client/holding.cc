#include "src/client/holding.h"

#include <unistd.h>

#include <cstring>

#include "src/client/descriptor.h"
#include "src/common/host.h"
#include "src/common/status.h"
#include "src/transport/worker.h"

namespace thub::client {

void Holding::map(transport::Worker& w) {
  for (const auto& t : table.tensors()) regions.push_back(t.bytes > 0 ? w.map(t.addr, t.bytes) : nullptr);
  counter = std::make_unique<std::atomic<uint64_t>>(0);
  counter_region = w.map(counter.get(), sizeof(uint64_t));
  hashes.assign(1 + table.hash_blocks(), 0);
  hash_region = w.map(hashes.data(), hashes.size() * sizeof(uint64_t));
}

Holding::~Holding() {
  // Deregister before the memory goes (members are destroyed in reverse order anyway).
  regions.clear();
  counter_region.reset();
  hash_region.reset();
}

std::string Holding::descriptor(const std::string& worker_address) const {
  Descriptor d;
  d.host = host_identity();
  d.pid = static_cast<int64_t>(::getpid());
  d.worker_address = worker_address;
  for (size_t i = 0; i < table.tensors().size(); ++i) {
    RemoteTensor rt;
    rt.name = table.tensors()[i].name;
    rt.region.bytes = table.tensors()[i].bytes;
    if (regions[i]) {
      rt.region.addr = regions[i]->address();
      rt.region.rkey = regions[i]->packed_rkey();
    }
    d.tensors.push_back(std::move(rt));
  }
  d.counter = {counter_region->address(), sizeof(uint64_t), counter_region->packed_rkey()};
  d.hashes = {hash_region->address(), hashes.size() * sizeof(uint64_t), hash_region->packed_rkey()};
  return encode_descriptor(d);
}

std::unique_ptr<Holding> Holding::copy_to_host(transport::Worker& w) const {
  auto h = std::make_unique<Holding>();
  for (const auto& t : table.tensors()) {
    char* p = nullptr;
    if (t.bytes > 0) {
      h->owned.emplace_back(new (std::nothrow) char[t.bytes]);
      p = h->owned.back().get();
      if (!p) throw Error(Code::kNoMemory, "retention offload: no host memory for tensor '" + t.name + "'");
      std::memcpy(p, t.addr, t.bytes);
    }
    h->table.add(t.name, p, t.bytes, t.memtype);
  }
  h->map(w);
  h->hashes = hashes;  // the region was registered on its own vector of the same size
  std::memcpy(h->hashes.data(), hashes.data(), hashes.size() * sizeof(uint64_t));
  h->counter->store(table.total_bytes(), std::memory_order_release);
  return h;
}

}  // namespace thub::client
