// One THUB_Model: this process's shard of one replica of one model, and the
// reference-oriented operations on it (publish / replicate / update / unpublish).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/client/layout.h"
#include "src/client/transfer.h"
#include "src/common/info.h"

namespace thub::transport {
class MemoryRegion;
}

namespace thub::client {

class Context;

struct ModelStats {               // written by the operation's thread, read by any
  std::atomic<uint64_t> replications{0};
  std::atomic<uint64_t> partial_sources{0};  // grants whose source was still receiving
  std::atomic<uint64_t> source_failures{0};  // sources that failed mid-transfer (resumed elsewhere)
  std::atomic<uint64_t> counter_reads{0};    // the last transfer's remote counter reads
  std::atomic<uint64_t> gets{0};             // the last transfer's RMA gets
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

  [[nodiscard]] int64_t held_version() const { return held_; }
  // THUB_Model_stat: thread-safe reads of the counters; false for an unknown key.
  bool stat(const std::string& key, int64_t* value) const;
  [[nodiscard]] Context& context() { return ctx_; }
  [[nodiscard]] const std::string& name() const { return model_; }

 private:
  void freeze();                          // register memory on first publish/replicate
  std::string descriptor() const;
  int64_t transfer(int64_t spec, int64_t newer_than, bool* not_updated);
  [[noreturn]] void raise(int status, const std::string& what, const std::string& detail) const;

  Context& ctx_;
  std::string model_, replica_;
  int shard_, num_shards_;
  uint64_t member_ = 0;
  TensorTable table_;
  bool frozen_ = false;
  bool published_ = false;   // the registry counts us as a holder of held_
  std::atomic<int64_t> held_{-1};
  std::vector<std::unique_ptr<transport::MemoryRegion>> regions_;  // per tensor (null: 0 bytes)
  std::unique_ptr<std::atomic<uint64_t>> counter_;
  std::unique_ptr<transport::MemoryRegion> counter_region_;
  std::vector<uint64_t> hashes_;  // [0] = 1 when valid, then one hash per kHashBlock
  std::unique_ptr<transport::MemoryRegion> hash_region_;
  ModelStats stats_;
};

}  // namespace thub::client
