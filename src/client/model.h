// One THUB_Model: this process's shard of one replica of one model, and the
// reference-oriented operations on it (publish / replicate / update / unpublish), retention
// offload copies, and re-registration after a registry failover.
#pragma once

#include <atomic>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "src/client/holding.h"
#include "src/client/transfer.h"
#include "src/common/info.h"
#include "sched/types.h"

namespace thub::client {

class Context;

struct ModelStats {  // written by the operation's thread, read by any
  std::atomic<uint64_t> replications{0};
  std::atomic<uint64_t> partial_sources{0};  // grants whose source was still receiving
  std::atomic<uint64_t> source_failures{0};  // sources that failed mid-transfer (resumed elsewhere)
  std::atomic<uint64_t> counter_reads{0};    // the last transfer's remote counter reads
  std::atomic<uint64_t> gets{0};             // the last transfer's RMA gets
  std::atomic<uint64_t> offloads{0};         // retention copies made
  std::atomic<uint64_t> republished{0};      // re-publications after a registry failover
  std::atomic<uint64_t> compact_bytes{0};    // size of the compact segment (tiny tensors)
  std::atomic<uint64_t> compacted_tensors{0};
  std::atomic<uint64_t> copy_mode{0};        // 1: served through a staging buffer (copy mode)
  std::atomic<uint64_t> pack_us{0};          // the last publish's staging (pack / copy) time
  std::atomic<uint64_t> unpack_us{0};        // the last transfer's unpack / copy-out time
};

class Model {
 public:
  Model(Context& ctx, const std::string& model, const std::string& replica, int shard, int num_shards,
        const InfoMap& info);  // throws Error
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  void register_tensor(const std::string& name, void* addr, uint64_t bytes, int memtype);
  void publish(int64_t version);
  int64_t replicate(int64_t spec);
  // Returns kSuccess or kNotUpdated; *got is the version held afterwards.
  Code update(int64_t spec, int64_t* got);
  void unpublish();
  void close();

  // Registry orders (called on the connection's helper threads).
  void offload(uint64_t member, int64_t version);
  void discard(int64_t version);
  // The registry was replaced: open again and re-publish what we hold.
  void reregister();

  // THUB_Model_stat: thread-safe reads of the counters; false for an unknown key.
  bool stat(const std::string& key, int64_t* value) const;

 private:
  void open_member();
  // After a registry failover: open again and re-publish what we hold (op_mu_ held).
  void ensure_registered();
  // A request built from the current member id; if the registry was replaced meanwhile,
  // re-register and ask the new one once more.
  sched::Reply ask(const std::function<sched::Event()>& make);
  void freeze();  // register memory on first publish/replicate
  void publish_locked(int64_t version);
  void stage_async(uint32_t fill, bool hash);  // pack/stage/hash behind publish, advancing the counter
  void finish_staging();  // wait for that thread (before the stream or tensors change hands)
  void unpublish_locked();
  int64_t transfer(int64_t spec, int64_t newer_than, bool* not_updated);
  [[noreturn]] void raise(int status, const std::string& what, const std::string& detail) const;

  Context& ctx_;
  std::string model_, replica_;
  int shard_, num_shards_;
  int retain_ = 0;
  bool spot_ = false;
  std::mutex op_mu_;  // one operation at a time (also against failover re-registration)
  std::atomic<uint64_t> member_{0};
  uint64_t gen_ = 0;  // the registry connection's generation that member_ belongs to
  bool frozen_ = false;
  bool published_ = false;  // the registry counts us as a holder of held_
  std::atomic<int64_t> held_{-1};
  Holding live_;            // the user's tensors
  std::mutex offload_mu_;
  std::map<int64_t, std::unique_ptr<Holding>> offloaded_;  // retention copies by version
  ModelStats stats_;
  std::thread stager_;
};

}  // namespace thub::client
