#include "src/client/holding.h"

#include <unistd.h>

#include <cstring>

#include "src/client/descriptor.h"
#include "src/client/progress_counter.h"
#include "src/client/tensor_copy.h"
#include "src/common/host.h"
#include "src/common/status.h"
#include "src/transport/cuda_staging.h"
#include "src/transport/worker.h"

namespace thub::client {

namespace {
constexpr int kMemCuda = 1;
}

void Holding::map(transport::Worker& w, uint64_t threshold, bool copy) {
  plan = StreamPlan(table, threshold);
  copy_mode = copy;
  bool any_cuda = false;
  for (const auto& t : table.tensors()) any_cuda = any_cuda || t.memtype == kMemCuda;
  stream = Stream();
  if (copy_mode) {
    if (!shadow) shadow = transport::HostBuffer::allocate(plan.total_bytes(), any_cuda);
    stream.add(shadow->data(), plan.total_bytes());
  } else {
    if (plan.compact_bytes() > 0) {
      compact = transport::HostBuffer::allocate(plan.compact_bytes(), any_cuda);
      stream.add(compact->data(), plan.compact_bytes());
    }
    for (size_t i : plan.order()) {
      if (!plan.packed(i)) stream.add(table.tensors()[i].addr, table.tensors()[i].bytes);
    }
  }
  for (const auto& s : stream.segments()) regions.push_back(w.map(s.addr, s.bytes));
  counter = std::make_unique<std::atomic<uint64_t>>(0);
  counter_region = w.map(counter.get(), sizeof(uint64_t));
  hashes.assign(1 + stream.hash_blocks(), 0);
  hash_region = w.map(hashes.data(), hashes.size() * sizeof(uint64_t));
}

Holding::~Holding() {
  // Deregister before the memory goes.
  regions.clear();
  counter_region.reset();
  hash_region.reset();
}

char* Holding::buffer_at(uint64_t off) const {
  return copy_mode ? shadow->data() + off : compact->data() + off;
}

void Holding::stage(uint64_t a, uint64_t b, TensorCopier& c) {
  plan.for_each_piece(a, b, [&](size_t i, uint64_t in, uint64_t soff, uint64_t n) {
    if (copy_mode || plan.packed(i)) c.from_tensor(buffer_at(soff), table.tensors()[i], in, n);
  });
}

void Holding::deliver(uint64_t a, uint64_t b, TensorCopier& c) {
  plan.for_each_piece(a, b, [&](size_t i, uint64_t in, uint64_t soff, uint64_t n) {
    if (copy_mode || plan.packed(i)) c.to_tensor(table.tensors()[i], in, buffer_at(soff), n);
  });
}

std::string Holding::where(uint64_t off) const {
  if (table.empty()) return "no tensor";
  const Tensor& t = table.tensors()[plan.tensor_at(off)];
  return "tensor '" + t.name + "'" + (plan.packed(plan.tensor_at(off)) ? " (compacted)" : "");
}

std::string Holding::descriptor(const std::string& worker_address) const {
  Descriptor d;
  d.host = host_identity();
  d.pid = static_cast<int64_t>(::getpid());
  d.worker_address = worker_address;
  for (const auto& t : table.tensors()) {
    RemoteTensor rt;
    rt.name = t.name;
    rt.region.bytes = t.bytes;
    d.tensors.push_back(std::move(rt));
  }
  d.compaction_threshold = plan.threshold();
  d.staged = staged;
  for (size_t i = 0; i < stream.segments().size(); ++i) {
    d.segments.push_back({regions[i]->address(), stream.segments()[i].bytes, regions[i]->packed_rkey()});
  }
  d.counter = {counter_region->address(), sizeof(uint64_t), counter_region->packed_rkey()};
  d.hashes = {hash_region->address(), hashes.size() * sizeof(uint64_t), hash_region->packed_rkey()};
  return encode_descriptor(d);
}

std::unique_ptr<Holding> Holding::copy_to_host(transport::Worker& w, int64_t version) const {
  // One host buffer holding the whole stream, filled from the tensors (they still hold the
  // version: the copy is made while the unpublish waits), served like a copy-mode holder.
  auto h = std::make_unique<Holding>();
  h->shadow = transport::HostBuffer::allocate(plan.total_bytes(), false);
  for (size_t i = 0; i < table.tensors().size(); ++i) {
    const Tensor& t = table.tensors()[i];
    h->table.add(t.name, t.bytes > 0 ? h->shadow->data() + plan.offset(i) : nullptr, t.bytes, 0);
  }
  h->copy_mode = true;
  h->plan = plan;
  {
    TensorCopier c;
    plan.for_each_piece(0, plan.total_bytes(), [&](size_t i, uint64_t in, uint64_t soff, uint64_t n) {
      c.from_tensor(h->shadow->data() + soff, table.tensors()[i], in, n);
    });
    c.finish();
  }
  h->map(w, plan.threshold(), true);
  std::memcpy(h->hashes.data(), hashes.data(), hashes.size() * sizeof(uint64_t));
  h->counter->store(counter_value(version, plan.total_bytes()), std::memory_order_release);
  return h;
}

}  // namespace thub::client
