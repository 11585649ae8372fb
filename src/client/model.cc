#include "src/client/model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "src/client/context.h"
#include "src/client/descriptor.h"
#include "src/client/executor.h"
#include "src/client/holding.h"
#include "src/client/model_core.h"
#include "src/client/progress_counter.h"
#include "src/client/tensor_copy.h"
#include "src/client/transfer.h"
#include "src/common/status.h"
#include "src/registry/connection.h"
#include "src/transport/cuda_staging.h"
#include "src/transport/worker.h"

namespace thub::client {

using namespace model_detail;

// ---- offload seeding (issue 22 item 3) --------------------------------------------------------

struct Model::Seed {
  uint64_t bound = 0;  // offload_seeding: the most host memory the seed buffer may take
  std::mutex mu;       // the fields below (stat reads them too)
  std::vector<std::pair<std::string, uint64_t>> tensors;  // this shard's, as registered
  std::string off;     // why this shard seeds nothing ("" while it may)
  std::unique_ptr<Model> member;  // replica "<replica>~seed", over `buf`
  void* buf = nullptr;
  std::shared_ptr<Request> running;  // the member's seed-only update, until seen done
  uint64_t bytes = 0;
  uint64_t seeds = 0;

  ~Seed() { stop(); }
  // Waits for a seed in flight (a grant cannot be taken back), closes the member (the
  // registry drains its readers first), then frees the memory. Under mu.
  void stop() {
    if (member && running && !running->done()) {
      member->cancel(*running);
      running->wait();
    }
    running.reset();
    if (member) {
      member->close()->wait();
      member.reset();
    }
    std::free(buf);
    buf = nullptr;
    bytes = 0;
  }
  // A tensor's place in the buffer: each starts 64-byte aligned.
  static uint64_t padded(uint64_t bytes) { return (bytes + 63) & ~uint64_t{63}; }
  void turn_off(const Model& m, std::string why) {
    const MemberIdentity& id = m.core_->machine.identity();
    std::fprintf(stderr, "tensorhub: warning: %s/%s/shard %d: no offload seeding: %s\n", id.model.c_str(),
                 id.replica.c_str(), id.shard, why.c_str());
    off = std::move(why);
  }
};

// ---- the user's side ------------------------------------------------------------------------------

Model::Model(Context& ctx, const std::string& model, const std::string& replica, int shard, int num_shards,
             const InfoMap& info, bool seed_buffer) {
  if (model.empty()) throw Error(Code::kArg, "model name is empty");
  if (replica.empty()) throw Error(Code::kArg, "replica name is empty");
  if (model.size() > kMaxNameBytes || replica.size() > kMaxNameBytes) {
    throw Error(Code::kArg, "model and replica names are at most " + std::to_string(kMaxNameBytes) + " bytes");
  }
  if (num_shards < 1) throw Error(Code::kArg, "num_shards must be >= 1 (got " + std::to_string(num_shards) + ")");
  if (shard < 0 || shard >= num_shards) {
    throw Error(Code::kArg, "shard " + std::to_string(shard) + " is outside [0, " + std::to_string(num_shards) + ")");
  }
  MemberIdentity id;
  id.model = model;
  id.replica = replica;
  id.shard = shard;
  id.num_shards = num_shards;
  id.retain = static_cast<int>(info.get<info_key("retain")>());
  id.spot = info.get<info_key("spot")>();
  id.seed = seed_buffer;
  core_ = std::make_shared<Core>(ctx, std::move(id));
  ctx.attach(core_);
  // The generation is read on the engine, where any later RegistryBack is dispatched after it.
  Context* c = &ctx;
  // So is whether every registry is gone: then the open fails at once (THUB_ERR_REGISTRY).
  auto r = core_->submit(Request::Kind::kOpen, [c](uint64_t op) {
    const std::string* gone = c->registry_gone();
    return MachineEvent{OpOpen{op, c->registry().generation(), gone != nullptr, gone ? *gone : std::string()}};
  });
  r->wait();
  if (r->code() != Code::kSuccess) {
    ctx.detach(core_.get());
    Context& c = core_->ctx;
    c.engine().call([this] { core_.reset(); });
    throw Error(r->code(), model + "/" + replica + "/shard " + std::to_string(shard) + ": " + r->detail());
  }
  if (!seed_buffer && ctx.config().offload_seeding > 0) {
    seed_ = std::make_unique<Seed>();
    seed_->bound = ctx.config().offload_seeding;
  }
}

void Model::start_seed(int64_t spec) {
  Seed& s = *seed_;
  std::lock_guard<std::mutex> lk(s.mu);
  if (!s.off.empty()) return;
  if (s.running && s.running->done()) {
    const Code c = s.running->code();
    if (c == Code::kSuccess) {
      s.seeds++;
    } else if (c == Code::kLayout || c == Code::kArg || c == Code::kUnsupported || c == Code::kState) {
      return s.turn_off(*this, std::string("its seed buffer's update failed: ") + s.running->detail());
    }  // else (not updated, a lost version, a failed source): the next update asks again
    s.running.reset();
  }
  if (!s.member) {
    uint64_t total = 0;
    for (const auto& [name, bytes] : s.tensors) total += Seed::padded(bytes);
    if (total > s.bound) {
      return s.turn_off(*this, "the shard's " + std::to_string(total) + " bytes exceed offload_seeding=" +
                                   std::to_string(s.bound));
    }
    const MemberIdentity& id = core_->machine.identity();
    const size_t alloc = std::max<size_t>(4096, (total + 4095) & ~uint64_t{4095});
    s.buf = std::aligned_alloc(4096, alloc);
    if (!s.buf) return s.turn_off(*this, "cannot allocate " + std::to_string(alloc) + " bytes of host memory");
    std::memset(s.buf, 0, alloc);  // its pages now, not under the first transfer
    try {
      InfoMap info;
      info.set("retain", "0");
      info.set("spot", id.spot ? "true" : "false");
      s.member = std::make_unique<Model>(core_->ctx, id.model, id.replica + "~seed", id.shard, id.num_shards, info,
                                         /*seed_buffer=*/true);
      uint64_t off = 0;
      for (const auto& [name, bytes] : s.tensors) {
        s.member->register_tensor(name, static_cast<char*>(s.buf) + off, bytes, kMemHost);
        off += Seed::padded(bytes);
      }
    } catch (const Error& e) {
      s.member.reset();
      std::free(s.buf);
      s.buf = nullptr;
      return s.turn_off(*this, std::string("its seed buffer could not be opened: ") + e.what());
    }
    s.bytes = total;
  }
  // The rollout takes what the seed buffer holds before the buffer moves on: asked now, it
  // would drain that version for the next one, and the rollout would skip it.
  if (s.member->stat(stat_key("held_version")) > core_->held.load()) return;
  // Every other relative update asks (a refused one still counts as the seed replica's round,
  // so that the shards of a replica stay in step); the one that runs is kept.
  auto r = s.member->replicate(spec, true);
  if (!s.running) s.running = std::move(r);
}

void Model::stop_seed() {
  if (!seed_) return;
  std::lock_guard<std::mutex> lk(seed_->mu);
  seed_->stop();
  seed_->off = "the model is closed";
}

Model::~Model() {
  seed_.reset();  // before the member goes: it waits for a seed in flight
  if (!core_) return;
  Context& ctx = core_->ctx;
  ctx.detach(core_.get());
  // Released on the engine, after what is queued for it: its holding's registrations go
  // with it (the copy engine holds only weak references).
  ctx.copier().call([] {});
  ctx.engine().call([this] { core_.reset(); });
}

// Copy mode (the paper's, for frameworks that allocate a tensor anew for each version): after
// the first publish or replicate, THUB_Register of a registered tensor points it at new memory
// of the same size and kind. Only the staging buffer is registered and served; the tensors are
// read when a publish stages them and written when a transfer copies out, so the new memory
// takes part from the next publish or transfer on, and nothing is registered again. Refused
// while anything could still read or write the old memory: a request of the model in flight,
// or a version held that is not whole in the staging buffer (its retention copy would be
// taken from the tensors). False, with nothing done, while a publish still stages from the
// old memory: the caller waits for it to stop and asks again.
bool Model::Core::repoint(const std::string& name, void* addr, uint64_t bytes, int memtype) {
  const std::string what = "tensor '" + name + "'";
  const size_t i = live.table.index_of(name);
  if (i == live.table.tensors().size())
    throw Error(Code::kState, what + ": register every tensor before the first publish or replicate");
  if (!live.copy_mode) {
    throw Error(Code::kState, what + ": re-pointing a registered tensor needs copy mode (transfer_mode=copy): this model "
                                     "serves its tensors in place, where they were registered");
  }
  const Tensor& t = live.table.tensors()[i];
  if (bytes != t.bytes || memtype != t.memtype) {
    throw Error(Code::kArg, what + ": re-pointed with " + std::to_string(bytes) + " bytes of memtype " +
                                std::to_string(memtype) + "; it has " + std::to_string(t.bytes) + " bytes of memtype " +
                                std::to_string(t.memtype));
  }
  if (memtype == kMemCuda && bytes > 0 && !transport::cuda_is_device_pointer(addr))
    throw Error(Code::kArg, what + ": re-pointed as THUB_MEM_CUDA but the memory is not CUDA device memory");
  if (!requests.empty()) {
    throw Error(Code::kState, what + ": a publish, replicate, update, unpublish or close of this model is in progress: "
                                     "re-point between them");
  }
  if (staging) return false;
  if (machine.held() >= 0 && live.bytes_shown() != live.plan.total_bytes()) {
    throw Error(Code::kState, what + ": the version this model holds is not whole in its staging buffer");
  }
  live.table.repoint(i, addr);
  ++repoints;
  return true;
}

void Model::register_tensor(const std::string& name, void* addr, uint64_t bytes, int memtype) {
  Core& c = *core_;
  bool repointed = false;
  // One hop to the engine per call (8,192 registrations took 146 ms with two).
  auto add = [&] {
    if (memtype == kMemCuda) {
      std::string why;
      if (!transport::cuda_usable(&why)) throw Error(Code::kUnsupported, "tensor '" + name + "': CUDA memory: " + why);
      if (bytes > 0 && !transport::cuda_is_device_pointer(addr)) {
        throw Error(Code::kArg, "tensor '" + name + "': registered as THUB_MEM_CUDA but is not CUDA device memory");
      }
      auto mode = c.ctx.config().transfer_mode;
      bool direct = mode == ContextConfig::TransferMode::kDirect || mode == ContextConfig::TransferMode::kTcp;
      if (direct && !c.ctx.worker().can_map_cuda()) {
        throw Error(Code::kUnsupported, "tensor '" + name + "': transfer_mode=direct/tcp needs a CUDA-enabled UCX >= 1.16 (this is " +
                                            transport::ucx_version() + " without it); use transfer_mode=auto or copy");
      }
    }
    if (memtype != kMemHost && memtype != kMemCuda) {
      throw Error(Code::kArg, "tensor '" + name + "': unknown memtype " + std::to_string(memtype));
    }
    c.live.table.add(name, addr, bytes, memtype);
    c.total_bytes = c.live.table.total_bytes();
  };
  for (std::shared_ptr<std::promise<void>> staged;; staged.reset()) {
    c.ctx.engine().call([&] {
      if (!c.frozen) return add();
      // After the first publish or replicate: a re-pointing (copy mode), once a publish's
      // staging from the old memory has ended (it copies the shard once).
      repointed = c.repoint(name, addr, bytes, memtype);
      if (!repointed) {
        staged = std::make_shared<std::promise<void>>();
        c.when_staging_stopped([staged] { staged->set_value(); });
      }
    });
    if (!staged) break;
    staged->get_future().wait();
  }
  if (repointed) return;
  if (seed_) {
    std::lock_guard<std::mutex> lk(seed_->mu);
    seed_->tensors.emplace_back(name, bytes);
  }
}

std::shared_ptr<Request> Model::publish(int64_t version) {
  return core_->submit(Request::Kind::kPublish, [version](uint64_t op) { return MachineEvent{OpPublish{op, version}}; });
}

std::shared_ptr<Request> Model::replicate(int64_t spec, bool update) {
  // Offload seeding: the seed buffer's request goes first, so that the registry decides it
  // (and sees the version on its way) before this update.
  if (seed_ && update && spec < 0) start_seed(spec);
  return core_->submit(update ? Request::Kind::kUpdate : Request::Kind::kReplicate,
                       [spec, update](uint64_t op) { return MachineEvent{OpReplicate{op, spec, update}}; });
}

std::shared_ptr<Request> Model::unpublish() {
  return core_->submit(Request::Kind::kUnpublish, [](uint64_t op) { return MachineEvent{OpUnpublish{op}}; });
}

std::shared_ptr<Request> Model::close() {
  stop_seed();
  return core_->submit(Request::Kind::kClose, [](uint64_t op) { return MachineEvent{OpClose{op}}; });
}

void Model::cancel(const Request& r) {
  auto core = core_;
  uint64_t op = r.id();
  core->ctx.engine().post([core, op] { core->feed(OpCancel{op}); });
}

void Model::on_registry(const MachineEvent& ev) { core_->feed(ev); }

int64_t Model::stat(StatKey key) const {
  const Core& c = *core_;
  auto u = [](uint64_t x) { return static_cast<int64_t>(x); };
  auto path = [&](transport::ReadPath p) { return u(c.path_bytes[static_cast<size_t>(p)]); };
  switch (key) {  // every key of the table (tests/capi/stat_keys_test.cc asks them all)
    case stat_key("held_version"): return c.held;
    case stat_key("bytes_held"): return u(c.live.bytes_shown());
    case stat_key("total_bytes"): return u(c.total_bytes);
    case stat_key("replications"): return u(c.replications);
    case stat_key("partial_sources"): return u(c.partial_sources);
    case stat_key("source_failures"): return u(c.source_failures);
    case stat_key("counter_reads"): return u(c.counter_reads);
    case stat_key("gets"): return u(c.gets);
    case stat_key("offloads"): return u(c.offloads);
    case stat_key("republished"): return u(c.republished);
    case stat_key("compact_bytes"): return u(c.compact_bytes);
    case stat_key("compacted_tensors"): return u(c.compacted_tensors);
    case stat_key("copy_mode"): return u(c.copy_mode);
    case stat_key("copy_mode_reason"): return u(c.copy_mode_reason);
    case stat_key("registrations"): return u(c.registrations);
    case stat_key("pack_us"): return u(c.pack_us);
    case stat_key("unpack_us"): return u(c.unpack_us);
    case stat_key("bytes_ucx_get"): return path(transport::ReadPath::kUcxGet);
    case stat_key("bytes_socket"): return path(transport::ReadPath::kSocket);
    case stat_key("bytes_process_vm_readv"): return path(transport::ReadPath::kProcess);
    case stat_key("bytes_ucx_mapped"): return path(transport::ReadPath::kUcxMapped);
    case stat_key("source_across"): return c.source_across;
    case stat_key("wan_bytes"): return u(c.wan_bytes);
    case stat_key("repoints"): return u(c.repoints);
    case stat_key("offload_seed_bytes"):
    case stat_key("offload_seed_version"):
    case stat_key("offload_seeds"): {
      if (!seed_) return key == stat_key("offload_seed_version") ? -1 : 0;
      std::lock_guard<std::mutex> lk(seed_->mu);
      if (key == stat_key("offload_seed_bytes")) return u(seed_->bytes);
      if (key == stat_key("offload_seeds")) {
        const bool last = seed_->running && seed_->running->done() && seed_->running->code() == Code::kSuccess;
        return u(seed_->seeds + (last ? 1 : 0));
      }
      return seed_->member ? seed_->member->stat(stat_key("held_version")) : -1;
    }
  }
  throw Error(Code::kInternal, "THUB_Model_stat: stat key " + std::to_string(static_cast<int>(key)) +
                                   " of the table has no reading");
}

}  // namespace thub::client
