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
#include "src/client/progress_counter.h"
#include "src/client/tensor_copy.h"
#include "src/client/transfer.h"
#include "src/common/status.h"
#include "src/registry/connection.h"
#include "src/transport/cuda_staging.h"
#include "src/transport/worker.h"

namespace thub::client {

namespace {
constexpr int kMemHost = 0;
constexpr int kMemCuda = 1;
// Why a model is served through a staging copy (stat copy_mode_reason).
enum class CopyReason : uint64_t {
  kNone = 0,            // direct: the tensors are served in place
  kAsked = 1,           // transfer_mode=copy
  kCudaUnmappable = 2,  // auto, CUDA tensors that this UCX cannot move
  kCudaVerify = 3,      // auto, CUDA tensors with verify=true (checksums are taken on the host)
};
// Staging behind publish advances the counter every slice, so that readers start early.
constexpr uint64_t kStageSlice = 4u << 20;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

// Everything the engine touches for one model. Engine thread only, but for the atomics
// (THUB_Model_stat from any thread) and what the copy engine does with `live` while staging
// or copying out (the engine starts those and does not touch the bytes meanwhile).
struct Model::Core : RegistryListener, std::enable_shared_from_this<Core> {
  Context& ctx;
  MemberMachine machine;
  Holding live;  // the user's tensors
  std::shared_ptr<LateReads> late_reads = make_late_reads();  // given up into live's buffers
  std::map<int64_t, std::shared_ptr<Holding>> offloaded;  // retention copies by version
  bool frozen = false;
  std::map<uint64_t, std::shared_ptr<Request>> requests;  // by op id
  std::atomic<uint64_t> next_op{1};

  // Staging behind publish, on the copy engine: pack the tiny tensors, copy mode's buffer,
  // checksums. It stops at the next slice once the counter is invalidated.
  bool staging = false;
  std::vector<std::function<void()>> after_staging;  // run once it has stopped

  // The transfer running, and the copy-out that follows it on the copy engine.
  struct Delivery {
    TensorCopier copier;
    // Stream bytes copied out to the tensors: written by the copy engine only, read by the
    // progress thread too (on_advance's early out), hence atomic; relaxed, as a stale value
    // there costs only a redundant post that the copy engine checks again.
    std::atomic<uint64_t> delivered{0};
    uint64_t need = 0;       // the bytes to copy out (compact segment, or copy mode's all)
    std::string error;
    int64_t unpack_us = 0;
    // When the transfer's progress last went to the registry (progress thread only).
    int64_t reported_at = 0;
  };

  // counters (any thread reads)
  std::atomic<int64_t> held{-1};
  std::atomic<uint64_t> total_bytes{0};
  std::atomic<uint64_t> counter_reads{0}, gets{0}, compact_bytes{0}, compacted_tensors{0}, copy_mode{0};
  std::atomic<uint64_t> copy_mode_reason{0};  // CopyReason
  std::atomic<uint64_t> registrations{0}, repoints{0};
  std::atomic<uint64_t> path_bytes[transport::kReadPathCount] = {};  // of the last transfer, per read path
  std::atomic<uint64_t> pack_us{0}, unpack_us{0};
  std::atomic<int64_t> source_across{-1};  // the last transfer's source: 1 in another datacenter, 0 inside
  std::atomic<uint64_t> wan_bytes{0};      // bytes read from sources in another datacenter, all transfers
  std::atomic<uint64_t> replications{0}, partial_sources{0}, source_failures{0}, offloads{0}, republished{0};

  Core(Context& c, MemberIdentity id) : ctx(c), machine(std::move(id)) {}

  std::shared_ptr<Request> submit(Request::Kind kind, std::function<MachineEvent(uint64_t)> make);
  void feed(MachineEvent ev);
  void on_registry(const MachineEvent& ev) override { feed(ev); }
  void execute(std::vector<MachineAction> actions);
  void act(const SendRequest& a);
  void act(const PrepareHolding& a);
  void act(const PrepareFill& a);
  void act(const InvalidateHolding& a);
  void act(const BeginFill& a);
  void act(const BeginTransfer& a);
  void act(const MakeHostCopy& a);
  void act(const DropHostCopy& a);
  void act(const CompleteOp& a);
  void freeze();
  bool repoint(const std::string& name, void* addr, uint64_t bytes, int memtype);
  void stage(uint32_t fill, bool hash);
  void when_staging_stopped(std::function<void()> fn);
  void publish_stats();
};

// ---- the engine side ----------------------------------------------------------------------------

std::shared_ptr<Request> Model::Core::submit(Request::Kind kind, std::function<MachineEvent(uint64_t)> make) {
  auto req = std::make_shared<Request>(kind, next_op++);
  auto self = shared_from_this();
  ctx.engine().post([self, req, make = std::move(make)] {
    self->requests[req->id()] = req;
    self->feed(make(req->id()));
  });
  return req;
}

void Model::Core::feed(MachineEvent ev) {
  // THUB_DEBUG_MACHINE=1: every step of the machine, as it happens (read once per process).
  static const bool trace = [] {
    const char* e = std::getenv("THUB_DEBUG_MACHINE");
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  if (!trace) return execute(machine.step(std::move(ev)));
  const MemberIdentity& id = machine.identity();
  std::string line = "thub machine " + id.model + "/" + id.replica + "/" + std::to_string(id.shard) + " [" +
                     std::to_string(now_us()) + " us]: " + describe(ev);
  std::vector<MachineAction> actions = machine.step(std::move(ev));
  for (const MachineAction& a : actions) line += "\n    -> " + describe(a);
  std::fprintf(stderr, "%s\n", line.c_str());
  execute(std::move(actions));
}

void Model::Core::execute(std::vector<MachineAction> actions) {
  for (const auto& a : actions) std::visit([this](const auto& x) { act(x); }, a);
  publish_stats();
}

void Model::Core::publish_stats() {
  held = machine.held();
  const auto& c = machine.counters();
  replications = c.replications;
  partial_sources = c.partial_sources;
  source_failures = c.source_failures;
  offloads = c.offloads;
  republished = c.republished;
}

void Model::Core::act(const SendRequest& a) {
  std::weak_ptr<Core> weak = weak_from_this();
  Executor& engine = ctx.engine();
  const uint64_t req = a.req;
  const int64_t timeout = a.deadline ? ctx.config().timeout_ms : registry::Connection::kNoDeadline;
  ctx.registry().send(a.event, timeout, [weak, &engine, req](registry::RequestResult r) {
    engine.post([weak, req, r = std::move(r)]() mutable {
      auto self = weak.lock();
      if (!self) return;
      if (r.code == Code::kSuccess) {
        self->feed(RegistryReply{req, std::move(r.reply)});
      } else {
        self->feed(RegistryNoReply{req, r.code, r.detail});
      }
    });
  }, a.generation);
}

void Model::Core::freeze() {
  if (frozen) return;
  if (live.table.empty()) {
    throw Error(Code::kState, "no tensor is registered: register tensors before publish/replicate");
  }
  const auto& cfg = ctx.config();
  bool any_cuda = false;
  for (const auto& t : live.table.tensors()) any_cuda = any_cuda || t.memtype == kMemCuda;
  // auto stages CUDA tensors through host memory unless this UCX moves them itself (and
  // checksums, taken on the host, are off). Never silently: the stat copy_mode_reason says
  // why, and the first model of the process that auto stages says so on stderr.
  CopyReason why = CopyReason::kNone;
  if (cfg.transfer_mode == ContextConfig::TransferMode::kCopy) {
    why = CopyReason::kAsked;
  } else if (cfg.transfer_mode == ContextConfig::TransferMode::kAuto && any_cuda) {
    why = !ctx.worker().can_map_cuda() ? CopyReason::kCudaUnmappable : cfg.verify ? CopyReason::kCudaVerify : why;
  }
  const bool copy = why != CopyReason::kNone;
  if (!copy && any_cuda && cfg.verify) {
    throw Error(Code::kUnsupported, "verify=true with CUDA tensors needs transfer_mode=copy (checksums are taken on the host)");
  }
  // Every reader is handed our descriptor by the registry: it must fit its messages.
  StreamPlan plan(live.table, cfg.compaction_threshold);
  if (uint64_t n = descriptor_bound(live.table, plan, copy); n > kMaxDescriptorBytes) {
    throw Error(Code::kArg, "the shard's " + std::to_string(live.table.tensors().size()) +
                                " tensors would make a descriptor of up to " + std::to_string(n) + " bytes, more than " +
                                std::to_string(kMaxDescriptorBytes) +
                                ": register fewer tensors (or shorter names), or split the shard");
  }
  live.map(ctx.worker(), std::move(plan), copy, [this](const void* p, uint64_t n) { return ctx.find_allocation(p, n); });
  compact_bytes = live.plan.compact_bytes();
  compacted_tensors = live.plan.packed_count();
  std::set<const void*> distinct;  // segments that share a registration count once
  for (const auto& r : live.regions) distinct.insert(r.get());
  registrations = distinct.size();
  copy_mode = copy ? 1 : 0;
  copy_mode_reason = static_cast<uint64_t>(why);
  if (why == CopyReason::kCudaUnmappable || why == CopyReason::kCudaVerify) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      const MemberIdentity& id = machine.identity();
      std::fprintf(stderr,
                   "tensorhub: note: %s/%s/shard %d: CUDA tensors are staged through host memory "
                   "(transfer_mode=auto, copy mode: %s; stat copy_mode_reason %d; said once per process)\n",
                   id.model.c_str(), id.replica.c_str(), id.shard,
                   why == CopyReason::kCudaVerify ? "verify=true takes the checksums on the host"
                                                  : ("UCX " + transport::ucx_version() + " cannot move CUDA memory").c_str(),
                   static_cast<int>(why));
    }
  }
  frozen = true;
}

// Publish moves no bytes: a new fill (readers of an earlier fill of these buffers that the
// registry forgot see the epoch change), the counter at 0 if packing, staging or hashing
// runs behind publish (the descriptor's `staged` flag: readers follow the counter), else at
// the total. O(tensors), never O(bytes).
void Model::Core::act(const PrepareHolding& a) {
  try {
    freeze();
  } catch (const Error& e) {
    return feed(PrepareFailed{a.op, e.code(), e.what()});
  }
  const uint32_t fill = live.publish_fill(ctx.config().verify);
  const uint64_t layout = live.table.layout_hash(live.plan.threshold());
  feed(Prepared{a.op, layout, live.descriptor(ctx.worker().address(), fill), fill});
}

// A transfer would make a new fill; its descriptor (served as a partial source meanwhile)
// promises it. Nothing changes in the buffers until the grant.
void Model::Core::act(const PrepareFill& a) {
  try {
    freeze();
  } catch (const Error& e) {
    return feed(PrepareFailed{a.op, e.code(), e.what()});
  }
  uint32_t fill = next_fill_epoch();
  const uint64_t layout = live.table.layout_hash(live.plan.threshold());
  feed(Prepared{a.op, layout, live.descriptor(ctx.worker().address(), fill), fill});
}

void Model::Core::act(const InvalidateHolding&) {
  live.withdraw();
}

void Model::Core::act(const BeginFill& a) {
  // The grant: our buffers are overwritten from now on. (InvalidateHolding came first.)
  live.begin_fill(a.fill);
}

void Model::Core::act(const BeginTransfer& a) {
  // Staging of our previous holding (an update in place) stops at its next slice, having
  // seen the counter invalidated; the transfer overwrites what it packs, so it waits.
  if (staging) {
    auto self = shared_from_this();
    return when_staging_stopped([self, a] { self->act(a); });
  }
  const auto& cfg = ctx.config();
  Descriptor src;
  try {
    src = decode_descriptor(a.source_descriptor);
  } catch (const Error& e) {
    // The source's own word is garbage: the source has failed (the registry hears of it and
    // gives another holder), not our transfer.
    return feed(TransferEnded{a.transfer, Code::kTransport, true, a.start, e.what()});
  }
  if (std::string mismatch = live.mismatch(src); !mismatch.empty()) {
    return feed(TransferEnded{a.transfer, Code::kLayout, false, a.start, mismatch});
  }
  TransferSpec ts;
  ts.local = &live.stream;
  ts.late = late_reads;
  ts.source_partial = a.source_partial || src.staged;  // a staged publisher's counter leads
  ts.source_may_lag = a.source_partial;
  ts.source = std::move(src);
  ts.start = a.start;
  if (live.epoch() != a.fill) {
    return feed(TransferEnded{a.transfer, Code::kInternal, false, a.start, "the transfer's fill was not begun"});
  }
  ts.fill = live.fill_writer();
  ts.verify = cfg.verify;
  ts.parked_reads = cfg.parked_reads;
  // Parked reads inside a datacenter bring the counter with every chunk and the next hop
  // forwards each one as it lands: a complete source is read in the hops' chunks too, so
  // that the first hop starts as early as the others (a TCP stream costs nothing per chunk).
  ts.parked_chunk_size = std::min(cfg.chunk_size, cfg.pipeline_chunk_size);
  // A reader of a partial source can ask only for what its source holds, and the next hop
  // of the chain only for what this one holds: smaller chunks there shorten every hop's lag.
  ts.chunk_size = a.source_partial ? std::min(cfg.chunk_size, cfg.pipeline_chunk_size) : cfg.chunk_size;
  ts.max_inflight = cfg.max_inflight;
  ts.stall_timeout_us = cfg.stall_timeout_ms * 1000;
  std::weak_ptr<Core> weak = weak_from_this();
  ts.where = [weak](uint64_t off) {
    auto self = weak.lock();
    return self ? self->live.where(off) : std::string("?");
  };
  // Copy out what has arrived and been checked (the compact segment: unpack; copy mode:
  // everything) on the copy engine while the gets of the rest go on; the end of the transfer
  // is reported once the copy engine has caught up (it runs its work in order).
  auto d = std::make_shared<Delivery>();
  d->need = live.staged_bytes();
  d->delivered.store(std::min(a.start, d->need), std::memory_order_relaxed);
  Executor& copier = ctx.copier();
  Executor& engine = ctx.engine();
  const uint64_t transfer = a.transfer;
  // The registry hears of our progress now and then (progress_report_ms): a read that makes
  // none is ended there (lease_progress_timeout_ms), one that does is not.
  const int64_t report_us = cfg.progress_report_ms * 1000;
  d->reported_at = now_us();
  auto on_advance = [weak, d, &copier, &engine, transfer, report_us](uint64_t held, transport::ReadPath path) {
    if (const int64_t now = now_us(); now - d->reported_at >= report_us) {
      d->reported_at = now;
      engine.post([weak, transfer, held, path] {
        if (auto self = weak.lock()) self->feed(TransferProgressed{transfer, held, transport::read_path_name(path)});
      });
    }
    if (held <= d->delivered.load(std::memory_order_relaxed)) return;
    copier.post([weak, d, held] {
      auto self = weak.lock();
      if (!self || !d->error.empty()) return;
      uint64_t upto = std::min(held, d->need);
      const uint64_t from = d->delivered.load(std::memory_order_relaxed);
      if (upto <= from) return;
      int64_t t0 = now_us();
      try {
        self->live.deliver(from, upto, d->copier);
      } catch (const Error& e) {
        d->error = e.what();
      }
      d->delivered.store(upto, std::memory_order_relaxed);
      d->unpack_us += now_us() - t0;
    });
  };
  auto on_done = [weak, d, &copier, &engine, transfer](TransferResult r) {
    copier.post([weak, d, &engine, transfer, r = std::move(r)]() mutable {
      if (r.code == Code::kSuccess) {
        int64_t t0 = now_us();
        try {
          d->copier.finish();
        } catch (const Error& e) {
          if (d->error.empty()) d->error = e.what();
        }
        d->unpack_us += now_us() - t0;
        if (!d->error.empty()) {
          r.code = Code::kTransport;
          r.error = "copying out to the tensors: " + d->error;
          r.source_failed = false;
        }
      }
      engine.post([weak, d, transfer, r = std::move(r)] {
        auto self = weak.lock();
        if (!self) return;
        self->counter_reads = r.stats.counter_reads;
        self->gets = r.stats.gets;
        uint64_t read = 0;
        for (size_t p = 0; p < transport::kReadPathCount; ++p) {
          self->path_bytes[p] = r.stats.path_bytes[p];
          read += r.stats.path_bytes[p];
        }
        self->source_across = r.stats.across ? 1 : 0;
        if (r.stats.across) self->wan_bytes += read;
        self->unpack_us = static_cast<uint64_t>(d->unpack_us);
        self->feed(TransferEnded{transfer, r.code, r.source_failed, r.held, r.error});
      });
    });
  };
  start_transfer(ctx.worker(), std::move(ts), std::move(on_advance), std::move(on_done));
}

// Retention: copy the buffers (they still hold the version: the registry asked while our
// unpublish waits) to host memory, on the copy engine.
void Model::Core::act(const MakeHostCopy& a) {
  std::weak_ptr<Core> weak = weak_from_this();
  Executor& engine = ctx.engine();
  ctx.copier().post([weak, &engine, v = a.version] {
    auto self = weak.lock();
    if (!self) return;
    std::shared_ptr<Holding> copy;
    std::string desc, err;
    try {
      copy = self->live.copy_to_host(self->ctx.worker(), v);
      desc = copy->descriptor(self->ctx.worker().address(), copy->epoch());
    } catch (const Error& e) {
      err = e.what();
      self->ctx.set_last_error("retention offload of version " + std::to_string(v) + " failed: " + err);
    }
    engine.post([weak, v, copy, desc, err] {
      auto self = weak.lock();
      if (!self) return;
      if (copy) self->offloaded[v] = copy;
      self->feed(HostCopyMade{v, copy != nullptr, desc, err});
    });
  });
}

void Model::Core::act(const DropHostCopy& a) {
  if (a.version < 0) {
    offloaded.clear();
  } else {
    offloaded.erase(a.version);
  }
}

void Model::Core::act(const CompleteOp& a) {
  publish_stats();  // the caller may read them as soon as the request completes
  auto it = requests.find(a.op);
  if (it == requests.end()) return;
  std::shared_ptr<Request> r = it->second;
  requests.erase(it);
  if (a.code != Code::kSuccess && a.code != Code::kNotUpdated) {
    const MemberIdentity& id = machine.identity();
    std::string where = id.model + "/" + id.replica + "/shard " + std::to_string(id.shard);
    std::string detail = a.detail;
    if (a.code == Code::kLayout && frozen && detail.find("compaction_threshold") == std::string::npos) {
      // The registry compares one hash: say what goes into ours.
      detail += " (this replica: " + std::to_string(live.table.tensors().size()) + " tensors, " +
                std::to_string(live.table.total_bytes()) + " bytes, compaction_threshold=" +
                std::to_string(live.plan.threshold()) +
                "; the layout is the tensor names, sizes and order and the compaction_threshold)";
    }
    // The detail first: the caller reads it as soon as the request completes.
    ctx.set_last_error(std::string(code_name(static_cast<int>(a.code))) + ": " + where + ": " + detail);
    r->complete(a.code, a.version, where + ": " + detail);
  }
  // A publish that the registry took starts the staging behind it (packing, checksums).
  if (r->kind() == Request::Kind::kPublish && a.code == Code::kSuccess && live.staged()) {
    stage(live.epoch(), ctx.config().verify);
  }
  // Once an unpublish or close returns, the user may overwrite the tensors: the staging that
  // reads them must have stopped (it has seen the counter invalidated).
  auto done = [r, a] { r->complete(a.code, a.version, a.detail); };
  if ((r->kind() == Request::Kind::kUnpublish || r->kind() == Request::Kind::kClose) && staging) {
    return when_staging_stopped(done);
  }
  done();
}

void Model::Core::when_staging_stopped(std::function<void()> fn) { after_staging.push_back(std::move(fn)); }

// In stream order, slice by slice on the copy engine: pack (the compact segment; copy mode:
// everything), hash (verify), then move the counter (data and hashes first, then the
// counter), so that readers start at once. A counter invalidated meanwhile (an unpublish, an
// update in place) stops it at the next slice.
void Model::Core::stage(uint32_t fill, bool hash) {
  staging = true;
  std::weak_ptr<Core> weak = weak_from_this();
  Executor& engine = ctx.engine();
  ctx.copier().post([weak, &engine, fill, hash] {
    auto self = weak.lock();
    if (!self) return;
    Holding& live = self->live;
    int64_t t0 = now_us();
    try {
      TensorCopier c;
      const uint64_t total = live.plan.total_bytes();
      const uint64_t staged = live.staged_bytes();
      for (uint64_t off = 0; off < total;) {
        // Without checksums nothing is done past the staged bytes: one step to the end.
        uint64_t end = off < staged ? std::min(staged, off + kStageSlice) : total;
        if (hash) end = std::min(total, off + kStageSlice);
        if (!live.stage_slice(fill, off, end, hash, c)) break;  // withdrawn: the buffers change hands
        off = end;
        // Between slices (~0.25 ms of hashing each) the core goes to whoever waits for it:
        // the publish this staging follows completes meanwhile, and on a busy host the
        // scheduler's time slice (~3 ms) made it wait for the core the hashing held.
        std::this_thread::yield();
      }
    } catch (const std::exception& e) {
      // Readers see the counter stop and fail over (stall watchdog); say why here.
      self->ctx.set_last_error(std::string("staging the published tensors failed: ") + e.what());
    }
    self->pack_us = static_cast<uint64_t>(now_us() - t0);
    engine.post([weak] {
      auto self = weak.lock();
      if (!self) return;
      self->staging = false;
      auto fns = std::move(self->after_staging);
      self->after_staging.clear();
      for (auto& fn : fns) fn();
    });
  });
}

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
