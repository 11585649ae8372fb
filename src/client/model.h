// One THUB_Model: this process's shard of one replica of one model. Its decisions are a
// MemberMachine (member_machine.h); this class only carries them out: it keeps the tensors
// and their Holding (holding.h: the stream, its registrations, counter and checksums), sends
// the machine's registry requests, runs its transfers, packs and copies on the context's copy
// engine, and completes its requests. Every operation is a Request (request.h) advanced by
// the context's engine; blocking calls start one and wait for it.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "src/client/member_machine.h"
#include "src/client/request.h"
#include "src/common/info.h"
#include "src/common/stat_keys.h"

namespace thub::client {

class Context;

class Model {
 public:
  // Opens the member at the registry (waits for it). Throws Error. `seed_buffer`: the member is
  // another model's seed buffer (offload seeding, below), never the user's.
  Model(Context& ctx, const std::string& model, const std::string& replica, int shard, int num_shards,
        const InfoMap& info, bool seed_buffer = false);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  void register_tensor(const std::string& name, void* addr, uint64_t bytes, int memtype);  // throws Error
  // The operations: each returns its request at once (errors found before it starts, such as
  // a bad version, complete it at once too).
  std::shared_ptr<Request> publish(int64_t version);
  std::shared_ptr<Request> replicate(int64_t spec, bool update);
  std::shared_ptr<Request> unpublish();
  std::shared_ptr<Request> close();
  // THUB_Cancel: the request ends as THUB_ERR_CANCELED if it has not taken effect yet.
  void cancel(const Request& r);

  // Registry events for this model (the context's engine calls these).
  void on_registry(const MachineEvent& ev);

  // THUB_Model_stat: thread-safe reads of the counters (src/common/stat_keys.h).
  [[nodiscard]] int64_t stat(StatKey key) const;

  struct Core;

 private:
  std::shared_ptr<Core> core_;
  // Offload seeding (issue 22 item 3; context key offload_seeding > 0): a member of replica
  // "<replica>~seed" over host memory of this shard's layout, made at the first relative
  // update. Each relative update first asks it to update seed-only: where its datacenter
  // has the newest version nowhere and nothing older on its way, it fetches the version
  // across in the background (the seeder), while this update returns THUB_NOT_UPDATED
  // (smart skipping: the version is on its way); a later update reads it from the seed
  // buffer inside the datacenter.
  struct Seed;
  std::unique_ptr<Seed> seed_;
  void start_seed(int64_t spec);
  void stop_seed();
};

}  // namespace thub::client
