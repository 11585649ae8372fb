// A read-only view of the registry's state for introspection (tensorhub-info --registry):
// models, versions, holders per shard, transfers in flight and retention. Registry::snapshot
// builds it and changes nothing. Plain values only: no sockets, threads or clocks (times are
// the registry's own microseconds, as in types.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sched/types.h"

namespace thub::sched {

// What one holder has of one version. Numbers are on the wire (docs/protocol.md, INFO).
enum class Holding : uint8_t {
  kComplete = 0,     // holds the version in its buffers and serves it
  kPartial = 1,      // receiving it; with pipelining, already serves the part it holds
  kDraining = 2,     // unpublished, updated away or reported failed: hidden, readers finishing
  kOffloading = 3,   // retention: copying to host memory before its unpublish completes
  kHostCopy = 4,     // retention: serves the version from a host-memory copy
  kHostDropping = 5, // a host copy out of the retained window: freed once its readers finish
};
constexpr uint8_t kHoldingCount = 6;
const char* holding_name(Holding h);

// Caps on what one snapshot lists; everything beyond is counted (the *_total fields) and the
// snapshot is marked truncated. They bound the registry's work for one request.
struct SnapshotLimits {
  uint32_t max_models = 10000;
  uint32_t max_holders = 100000;
  uint32_t max_transfers = 100000;
};

struct ModelView {
  std::string name;
  int retain = 0;                    // the largest `retain` of its open members (0: none)
  uint64_t versions_published = 0;   // versions published since this registry started
  Version latest = -1;               // the newest published (-1: none)
  std::vector<Version> retained;     // the versions retention keeps available, newest first
  uint32_t members = 0;              // open members (shards of replicas), holding or not
};

struct HolderView {
  uint32_t model = 0;                // index into Snapshot::models
  Version version = -1;
  int shard = 0, num_shards = 1;
  std::string replica;
  MemberId member = 0;
  ClientId client = 0;
  Holding state = Holding::kComplete;
  bool spot = false;
  int load = 0;                      // readers now (and transaction slots reserved on it)
  // kPartial only. The registry does not follow transfers (the bytes move between peers); it
  // knows what the reader held when it last said so: 0 when the read was first granted, the
  // resume point of a SOURCE_FAILED since. A lower bound as of `reported_at`, not a live
  // figure (that is in the holder's progress counter).
  uint64_t bytes_reported = 0;
  Time reported_at = 0;
};

// One read in flight (a lease): `reader` gets `version` from `source`.
struct TransferView {
  LeaseId lease = 0;
  uint32_t model = kNoModel;         // index into Snapshot::models (kNoModel: both ends gone,
                                     // or its model was left out)
  Version version = -1;
  MemberId source = 0, reader = 0;
  std::string source_replica, reader_replica;  // "" when that member is gone
  int source_shard = -1, reader_shard = -1;    // -1 when that member is gone
  bool from_host_copy = false;       // reads the source's retention copy
  bool source_partial = false;       // the source is itself still receiving (pipeline)
  bool orphan = false;               // the reader was dropped for silence; ends at its deadline
  std::string path;                  // the read path the reader reported ("" none yet)
  Time granted_at = 0;
  uint64_t bytes_reported = 0;       // the reader's, as in HolderView
  Time reported_at = 0;

  static constexpr uint32_t kNoModel = 0xffffffffu;
};

struct Snapshot {
  Time now = 0;                      // the registry's clock when it was taken
  uint64_t clients = 0, members = 0, leases = 0, waiting = 0;  // waiting: deferred requests
  uint64_t models_total = 0, holders_total = 0, transfers_total = 0;
  std::vector<ModelView> models;     // by name
  std::vector<HolderView> holders;   // by model, version (newest first), shard, replica
  std::vector<TransferView> transfers;  // by lease
  bool truncated = false;            // something was left out (the *_total say how much)
};

}  // namespace thub::sched
