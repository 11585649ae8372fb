#include "src/client/holding.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "src/client/descriptor.h"
#include "src/client/progress_counter.h"
#include "src/client/tensor_copy.h"
#include "src/common/host.h"
#include "src/common/status.h"
#include "src/transport/worker.h"

namespace thub::client {

namespace {
constexpr int kMemCuda = 1;
}

uint64_t descriptor_bound(const TensorTable& table, const StreamPlan& plan, bool copy) {
  uint64_t n = 256 + kWorkerAddressBound + 3 * kRkeyBound;  // header, address, counter and hashes
  uint64_t segments = copy ? 1 : (plan.compact_bytes() > 0 ? 1 : 0);
  for (size_t i = 0; i < table.tensors().size(); ++i) {
    const Tensor& t = table.tensors()[i];
    n += 4 + t.name.size() + 8;
    if (!copy && t.bytes > 0 && !plan.packed(i)) ++segments;
  }
  return n + segments * (8 + 8 + 4 + kRkeyBound);
}

void Holding::map(transport::Worker& w, uint64_t threshold, bool copy, const AllocLookup& find) {
  map(w, StreamPlan(table, threshold), copy, find);
}

void Holding::map(transport::Worker& w, StreamPlan planned, bool copy, const AllocLookup& find) {
  plan = std::move(planned);
  copy_mode = copy;
  bool any_cuda = false;
  for (const auto& t : table.tensors()) any_cuda = any_cuda || t.memtype == kMemCuda;
  stream = Stream();
  regions.clear();
  desc_bytes_.clear();  // the segments and regions change: descriptor() encodes anew
  if (copy_mode) {
    if (!shadow) shadow = w.allocate(plan.total_bytes(), any_cuda);
    stream.add(shadow->data(), plan.total_bytes());
    if (plan.total_bytes() > 0) regions.push_back(shadow);
  } else {
    compact.reset();
    if (plan.compact_bytes() > 0) {
      compact = w.allocate(plan.compact_bytes(), any_cuda);
      stream.add(compact->data(), plan.compact_bytes());
    }
    // Tensors back to back in host memory (one allocation, as a flat parameter buffer or
    // THUB_Alloc_mem lays them out) share one segment, one registration and one rkey: the
    // first publish registers per allocation, not per tensor (8,192 tensors: 1 registration),
    // and the descriptor and the reads' cuts shrink with it. CUDA tensors stay apart (two
    // cudaMalloc allocations may be adjacent; one registration cannot span them).
    for (size_t i : plan.order()) {
      const Tensor& t = table.tensors()[i];
      if (plan.packed(i)) continue;
      stream.add(t.addr, t.bytes, t.memtype != kMemCuda);
    }
    // One registration per span of the shard's own host tensors (the union of their ranges):
    // segments apart only because tiny tensors between them travel packed still share it
    // (its extra bytes are this shard's tensors, served anyway), never memory the user did not
    // register. A span inside one THUB_Alloc_mem allocation is served from that region.
    std::vector<std::pair<char*, char*>> spans;
    for (const Tensor& t : table.tensors())
      if (t.bytes > 0 && t.memtype != kMemCuda) spans.emplace_back(t.addr, t.addr + t.bytes);
    std::sort(spans.begin(), spans.end());
    size_t n = 0;
    for (const auto& sp : spans) {
      if (n > 0 && sp.first <= spans[n - 1].second) {
        spans[n - 1].second = std::max(spans[n - 1].second, sp.second);
      } else {
        spans[n++] = sp;
      }
    }
    spans.resize(n);
    std::vector<std::shared_ptr<transport::MemoryRegion>> span_regions(spans.size());
    auto registered = [&](char* lo, uint64_t len) {
      std::shared_ptr<transport::MemoryRegion> r = find ? find(lo, len) : nullptr;
      return r ? r : std::shared_ptr<transport::MemoryRegion>(w.map(lo, len));
    };
    for (const Segment& sg : stream.segments()) {
      if (compact && sg.addr == compact->data()) {
        regions.push_back(compact);
        continue;
      }
      if (!sg.mergeable) {  // CUDA memory: its own registration
        regions.push_back(registered(sg.addr, sg.bytes));
        continue;
      }
      auto it = std::upper_bound(spans.begin(), spans.end(), sg.addr,
                                 [](char* a, const std::pair<char*, char*>& sp) { return a < sp.first; });
      const size_t k = static_cast<size_t>(it - spans.begin()) - 1;  // the span holding the segment
      if (!span_regions[k]) {
        span_regions[k] = registered(spans[k].first, static_cast<uint64_t>(spans[k].second - spans[k].first));
      }
      regions.push_back(span_regions[k]);
    }
  }
  counter_region_ = w.map(counter_->address(), sizeof(uint64_t));
  hashes_.assign(1 + stream.hash_blocks(), 0);
  hash_region_ = w.map(hashes_.data(), hashes_.size() * sizeof(uint64_t));
}

uint32_t Holding::publish_fill(bool verify) {
  counter_->invalidate();
  epoch_ = next_fill_epoch();
  hashes_[0] = verify ? 1 : 0;  // before the counter first moves
  hashed_ = 0;
  staged_ = staged_bytes() > 0 || verify;
  counter_->store(epoch_, staged_ ? 0 : plan.total_bytes());
  return epoch_;
}

void Holding::withdraw() {
  counter_->invalidate();
}

void Holding::begin_fill(uint32_t fill) {
  staged_ = false;
  epoch_ = fill;
  counter_->store(fill, 0);
  hashes_[0] = 0;
}

FillWriter Holding::fill_writer() { return FillWriter(counter_.get(), hashes_.data(), hashes_.size(), epoch_); }

void FillWriter::show(uint64_t flag, const uint64_t* block_hashes, uint64_t from, uint64_t to, uint64_t held) {
  for (uint64_t b = from; b < to && 1 + b < words_; ++b) hashes_[1 + b] = block_hashes[b];
  hashes_[0] = flag;
  counter_->store(fill_, held);
}

bool Holding::stage_slice(uint32_t fill, uint64_t off, uint64_t end, bool hash, TensorCopier& c) {
  const uint64_t staged = staged_bytes();
  if (off < staged) {
    stage(off, std::min(end, staged), c);
    c.finish();
  }
  if (hash) {
    const uint64_t upto = end == plan.total_bytes() ? stream.hash_blocks() : end / kHashBlock;
    for (; hashed_ < upto; ++hashed_) hashes_[1 + hashed_] = stream.hash_block(hashed_);
  }
  return counter_->advance(fill, end);
}

uint64_t Holding::bytes_shown() const { return counter_bytes(counter_->load()); }

Holding::~Holding() {
  // Deregister before the memory goes.
  regions.clear();
  counter_region_.reset();
  hash_region_.reset();
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

std::string Holding::descriptor(const std::string& worker_address, uint32_t fill_epoch) const {
  if (desc_bytes_.empty() || desc_address_ != worker_address || desc_tensors_ != table.tensors().size()) {
    desc_bytes_ = encode_all(worker_address, &desc_at_);
    desc_address_ = worker_address;
    desc_tensors_ = table.tensors().size();
  }
  std::string bytes = desc_bytes_;
  patch_descriptor(&bytes, desc_at_, fill_epoch, staged_);
  return bytes;
}

std::string Holding::encode_all(const std::string& worker_address, DescriptorPatch* at) const {
  Descriptor d;
  d.host = host_identity();
  d.pid = static_cast<int64_t>(::getpid());
  d.worker_address = worker_address;
  d.compaction_threshold = plan.threshold();
  for (size_t i = 0; i < stream.segments().size(); ++i) {
    // The segment's own address: a region allocated through the context may hold more.
    const Segment& sg = stream.segments()[i];
    d.segments.push_back({reinterpret_cast<uint64_t>(sg.addr), sg.bytes, regions[i]->packed_rkey()});
  }
  d.counter = {counter_region_->address(), sizeof(uint64_t), counter_region_->packed_rkey()};
  d.hashes = {hash_region_->address(), hash_region_bytes(), hash_region_->packed_rkey()};
  return encode_descriptor(d, table, at);
}

std::unique_ptr<Holding> Holding::copy_to_host(transport::Worker& w, int64_t version) const {
  // One host buffer holding the whole stream, filled from the tensors (they still hold the
  // version: the copy is made while the unpublish waits) or from copy mode's whole staging
  // buffer, served like a copy-mode holder.
  auto h = std::make_unique<Holding>();
  h->shadow = w.allocate(plan.total_bytes(), false);
  for (size_t i = 0; i < table.tensors().size(); ++i) {
    const Tensor& t = table.tensors()[i];
    h->table.add(t.name, t.bytes > 0 ? h->shadow->data() + plan.offset(i) : nullptr, t.bytes, 0);
  }
  h->copy_mode = true;
  h->plan = plan;
  if (copy_mode && shadow && plan.total_bytes() > 0 && bytes_shown() == plan.total_bytes()) {
    // Copy mode: the staging buffer holds the whole stream (the tensors may have been
    // re-pointed since: Model::Core::repoint).
    std::memcpy(h->shadow->data(), shadow->data(), plan.total_bytes());
  } else {
    TensorCopier c;
    plan.for_each_piece(0, plan.total_bytes(), [&](size_t i, uint64_t in, uint64_t soff, uint64_t n) {
      c.from_tensor(h->shadow->data() + soff, table.tensors()[i], in, n);
    });
    c.finish();
  }
  h->map(w, plan.threshold(), true);
  std::memcpy(h->hashes_.data(), hashes_.data(), hash_region_bytes());
  h->epoch_ = next_fill_epoch();
  h->counter_->store(h->epoch_, plan.total_bytes());
  return h;
}

std::string Holding::mismatch(const Descriptor& src) const {
  const auto& mine = table.tensors();
  if (src.tensors.size() != mine.size()) {
    return "the source has " + std::to_string(src.tensors.size()) + " tensors, this replica " +
           std::to_string(mine.size());
  }
  for (size_t i = 0; i < mine.size(); ++i) {
    if (src.tensors[i].name != mine[i].name || src.tensors[i].bytes != mine[i].bytes) {
      return "tensor " + std::to_string(i) + " is '" + mine[i].name + "' (" + std::to_string(mine[i].bytes) +
             " bytes) here but '" + src.tensors[i].name + "' (" + std::to_string(src.tensors[i].bytes) +
             " bytes) at the source";
    }
  }
  if (!StreamPlan(table, src.compaction_threshold).same_packing(plan)) {
    return "the source packs tiny tensors with compaction_threshold=" + std::to_string(src.compaction_threshold) +
           ", this replica with " + std::to_string(plan.threshold()) +
           ", and they pack different tensors: set the same compaction_threshold on every replica";
  }
  // The stream's cut into registered segments may differ (direct vs copy mode), but every
  // segment must be non-empty, carry a key, and together they must be exactly our stream.
  uint64_t total = 0;
  for (size_t i = 0; i < src.segments.size(); ++i) {
    const RemoteRegion& r = src.segments[i];
    if (r.bytes == 0 || r.rkey.empty() || r.bytes > plan.total_bytes() - total) {
      return "the source's stream segment " + std::to_string(i) + " (" + std::to_string(r.bytes) +
             " bytes) does not fit this replica's stream of " + std::to_string(plan.total_bytes()) + " bytes";
    }
    total += r.bytes;
  }
  if (total != plan.total_bytes()) {
    return "the source's stream has " + std::to_string(total) + " bytes, this replica's " +
           std::to_string(plan.total_bytes());
  }
  if (src.counter.bytes != sizeof(uint64_t) || src.counter.rkey.empty() || src.epoch == 0 ||
      src.epoch > kEpochMask) {
    return "the source's progress counter is malformed (" + std::to_string(src.counter.bytes) + " bytes, epoch " +
           std::to_string(src.epoch) + ")";
  }
  if (src.hashes.bytes != hash_region_bytes() || src.hashes.rkey.empty()) {
    return "the source's integrity region has " + std::to_string(src.hashes.bytes) + " bytes, this replica's " +
           std::to_string(hash_region_bytes());
  }
  if (src.worker_address.empty()) return "the source's worker address is empty";
  return {};
}

}  // namespace thub::client
