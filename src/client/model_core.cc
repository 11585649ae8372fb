// The engine's side of a model (Model::Core, src/client/model_core.h): the member machine's
// actions carried out, staging behind publish, the transfers and their copy-out.
#include "src/client/model_core.h"

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

using namespace model_detail;

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
}  // namespace thub::client
