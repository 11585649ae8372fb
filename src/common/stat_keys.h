// The keys of THUB_Model_stat, in one table: name and meaning. It drives the lookup in the
// library (src/client/model.cc answers each key), the error for an unknown key (naming the
// nearest one) and the list in the public header (generated: tools/vocabulary/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace thub {

struct StatKeySpec {
  const char* name;
  const char* doc;  // one line
};

inline constexpr StatKeySpec kStatKeys[] = {
    {"held_version", "the version this shard holds, -1 when none"},
    {"bytes_held",
     "bytes of the current or last transfer this shard holds (its progress counter, live during a transfer)"},
    {"total_bytes", "size of the shard (every registered tensor)"},
    {"replications", "completed replicates and updates"},
    {"partial_sources", "grants whose source was itself still receiving (pipeline replication)"},
    {"source_failures", "sources that failed mid-transfer and were replaced"},
    {"counter_reads", "remote progress-counter reads in the last transfer"},
    {"gets", "RMA gets in the last transfer"},
    {"offloads", "retention copies made in host memory (retain)"},
    {"republished", "holdings published again to a new registry after a failover"},
    {"compact_bytes", "bytes of the packed tiny tensors (compaction_threshold)"},
    {"compacted_tensors", "tensors packed because they are below compaction_threshold"},
    {"copy_mode", "1 when the shard is served through a staging copy, else 0"},
    {"copy_mode_reason",
     "why it is: 0 not, 1 transfer_mode=copy, 2 auto with CUDA tensors this UCX cannot move, 3 auto with CUDA "
     "tensors and verify=true"},
    {"registrations",
     "memory regions this shard serves its stream from (tensors back to back in host memory share one)"},
    {"pack_us", "time spent packing (and staging) at the last publish, in us"},
    {"unpack_us", "time spent copying out the last transfer to the tensors, in us"},
    {"bytes_ucx_get", "bytes of the last transfer read with UCX gets (ucp_get_nbx)"},
    {"bytes_socket", "bytes of the last transfer read over the transport's own sockets (TCP)"},
    {"bytes_process_vm_readv", "bytes of the last transfer read from a same-host source with process_vm_readv"},
    {"bytes_ucx_mapped", "bytes of the last transfer copied from a same-host source's UCX shared-memory segment"},
    {"source_across",
     "1 when the last transfer's source was in another datacenter (read over wan_transport), 0 when inside, -1 "
     "before any transfer"},
    {"wan_bytes", "bytes read from sources in other datacenters, all transfers of this shard"},
    {"offload_seed_bytes", "host memory of this shard's seed buffer (offload_seeding), 0 when it has none"},
    {"offload_seed_version", "the version this shard's seed buffer holds (whole or arriving), -1 when none"},
    {"offload_seeds", "versions this shard's seed buffer fetched across datacenters (offload_seeding)"},
    {"repoints",
     "tensors pointed at new memory after the first publish or replicate (copy mode: THUB_Register of a "
     "registered name); nothing is registered again"},
};
inline constexpr size_t kStatKeyCount = sizeof kStatKeys / sizeof kStatKeys[0];

// A key, as an index into kStatKeys; stat_key("name") at compile time (a name that is not
// in the table does not compile where a constant is needed, e.g. a case label).
enum class StatKey : uint8_t {};

constexpr StatKey stat_key(std::string_view name) {
  for (size_t i = 0; i < kStatKeyCount; ++i) {
    if (name == kStatKeys[i].name) return static_cast<StatKey>(i);
  }
  throw "not a stat key of the table (src/common/stat_keys.h)";
}

// The key named `name`; Error(kArg) naming the nearest known key for an unknown one.
StatKey find_stat_key(std::string_view name);

}  // namespace thub
