// The pipelined transfer executor: reads a source replica-shard's stream into ours with
// chunked one-sided gets, on the progress thread. A partial source (still receiving) is
// followed through its progress counter: read the counter, fetch the ready prefix, re-read
// with back-off. Every source's counter is also read after the bytes land (a seqlock, see
// progress_counter.h): bytes count as held only when a counter read issued after they
// landed still shows the source's fill. Our own counter advances over those bytes, so that
// we in turn serve others while we receive, and never pass on what we have not checked.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "src/client/descriptor.h"
#include "src/client/layout.h"
#include "src/client/holding.h"
#include "src/client/progress_counter.h"
#include "src/client/stream.h"
#include "src/common/status.h"
#include "src/transport/worker.h"

namespace thub::client {

// Reads given up into one holding's buffers that may still land. A source on this host that
// stopped answering cannot have its gets canceled (UCX 1.13 has no peer failure handling over
// shared memory): when it resumes, UCX writes its replies into our buffers, whatever version
// they hold by then. (Only on UCX's path: process reads, the default on one host, are
// synchronous, and cancelling drops those still queued, so they never wait here.) So the next transfer into the same buffers waits until those reads have
// landed or their source has exited (docs/faults.md). One per holding, used on the progress
// thread only.
struct LateReads;
std::shared_ptr<LateReads> make_late_reads();

struct TransferSpec {
  const Stream* local = nullptr;            // where our stream lives (segments)
  std::shared_ptr<LateReads> late;          // reads given up into these buffers (may be null)
  Descriptor source;
  bool source_partial = false;              // follow the source's counter for what is ready
  bool source_may_lag = false;              // its counter may still show an earlier fill at first
  uint64_t start = 0;                       // resume point (bytes of the stream we hold, checked)
  FillWriter fill;                          // what peers see of our holding: shown as checked
  bool verify = false;
  bool parked_reads = true;                 // where the path can: chunk reads park and bring the counter
  uint64_t parked_chunk_size = 0;           // their chunk from a source in this datacenter (0: chunk_size)
  uint64_t chunk_size = 4u << 20;
  int max_inflight = 16;
  int64_t stall_timeout_us = 10'000'000;    // no progress this long: the source failed
  std::function<std::string(uint64_t)> where;  // names the tensor at a stream offset
};

struct TransferStats {
  uint64_t counter_reads = 0;   // remote progress-counter reads (pipeline replication)
  uint64_t gets = 0;
  uint64_t bytes = 0;
  uint64_t path_bytes[transport::kReadPathCount] = {};  // bytes read over each read path
  bool across = false;          // the source is in another datacenter (read over wan_transport)
};

struct TransferResult {
  Code code = Code::kSuccess;
  std::string error;
  bool source_failed = false;   // the source (not our data) is at fault: ask for another
  uint64_t held = 0;            // contiguous bytes we now hold, checked against the source's counter
  TransferStats stats;
};

// Starts the transfer on the worker's progress thread. `on_advance(held, path)` runs there
// each time the bytes held and checked grow (copy-out may follow them), with the read path of
// the latest read; `on_done` runs there once, at the end (after the last on_advance).
using AdvanceFn = std::function<void(uint64_t held, transport::ReadPath path)>;
void start_transfer(transport::Worker& worker, TransferSpec spec, AdvanceFn on_advance,
                    std::function<void(TransferResult)> on_done);

}  // namespace thub::client
