#include "src/client/model.h"

#include "src/client/context.h"
#include "src/client/descriptor.h"
#include "src/common/status.h"
#include "src/registry/connection.h"
#include "src/transport/worker.h"

namespace thub::client {

namespace {
constexpr int kMemHost = 0;
constexpr int kMemCuda = 1;
}  // namespace

Model::Model(Context& ctx, const std::string& model, const std::string& replica, int shard, int num_shards,
             const InfoMap& info)
    : ctx_(ctx), model_(model), replica_(replica), shard_(shard), num_shards_(num_shards) {
  if (model.empty()) throw Error(Code::kArg, "model name is empty");
  if (replica.empty()) throw Error(Code::kArg, "replica name is empty");
  if (num_shards < 1) throw Error(Code::kArg, "num_shards must be >= 1 (got " + std::to_string(num_shards) + ")");
  if (shard < 0 || shard >= num_shards) {
    throw Error(Code::kArg, "shard " + std::to_string(shard) + " is outside [0, " + std::to_string(num_shards) + ")");
  }
  retain_ = static_cast<int>(info.get_int("retain", 0, 0, 1 << 20));
  spot_ = info.get_bool("spot", false);
  open_member();
}

Model::~Model() { ctx_.retire(this); }

void Model::open_member() {
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
    throw Error(Code::kUnsupported, "tensor '" + name + "': CUDA memory is not supported by this build yet");
  }
  if (memtype != kMemHost) throw Error(Code::kArg, "tensor '" + name + "': unknown memtype " + std::to_string(memtype));
  live_.table.add(name, addr, bytes, memtype);
}

void Model::freeze() {
  if (frozen_) return;
  if (live_.table.empty()) {
    throw Error(Code::kState, "no tensor is registered: register tensors before publish/replicate");
  }
  live_.map(ctx_.worker());
  frozen_ = true;
}

void Model::publish(int64_t version) {
  std::lock_guard<std::mutex> lk(op_mu_);
  if (version < 0) throw Error(Code::kArg, "publish needs an absolute version >= 0 (got " + std::to_string(version) + ")");
  if (published_) {
    throw Error(Code::kState, "already published version " + std::to_string(held_) + "; unpublish first");
  }
  freeze();
  if (ctx_.config().verify) {
    // The checksums are computed once, by the publisher; replicas copy them with the data.
    for (uint64_t b = 0; b < live_.table.hash_blocks(); ++b) live_.hashes[1 + b] = live_.table.hash_block(b);
    live_.hashes[0] = 1;
  } else {
    live_.hashes[0] = 0;
  }
  publish_locked(version);
}

void Model::publish_locked(int64_t version) {
  live_.counter->store(live_.table.total_bytes(), std::memory_order_release);
  sched::Publish ev{0, 0, member_, version, live_.table.layout_hash(), live_.descriptor(ctx_.worker().address())};
  sched::Reply r = ctx_.registry().call(ev, ctx_.config().timeout_ms);
  if (r.status != sched::Status::kOk) {
    live_.counter->store(0, std::memory_order_release);
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
  bool not_updated = false;
  if (!published_) {
    *got = transfer(spec, -1, &not_updated);
    return Code::kSuccess;
  }
  int64_t old = held_;
  int64_t v = transfer(spec, old, &not_updated);
  if (!not_updated) {
    *got = v;
    return Code::kSuccess;
  }
  *got = held_;
  return Code::kNotUpdated;
}

int64_t Model::transfer(int64_t spec, int64_t newer_than, bool* not_updated) {
  freeze();
  const auto& cfg = ctx_.config();
  auto& reg = ctx_.registry();
  uint64_t gen = reg.generation();
  uint64_t layout = live_.table.layout_hash();
  const std::string& self = ctx_.worker().address();
  // Ask for a version and a source. When we hold `newer_than` and something newer exists,
  // the registry hides our old holding and answers only once nobody reads it any more, so
  // the buffers may be overwritten then (the atomic update of sched/update.cc); if nothing
  // is newer, or the answer is an error, we still hold and serve the old version.
  sched::Replicate ev{0, 0, member_, spec, newer_than, layout, live_.descriptor(self)};
  sched::Reply r = reg.call(ev, cfg.timeout_ms);
  if (r.status == sched::Status::kNotUpdated) {
    *not_updated = true;
    return held_;
  }
  if (r.status != sched::Status::kOk) raise(static_cast<int>(r.status), "replicate", r.detail);
  // From here on our buffers are being overwritten: we hold no complete version.
  published_ = false;
  held_ = -1;
  live_.counter->store(0, std::memory_order_release);
  live_.hashes[0] = 0;
  int64_t version = r.version;
  uint64_t lease = r.lease;
  uint64_t have = 0;
  for (;;) {
    if (r.source_partial) stats_.partial_sources++;
    Descriptor src = decode_descriptor(r.source_descriptor);
    const auto& mine = live_.table.tensors();
    std::string mismatch;
    if (src.tensors.size() != mine.size()) {
      mismatch = "the source has " + std::to_string(src.tensors.size()) + " tensors, this replica " +
                 std::to_string(mine.size());
    }
    for (size_t i = 0; mismatch.empty() && i < mine.size(); ++i) {
      if (src.tensors[i].name != mine[i].name || src.tensors[i].region.bytes != mine[i].bytes) {
        mismatch = "tensor " + std::to_string(i) + " is '" + mine[i].name + "' (" + std::to_string(mine[i].bytes) +
                   " bytes) here but '" + src.tensors[i].name + "' (" + std::to_string(src.tensors[i].region.bytes) +
                   " bytes) at the source";
      }
    }
    if (!mismatch.empty()) {
      (void)reg.call(sched::Unpublish{0, 0, member_}, cfg.timeout_ms);
      raise(static_cast<int>(Code::kLayout), "replicate", mismatch);
    }
    TransferSpec ts;
    ts.local = &live_.table;
    ts.source = std::move(src);
    ts.source_partial = r.source_partial;
    ts.start = have;
    ts.counter = live_.counter.get();
    ts.hashes = live_.hashes.data();
    ts.verify = cfg.verify;
    ts.chunk_size = cfg.chunk_size;
    ts.max_inflight = cfg.max_inflight;
    ts.stall_timeout_us = cfg.stall_timeout_ms * 1000;
    TransferResult res = start_transfer(ctx_.worker(), std::move(ts)).get();
    stats_.counter_reads = res.stats.counter_reads;
    stats_.gets = res.stats.gets;
    have = res.held;
    if (res.code == Code::kSuccess) {
      stats_.replications++;
      held_ = version;
      published_ = true;
      if (reg.generation() != gen) return version;  // a new registry: reregister() publishes it
      try {
        sched::Reply d = reg.call(sched::TransferDone{0, 0, member_, lease}, cfg.timeout_ms);
        if (d.status != sched::Status::kOk) raise(static_cast<int>(d.status), "transfer done", d.detail);
      } catch (const Error& e) {
        // The data is complete and checked; only the registry is gone. Failover re-publishes it.
        if (e.code() != Code::kRegistry) throw;
      }
      return version;
    }
    if (!res.source_failed) {
      (void)reg.call(sched::Unpublish{0, 0, member_}, cfg.timeout_ms);
      raise(static_cast<int>(res.code), "replicate of version " + std::to_string(version), res.error);
    }
    // The source failed: report how far we got and resume from another one.
    stats_.source_failures++;
    r = reg.call(sched::SourceFailed{0, 0, member_, lease, have}, cfg.timeout_ms);
    if (r.status != sched::Status::kOk) {
      raise(static_cast<int>(r.status == sched::Status::kVersionLost ? r.status : sched::Status::kTransport),
            "replicate of version " + std::to_string(version), res.error + "; no other source: " + r.detail);
    }
    lease = r.lease;
  }
}

void Model::unpublish() {
  std::lock_guard<std::mutex> lk(op_mu_);
  if (!published_) throw Error(Code::kState, "nothing is published: publish or replicate first");
  unpublish_locked();
}

void Model::unpublish_locked() {
  // The registry may order a retention offload before it answers (see offload()).
  sched::Reply r = ctx_.registry().call(sched::Unpublish{0, 0, member_}, ctx_.config().timeout_ms);
  if (r.status != sched::Status::kOk) raise(static_cast<int>(r.status), "unpublish", r.detail);
  published_ = false;
  held_ = -1;
  live_.counter->store(0, std::memory_order_release);
}

void Model::offload(uint64_t member, int64_t version) {
  // Runs while our unpublish waits for its answer: the user's buffers still hold `version`.
  if (member != member_ || !frozen_) return;
  std::unique_ptr<Holding> copy;
  std::string desc;
  try {
    copy = live_.copy_to_host(ctx_.worker());
    desc = copy->descriptor(ctx_.worker().address());
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
  else if (key == "bytes_held") *value = live_.counter ? u(live_.counter->load(std::memory_order_acquire)) : 0;
  else if (key == "total_bytes") *value = u(live_.table.total_bytes());
  else if (key == "replications") *value = u(stats_.replications);
  else if (key == "partial_sources") *value = u(stats_.partial_sources);
  else if (key == "source_failures") *value = u(stats_.source_failures);
  else if (key == "counter_reads") *value = u(stats_.counter_reads);
  else if (key == "gets") *value = u(stats_.gets);
  else if (key == "offloads") *value = u(stats_.offloads);
  else if (key == "republished") *value = u(stats_.republished);
  else return false;
  return true;
}

void Model::close() {
  std::lock_guard<std::mutex> lk(op_mu_);
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
