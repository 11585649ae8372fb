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
  sched::Open ev{0, 0, model, replica, shard, num_shards, 0, false};
  ev.retain = static_cast<int>(info.get_int("retain", 0, 0, 1 << 20));
  ev.spot = info.get_bool("spot", false);
  sched::Reply r = ctx_.registry().call(ev, ctx_.config().timeout_ms);
  if (r.status != sched::Status::kOk) raise(static_cast<int>(r.status), "open", r.detail);
  member_ = r.member;
  ctx_.attach(member_, this);
}

Model::~Model() { ctx_.detach(member_); }

void Model::raise(int status, const std::string& what, const std::string& detail) const {
  throw Error(static_cast<Code>(status), model_ + "/" + replica_ + "/shard " + std::to_string(shard_) + ": " + what +
                                             ": " + detail);
}

void Model::register_tensor(const std::string& name, void* addr, uint64_t bytes, int memtype) {
  if (frozen_) {
    throw Error(Code::kState, "tensor '" + name + "': register every tensor before the first publish or replicate");
  }
  if (memtype == kMemCuda) {
    throw Error(Code::kUnsupported, "tensor '" + name + "': CUDA memory is not supported by this build yet");
  }
  if (memtype != kMemHost) throw Error(Code::kArg, "tensor '" + name + "': unknown memtype " + std::to_string(memtype));
  table_.add(name, addr, bytes, memtype);
}

void Model::freeze() {
  if (frozen_) return;
  if (table_.empty()) throw Error(Code::kState, "no tensor is registered: register tensors before publish/replicate");
  auto& w = ctx_.worker();
  for (const auto& t : table_.tensors()) {
    regions_.push_back(t.bytes > 0 ? w.map(t.addr, t.bytes) : nullptr);
  }
  counter_ = std::make_unique<std::atomic<uint64_t>>(0);
  counter_region_ = w.map(counter_.get(), sizeof(uint64_t));
  hashes_.assign(1 + table_.hash_blocks(), 0);
  hash_region_ = w.map(hashes_.data(), hashes_.size() * sizeof(uint64_t));
  frozen_ = true;
}

std::string Model::descriptor() const {
  Descriptor d;
  d.worker_address = ctx_.worker().address();
  for (size_t i = 0; i < table_.tensors().size(); ++i) {
    RemoteTensor rt;
    rt.name = table_.tensors()[i].name;
    rt.region.bytes = table_.tensors()[i].bytes;
    if (regions_[i]) {
      rt.region.addr = regions_[i]->address();
      rt.region.rkey = regions_[i]->packed_rkey();
    }
    d.tensors.push_back(std::move(rt));
  }
  d.counter = {counter_region_->address(), sizeof(uint64_t), counter_region_->packed_rkey()};
  d.hashes = {hash_region_->address(), hashes_.size() * sizeof(uint64_t), hash_region_->packed_rkey()};
  return encode_descriptor(d);
}

void Model::publish(int64_t version) {
  if (version < 0) throw Error(Code::kArg, "publish needs an absolute version >= 0 (got " + std::to_string(version) + ")");
  if (published_) {
    throw Error(Code::kState, "already published version " + std::to_string(held_) + "; unpublish first");
  }
  freeze();
  if (ctx_.config().verify) {
    // The checksums are computed once, by the publisher; replicas copy them with the data.
    for (uint64_t b = 0; b < table_.hash_blocks(); ++b) hashes_[1 + b] = table_.hash_block(b);
    hashes_[0] = 1;
  } else {
    hashes_[0] = 0;
  }
  counter_->store(table_.total_bytes(), std::memory_order_release);
  sched::Publish ev{0, 0, member_, version, table_.layout_hash(), descriptor()};
  sched::Reply r = ctx_.registry().call(ev, ctx_.config().timeout_ms);
  if (r.status != sched::Status::kOk) {
    counter_->store(0, std::memory_order_release);
    raise(static_cast<int>(r.status), "publish of version " + std::to_string(version), r.detail);
  }
  held_ = version;
  published_ = true;
}

int64_t Model::replicate(int64_t spec) {
  if (published_) {
    throw Error(Code::kState, "replicate while holding version " + std::to_string(held_) +
                                  ": unpublish first, or use THUB_Update");
  }
  bool not_updated = false;
  return transfer(spec, -1, &not_updated);
}

Code Model::update(int64_t spec, int64_t* got) {
  if (!published_) {
    *got = replicate(spec);
    return Code::kSuccess;
  }
  // Ask whether something newer exists while still holding (and serving) the old version.
  bool not_updated = false;
  const auto& cfg = ctx_.config();
  sched::Replicate probe{0, 0, member_, spec, held_, table_.layout_hash(), descriptor()};
  sched::Reply r = ctx_.registry().call(probe, cfg.timeout_ms);
  if (r.status == sched::Status::kNotUpdated) {
    *got = held_;
    return Code::kNotUpdated;
  }
  if (r.status != sched::Status::kState) raise(static_cast<int>(r.status), "update", r.detail);
  // Something newer exists: drain the readers of the old version, then fetch the new one.
  int64_t old = held_;
  unpublish();
  int64_t v = transfer(spec, old, &not_updated);
  if (not_updated) {
    // The newer version vanished in between; our buffers are untouched, so serve the old one again.
    publish(old);
    *got = old;
    return Code::kNotUpdated;
  }
  *got = v;
  return Code::kSuccess;
}

int64_t Model::transfer(int64_t spec, int64_t newer_than, bool* not_updated) {
  freeze();
  const auto& cfg = ctx_.config();
  auto& reg = ctx_.registry();
  uint64_t layout = table_.layout_hash();
  // Ask for a version and a source. For an update the registry hides our old holding and
  // answers only once nobody reads it any more, so the buffers may be overwritten then.
  sched::Replicate ev{0, 0, member_, spec, newer_than, layout, descriptor()};
  sched::Reply r = reg.call(ev, cfg.timeout_ms);
  if (r.status == sched::Status::kNotUpdated) {
    *not_updated = true;
    return held_;
  }
  if (r.status != sched::Status::kOk) raise(static_cast<int>(r.status), "replicate", r.detail);
  // From here on our buffers are being overwritten: we hold no complete version.
  published_ = false;
  held_ = -1;
  counter_->store(0, std::memory_order_release);
  hashes_[0] = 0;
  int64_t version = r.version;
  uint64_t lease = r.lease;
  uint64_t have = 0;
  for (;;) {
    if (r.source_partial) stats_.partial_sources++;
    Descriptor src = decode_descriptor(r.source_descriptor);
    const auto& mine = table_.tensors();
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
    ts.local = &table_;
    ts.source = std::move(src);
    ts.source_partial = r.source_partial;
    ts.start = have;
    ts.counter = counter_.get();
    ts.hashes = hashes_.data();
    ts.verify = cfg.verify;
    ts.chunk_size = cfg.chunk_size;
    ts.max_inflight = cfg.max_inflight;
    ts.stall_timeout_us = cfg.stall_timeout_ms * 1000;
    TransferResult res = start_transfer(ctx_.worker(), std::move(ts)).get();
    stats_.counter_reads = res.stats.counter_reads;
    stats_.gets = res.stats.gets;
    have = res.held;
    if (res.code == Code::kSuccess) {
      sched::Reply d = reg.call(sched::TransferDone{0, 0, member_, lease}, cfg.timeout_ms);
      if (d.status != sched::Status::kOk) raise(static_cast<int>(d.status), "transfer done", d.detail);
      stats_.replications++;
      held_ = version;
      published_ = true;
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
            "replicate of version " + std::to_string(version),
            res.error + "; no other source: " + r.detail);
    }
    lease = r.lease;
  }
}

void Model::unpublish() {
  if (!published_) throw Error(Code::kState, "nothing is published: publish or replicate first");
  sched::Reply r = ctx_.registry().call(sched::Unpublish{0, 0, member_}, ctx_.config().timeout_ms);
  if (r.status != sched::Status::kOk) raise(static_cast<int>(r.status), "unpublish", r.detail);
  published_ = false;
  held_ = -1;
  counter_->store(0, std::memory_order_release);
}

bool Model::stat(const std::string& key, int64_t* value) const {
  auto u = [](uint64_t x) { return static_cast<int64_t>(x); };
  if (key == "held_version") *value = held_;
  else if (key == "bytes_held") *value = counter_ ? u(counter_->load(std::memory_order_acquire)) : 0;
  else if (key == "total_bytes") *value = u(table_.total_bytes());
  else if (key == "replications") *value = u(stats_.replications);
  else if (key == "partial_sources") *value = u(stats_.partial_sources);
  else if (key == "source_failures") *value = u(stats_.source_failures);
  else if (key == "counter_reads") *value = u(stats_.counter_reads);
  else if (key == "gets") *value = u(stats_.gets);
  else return false;
  return true;
}

void Model::close() {
  if (published_) unpublish();
  if (ctx_.registry().connected()) {
    sched::Reply r = ctx_.registry().call(sched::Close{0, 0, member_}, ctx_.config().timeout_ms);
    (void)r;
  }
  regions_.clear();
  counter_region_.reset();
  hash_region_.reset();
}

}  // namespace thub::client
