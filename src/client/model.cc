#include "src/client/model.h"

#include <algorithm>
#include <chrono>

#include "src/client/context.h"
#include "src/client/descriptor.h"
#include "src/client/progress_counter.h"
#include "src/common/status.h"
#include "src/registry/connection.h"
#include "src/client/tensor_copy.h"
#include "src/transport/cuda_staging.h"
#include "src/transport/worker.h"

namespace thub::client {

namespace {
constexpr int kMemHost = 0;
constexpr int kMemCuda = 1;
// Staging behind publish advances the counter every slice, so that readers start early.
constexpr uint64_t kStageSlice = 4u << 20;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Model::Model(Context& ctx, const std::string& model, const std::string& replica, int shard, int num_shards,
             const InfoMap& info)
    : ctx_(ctx), model_(model), replica_(replica), shard_(shard), num_shards_(num_shards) {
  if (model.empty()) throw Error(Code::kArg, "model name is empty");
  if (replica.empty()) throw Error(Code::kArg, "replica name is empty");
  if (model.size() > kMaxNameBytes || replica.size() > kMaxNameBytes) {
    throw Error(Code::kArg, "model and replica names are at most " + std::to_string(kMaxNameBytes) + " bytes");
  }
  if (num_shards < 1) throw Error(Code::kArg, "num_shards must be >= 1 (got " + std::to_string(num_shards) + ")");
  if (shard < 0 || shard >= num_shards) {
    throw Error(Code::kArg, "shard " + std::to_string(shard) + " is outside [0, " + std::to_string(num_shards) + ")");
  }
  retain_ = static_cast<int>(info.get_int("retain", 0, 0, 1 << 20));
  spot_ = info.get_bool("spot", false);
  open_member();
}

Model::~Model() {
  finish_staging();
  ctx_.retire(this);
}

void Model::open_member() {
  gen_ = ctx_.registry().wait_connected();
  sched::Open ev{0, 0, model_, replica_, shard_, num_shards_, retain_, spot_};
  sched::Reply r = ctx_.registry().call(ev, ctx_.config().timeout_ms);
  if (r.status != sched::Status::kOk) raise(static_cast<int>(r.status), "open", r.detail);
  ctx_.detach(member_);
  member_ = r.member;
  ctx_.attach(member_, this);
}

void Model::raise(int status, const std::string& what, const std::string& detail) const {
  throw Error(static_cast<Code>(status), model_ + "/" + replica_ + "/shard " + std::to_string(shard_) + ": " + what +
                                             ": " + detail);
}

void Model::register_tensor(const std::string& name, void* addr, uint64_t bytes, int memtype) {
  std::lock_guard<std::mutex> lk(op_mu_);
  if (frozen_) {
    throw Error(Code::kState, "tensor '" + name + "': register every tensor before the first publish or replicate");
  }
  if (memtype == kMemCuda) {
    std::string why;
    if (!transport::cuda_usable(&why)) throw Error(Code::kUnsupported, "tensor '" + name + "': CUDA memory: " + why);
    if (bytes > 0 && !transport::cuda_is_device_pointer(addr)) {
      throw Error(Code::kArg, "tensor '" + name + "': registered as THUB_MEM_CUDA but is not CUDA device memory");
    }
    auto mode = ctx_.config().transfer_mode;
    bool direct = mode == ContextConfig::TransferMode::kDirect || mode == ContextConfig::TransferMode::kTcp;
    if (direct && !ctx_.worker().can_map_cuda()) {
      throw Error(Code::kUnsupported, "tensor '" + name + "': transfer_mode=direct/tcp needs a CUDA-enabled UCX >= 1.16 (this is " +
                                          transport::ucx_version() + " without it); use transfer_mode=auto or copy");
    }
  }
  if (memtype != kMemHost && memtype != kMemCuda) throw Error(Code::kArg, "tensor '" + name + "': unknown memtype " + std::to_string(memtype));
  live_.table.add(name, addr, bytes, memtype);
}

void Model::freeze() {
  if (frozen_) return;
  if (live_.table.empty()) {
    throw Error(Code::kState, "no tensor is registered: register tensors before publish/replicate");
  }
  const auto& cfg = ctx_.config();
  bool any_cuda = false;
  for (const auto& t : live_.table.tensors()) any_cuda = any_cuda || t.memtype == kMemCuda;
  // auto stages CUDA tensors through host memory unless this UCX moves them itself (and
  // checksums, taken on the host, are off).
  bool copy = cfg.transfer_mode == ContextConfig::TransferMode::kCopy ||
              (cfg.transfer_mode == ContextConfig::TransferMode::kAuto && any_cuda &&
               (cfg.verify || !ctx_.worker().can_map_cuda()));
  if (!copy && any_cuda && cfg.verify) {
    throw Error(Code::kUnsupported, "verify=true with CUDA tensors needs transfer_mode=copy (checksums are taken on the host)");
  }
  // Every reader is handed our descriptor by the registry: it must fit its messages.
  if (uint64_t n = descriptor_bound(live_.table, StreamPlan(live_.table, cfg.compaction_threshold), copy);
      n > kMaxDescriptorBytes) {
    throw Error(Code::kArg, "the shard's " + std::to_string(live_.table.tensors().size()) +
                                " tensors would make a descriptor of up to " + std::to_string(n) + " bytes, more than " +
                                std::to_string(kMaxDescriptorBytes) +
                                ": register fewer tensors (or shorter names), or split the shard");
  }
  live_.map(ctx_.worker(), cfg.compaction_threshold, copy,
            [this](const void* p, uint64_t n) { return ctx_.find_allocation(p, n); });
  stats_.compact_bytes = live_.plan.compact_bytes();
  stats_.compacted_tensors = live_.plan.packed_count();
  stats_.copy_mode = copy ? 1 : 0;
  frozen_ = true;
}

void Model::stage_async(uint32_t fill, bool hash) {
  // Runs while we are published: the user keeps the tensors unchanged until unpublish
  // returns, and unpublish (or the next transfer) joins this thread first. In stream order,
  // slice by slice: pack (the compact segment; copy mode: everything), hash (verify), then
  // move the counter (data and hashes first, then the counter), so readers start at once.
  stager_ = std::thread([this, fill, hash] {
    int64_t t0 = now_us();
    try {
      TensorCopier c;
      const uint64_t total = live_.plan.total_bytes();
      const uint64_t staged = live_.staged_bytes();
      uint64_t hashed = 0;  // blocks
      for (uint64_t off = 0; off < total;) {
        // Without checksums nothing is done past the staged bytes: one step to the end.
        uint64_t end = off < staged ? std::min(staged, off + kStageSlice) : total;
        if (hash) end = std::min(total, off + kStageSlice);
        if (off < staged) {
          live_.stage(off, std::min(end, staged), c);
          c.finish();
        }
        if (hash) {
          const uint64_t upto = end == total ? live_.stream.hash_blocks() : end / kHashBlock;
          for (; hashed < upto; ++hashed) live_.hashes[1 + hashed] = live_.stream.hash_block(hashed);
        }
        live_.counter->store(fill, end);
        off = end;
      }
    } catch (const std::exception& e) {
      // Readers see the counter stop and fail over (stall watchdog); say why here.
      ctx_.set_last_error(std::string("staging the published tensors failed: ") + e.what());
    }
    stats_.pack_us = static_cast<uint64_t>(now_us() - t0);
  });
}

void Model::finish_staging() {
  if (stager_.joinable()) stager_.join();
}

void Model::publish(int64_t version) {
  std::lock_guard<std::mutex> lk(op_mu_);
  if (version < 0) throw Error(Code::kArg, "publish needs an absolute version >= 0 (got " + std::to_string(version) + ")");
  if (published_) {
    throw Error(Code::kState, "already published version " + std::to_string(held_) + "; unpublish first");
  }
  freeze();
  finish_staging();
  // New content: a new fill (progress_counter.h). Readers of an earlier fill of these
  // buffers that the registry forgot (a stopped reader, a registry failover) see the epoch
  // change and refuse what they read.
  live_.counter->invalidate();
  live_.epoch = next_fill_epoch();
  // Publish moves no bytes and returns at once: packing the tiny tensors, staging copy mode's
  // buffer and computing the checksums run behind it (stage_async), and readers follow the
  // counter as it moves (the descriptor's `staged` flag). O(tensors), never O(bytes).
  const bool verify = ctx_.config().verify;
  live_.hashes[0] = verify ? 1 : 0;  // before the counter first moves
  live_.staged = live_.staged_bytes() > 0 || verify;
  if (live_.staged) live_.counter->store(live_.epoch, 0);
  publish_locked(version);
  // Started once the registry has the descriptor: nobody reads before, and the publish's own
  // round trip does not compete with it for a core.
  if (live_.staged) stage_async(live_.epoch, verify);
}

void Model::publish_locked(int64_t version) {
  // While staging runs the stager owns the counter; it ends at the total.
  if (!live_.staged) live_.counter->store(live_.epoch, live_.plan.total_bytes());
  sched::Reply r = ask([&] {
    return sched::Event{sched::Publish{0, 0, member_, version, live_.table.layout_hash(),
                                       live_.descriptor(ctx_.worker().address(), live_.epoch)}};
  });
  if (r.status != sched::Status::kOk) {
    if (!live_.staged) live_.counter->invalidate();
    raise(static_cast<int>(r.status), "publish of version " + std::to_string(version), r.detail);
  }
  held_ = version;
  published_ = true;
}

int64_t Model::replicate(int64_t spec) {
  std::lock_guard<std::mutex> lk(op_mu_);
  if (published_) {
    throw Error(Code::kState, "replicate while holding version " + std::to_string(held_) +
                                  ": unpublish first, or use THUB_Update");
  }
  bool not_updated = false;
  return transfer(spec, -1, &not_updated);
}

Code Model::update(int64_t spec, int64_t* got) {
  std::lock_guard<std::mutex> lk(op_mu_);
  // Holding nothing, this is a plain replicate; holding h, the registry answers NOT_UPDATED
  // (we keep h) or moves us to a newer version in place.
  bool not_updated = false;
  *got = transfer(spec, published_ ? held_.load() : -1, &not_updated);
  return not_updated ? Code::kNotUpdated : Code::kSuccess;
}

int64_t Model::transfer(int64_t spec, int64_t newer_than, bool* not_updated) {
  freeze();
  finish_staging();
  const auto& cfg = ctx_.config();
  auto& reg = ctx_.registry();
  uint64_t layout = live_.table.layout_hash();
  const std::string& self = ctx_.worker().address();
  // The fill this transfer makes: readers of us as a partial source are given it with our
  // descriptor, and follow our counter only while it shows it.
  const uint32_t fill = next_fill_epoch();
  // Ask for a version and a source. When we hold `newer_than` and something newer exists,
  // the registry hides our old holding and answers only once nobody reads it any more, so
  // the buffers may be overwritten then (the atomic update of sched/update.cc); if nothing
  // is newer, or the answer is an error, we still hold and serve the old version.
  sched::Reply r = ask([&] {
    return sched::Event{sched::Replicate{0, 0, member_, spec, newer_than, layout, live_.descriptor(self, fill)}};
  });
  uint64_t gen = gen_;  // the registry that granted (ask() may have re-registered with a new one)
  if (r.status == sched::Status::kNotUpdated) {
    *not_updated = true;
    return held_;
  }
  if (r.status != sched::Status::kOk) raise(static_cast<int>(r.status), "replicate", r.detail);
  // From here on our buffers are being overwritten: we hold no complete version. Readers of
  // our previous fill that the registry forgot see the counter change before any byte does.
  published_ = false;
  held_ = -1;
  live_.staged = false;
  live_.counter->invalidate();
  live_.epoch = fill;
  live_.counter->store(fill, 0);
  live_.hashes[0] = 0;
  const int64_t version = r.version;
  uint64_t delivered = 0;  // stream bytes copied out to the tensors (unpacking / copy mode)
  TensorCopier copier;
  stats_.unpack_us = 0;
  uint64_t lease = r.lease;
  uint64_t have = 0;  // bytes read and checked against their source's counter
  // Our own answer to an error: the registry forgets our partial holding (best effort: it
  // may be gone too), and nobody takes what the counter showed.
  auto give_up = [&](int status, const std::string& detail) {
    live_.counter->invalidate();
    try {
      (void)reg.call(sched::Unpublish{0, 0, member_}, cfg.timeout_ms);
    } catch (const Error&) {
    }
    raise(status, "replicate of version " + std::to_string(version), detail);
  };
  for (;;) {
    if (r.source_partial) stats_.partial_sources++;
    Descriptor src;
    try {
      src = decode_descriptor(r.source_descriptor);
    } catch (const Error& e) {
      give_up(static_cast<int>(Code::kTransport), e.what());
    }
    if (std::string mismatch = live_.mismatch(src); !mismatch.empty()) {
      give_up(static_cast<int>(Code::kLayout), mismatch);
    }
    bool follow_counter = r.source_partial || src.staged;
    TransferSpec ts;
    ts.local = &live_.stream;
    ts.source = std::move(src);
    ts.source_partial = follow_counter;
    ts.source_may_lag = r.source_partial;
    ts.start = have;
    ts.counter = live_.counter.get();
    ts.epoch = fill;
    ts.hashes = live_.hashes.data();
    ts.hash_bytes = live_.hash_region_bytes();
    ts.verify = cfg.verify;
    // A reader of a partial source can ask only for what its source holds, and the next hop
    // of the chain only for what this one holds: smaller chunks there shorten every hop's lag.
    ts.chunk_size = r.source_partial ? std::min(cfg.chunk_size, cfg.pipeline_chunk_size) : cfg.chunk_size;
    ts.max_inflight = cfg.max_inflight;
    ts.stall_timeout_us = cfg.stall_timeout_ms * 1000;
    ts.where = [this](uint64_t off) { return live_.where(off); };
    auto watch = std::make_shared<PrefixWatch>();
    ts.watch = watch;
    auto fut = start_transfer(ctx_.worker(), std::move(ts));
    // Copy out what has arrived and been checked (the compact segment: unpack; copy mode:
    // everything) while the gets of the rest go on.
    const uint64_t need = live_.staged_bytes();
    while (delivered < need) {
      auto [prefix, closed] = watch->wait_beyond(delivered);
      uint64_t upto = std::min(prefix, need);
      if (upto > delivered) {
        int64_t t0 = now_us();
        live_.deliver(delivered, upto, copier);
        delivered = upto;
        stats_.unpack_us += static_cast<uint64_t>(now_us() - t0);
      }
      if (closed) break;
    }
    TransferResult res = fut.get();
    if (res.code == Code::kSuccess) {
      try {
        int64_t t0 = now_us();
        copier.finish();
        stats_.unpack_us += static_cast<uint64_t>(now_us() - t0);
      } catch (const Error& e) {
        res.code = e.code();
        res.error = std::string("copying out to the tensors: ") + e.what();
        res.source_failed = false;
      }
    }
    stats_.counter_reads = res.stats.counter_reads;
    stats_.gets = res.stats.gets;
    have = res.held;
    if (res.code == Code::kSuccess) {
      stats_.replications++;
      held_ = version;
      published_ = true;
      // Every byte was checked against the source's counter: it is this version whatever
      // became of the registry that granted it. A new registry: reregister() publishes it.
      if (reg.generation() != gen) return version;
      try {
        sched::Reply d = reg.call(sched::TransferDone{0, 0, member_, lease}, cfg.timeout_ms);
        if (d.status != sched::Status::kOk) raise(static_cast<int>(d.status), "transfer done", d.detail);
      } catch (const Error& e) {
        // The data is complete and checked; only the registry is gone. Failover re-publishes it.
        if (e.code() != Code::kRegistry) throw;
      }
      return version;
    }
    if (!res.source_failed) give_up(static_cast<int>(res.code), res.error);
    // The source failed (or changed under us): report how far we got and resume elsewhere.
    stats_.source_failures++;
    if (reg.wait_connected() != gen) {
      // The registry that granted us is gone, and with it our lease: ask the new one for the
      // same version, resuming from what we have (the bytes are the version's, checked).
      r = ask([&] {
        return sched::Event{sched::Replicate{0, 0, member_, version, -1, layout, live_.descriptor(self, fill)}};
      });
      gen = gen_;
    } else {
      r = reg.call(sched::SourceFailed{0, 0, member_, lease, have}, cfg.timeout_ms);
    }
    if (r.status != sched::Status::kOk) {
      give_up(static_cast<int>(r.status == sched::Status::kVersionLost ? r.status : sched::Status::kTransport),
              res.error + "; no other source: " + r.detail);
    }
    if (r.version != version) give_up(static_cast<int>(Code::kInternal), "the registry granted another version");
    lease = r.lease;
  }
}

void Model::unpublish() {
  std::lock_guard<std::mutex> lk(op_mu_);
  if (!published_) throw Error(Code::kState, "nothing is published: publish or replicate first");
  unpublish_locked();
}

void Model::unpublish_locked() {
  finish_staging();  // the user may overwrite the tensors once we return
  // The registry may order a retention offload before it answers (see offload()).
  sched::Reply r = ask([&] { return sched::Event{sched::Unpublish{0, 0, member_}}; });
  if (r.status != sched::Status::kOk) raise(static_cast<int>(r.status), "unpublish", r.detail);
  published_ = false;
  held_ = -1;
  live_.counter->invalidate();  // before we return, so before the user overwrites anything
}

void Model::offload(uint64_t member, int64_t version) {
  // Runs while our unpublish waits for its answer: the user's buffers still hold `version`.
  if (member != member_ || !frozen_) return;
  std::unique_ptr<Holding> copy;
  std::string desc;
  try {
    copy = live_.copy_to_host(ctx_.worker(), version);
    desc = copy->descriptor(ctx_.worker().address(), copy->epoch);
  } catch (const Error& e) {
    ctx_.set_last_error(std::string("retention offload of version ") + std::to_string(version) + " failed: " + e.what());
    return;  // the registry keeps waiting; the unpublish completes once readers are gone
  }
  {
    std::lock_guard<std::mutex> lk(offload_mu_);
    offloaded_[version] = std::move(copy);
  }
  stats_.offloads++;
  sched::Reply r = ctx_.registry().call(sched::OffloadDone{0, 0, member, version, desc}, ctx_.config().timeout_ms);
  if (r.status != sched::Status::kOk) discard(version);
}

void Model::discard(int64_t version) {
  std::unique_ptr<Holding> gone;
  std::lock_guard<std::mutex> lk(offload_mu_);
  auto it = offloaded_.find(version);
  if (it != offloaded_.end()) {
    gone = std::move(it->second);
    offloaded_.erase(it);
  }
}

void Model::reregister() {
  std::lock_guard<std::mutex> lk(op_mu_);
  ensure_registered();
}

sched::Reply Model::ask(const std::function<sched::Event()>& make) {
  auto& reg = ctx_.registry();
  for (int attempt = 0;; ++attempt) {
    ensure_registered();
    uint64_t gen = gen_;
    try {
      sched::Reply r = reg.call(make(), ctx_.config().timeout_ms);
      if (r.status == sched::Status::kOk || attempt > 0 || reg.generation() == gen) return r;
    } catch (const Error& e) {
      if (e.code() != Code::kRegistry || attempt > 0) throw;
    }
  }
}

void Model::ensure_registered() {
  if (ctx_.registry().wait_connected() == gen_) return;
  {
    // A new registry knows nothing of our retention copies: free them.
    std::lock_guard<std::mutex> olk(offload_mu_);
    offloaded_.clear();
  }
  open_member();
  if (published_) {
    int64_t v = held_;
    published_ = false;
    publish_locked(v);
    stats_.republished++;
  }
}

bool Model::stat(const std::string& key, int64_t* value) const {
  auto u = [](uint64_t x) { return static_cast<int64_t>(x); };
  if (key == "held_version") *value = held_;
  else if (key == "bytes_held") *value = live_.counter ? u(counter_bytes(live_.counter->load())) : 0;
  else if (key == "total_bytes") *value = u(live_.table.total_bytes());
  else if (key == "replications") *value = u(stats_.replications);
  else if (key == "partial_sources") *value = u(stats_.partial_sources);
  else if (key == "source_failures") *value = u(stats_.source_failures);
  else if (key == "counter_reads") *value = u(stats_.counter_reads);
  else if (key == "gets") *value = u(stats_.gets);
  else if (key == "offloads") *value = u(stats_.offloads);
  else if (key == "republished") *value = u(stats_.republished);
  else if (key == "compact_bytes") *value = u(stats_.compact_bytes);
  else if (key == "compacted_tensors") *value = u(stats_.compacted_tensors);
  else if (key == "copy_mode") *value = u(stats_.copy_mode);
  else if (key == "pack_us") *value = u(stats_.pack_us);
  else if (key == "unpack_us") *value = u(stats_.unpack_us);
  else return false;
  return true;
}

void Model::close() {
  std::lock_guard<std::mutex> lk(op_mu_);
  finish_staging();
  if (published_) unpublish_locked();
  if (ctx_.registry().connected()) {
    sched::Reply r = ctx_.registry().call(sched::Close{0, 0, member_}, ctx_.config().timeout_ms);
    (void)r;
  }
  {
    std::lock_guard<std::mutex> olk(offload_mu_);
    offloaded_.clear();
  }
}

}  // namespace thub::client
