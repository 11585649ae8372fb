// Model::Core: everything the engine touches for one model (src/client/model.h is the
// user's side). Private to model.cc (the user's side) and model_core.cc (the engine's).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "src/client/context.h"
#include "src/client/holding.h"
#include "src/client/member_machine.h"
#include "src/client/model.h"
#include "src/client/request.h"
#include "src/client/tensor_copy.h"
#include "src/client/transfer.h"
#include "src/transport/read_paths.h"

namespace thub::client {

namespace model_detail {
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

inline int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace model_detail

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

}  // namespace thub::client
