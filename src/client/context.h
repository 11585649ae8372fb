// One THUB_Context: configuration from info keys, the data plane (a transport::Worker),
// the registry connection, the embedded registry when none is given, and the two executors
// every model of the context shares: the engine (decisions, registry messages, request
// completions) and the copy engine (packing, checksums, copy-out, retention copies).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "src/client/executor.h"
#include "src/client/member_machine.h"
#include "src/common/info.h"

namespace thub::transport {
class MemoryRegion;
class Worker;
}
namespace thub::topo {
class Topology;
}
namespace thub::registry {
class Connection;
struct ConnectionOptions;
class Server;
struct ServerOptions;
}

namespace thub::client {

// What the info keys of THUB_Init say; their defaults and ranges are the table's
// (src/common/info_keys.h), so none is repeated here.
struct ContextConfig {
  std::string registry;  // "" = embedded
  std::string datacenter;
  std::string auth_token;  // from auth_token or auth_token_file
  bool auth_mutual = true;
  bool verify = false;
  uint64_t chunk_size = 0;
  uint64_t pipeline_chunk_size = 0;  // chunk when the source is partial (a chain hop)
  bool parked_reads = true;          // socket reads park at the source and bring its counter
  int max_inflight = 0;
  int64_t timeout_ms = 0;
  int heartbeat_ms = 0;
  int reconnect_ms = 0;                 // after losing the registry, try the list this long
  int registry_probe_ms = 0;            // on a backup, ask the earlier addresses this often
  int registry_timeout_ms = 0;          // a registry silent this long is lost (failover); 0: never
  int registry_connect_timeout_ms = 0;  // per address: connect and HELLO
  int registry_request_timeout_ms = 0;  // requests answered at once, unless timeout_ms is set
  int64_t stall_timeout_ms = 0;         // a source with no progress this long has failed
  int64_t progress_report_ms = 0;       // a reader's progress goes to the registry this often at most
  std::string net_devices;              // UCX_NET_DEVICES (default: from topo/, nearest `device`)
  std::string device;                   // where the tensors live: auto, host, numa:N, cuda:N
  std::string tls;                      // UCX_TLS
  int64_t progress_spin_us = 0;         // progress thread spin window after an event
  uint64_t offload_seeding = 0;         // offload seeding's host memory per shard (0: off)
  uint64_t compaction_threshold = 0;    // tensors below it travel packed (0: never); part of the layout
  std::string topology_xml;             // a recorded hwloc topology for NIC choice ("" : this machine)
  // auto: direct for host memory, copy for CUDA memory this UCX cannot register;
  // direct: zero-copy gets of the tensors; copy: staged through registered host memory;
  // tcp: direct over TCP only (UCX_TLS=tcp,self unless tls/UCX_TLS is set): every peer is read
  // over the transport's socket reads, and UCX keeps only its self transport (worker.cc).
  enum class TransferMode { kAuto, kDirect, kCopy, kTcp };
  TransferMode transfer_mode = TransferMode::kAuto;
  std::string wan_transport = "socket";  // sources in another datacenter (transport::parse_wan)
  // The embedded registry's settings (the registry's keys), used when `registry` is empty.
  std::shared_ptr<const registry::ServerOptions> embedded_registry;

  static ContextConfig from_info(const InfoMap& info);  // throws Error(kArg)
  // How this context (or a tool speaking for it: tensorhub-info) connects to `addresses`:
  // authentication, deadlines, heartbeats.
  [[nodiscard]] registry::ConnectionOptions connection_options(std::vector<std::string> addresses) const;
};

// UCX_NET_DEVICES for a context of `cfg` on `t`: its net_devices if given, else the NICs
// nearest to where its tensors live (`device`; auto: the NUMA node `current_numa`), up ports
// only (topo/). `why` says what it chose and from what.
std::string nic_choice(const ContextConfig& cfg, const topo::Topology& t, int current_numa, std::string* why);

class Context {
 public:
  explicit Context(const InfoMap& info);  // throws Error
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  [[nodiscard]] const ContextConfig& config() const { return cfg_; }
  [[nodiscard]] transport::Worker& worker() { return *worker_; }
  // What UCX was given as UCX_NET_DEVICES ("" : UCX chooses) and why (nic_choice()).
  [[nodiscard]] const std::string& net_devices() const { return net_devices_; }
  [[nodiscard]] const std::string& net_choice() const { return net_choice_; }
  [[nodiscard]] registry::Connection& registry() { return *conn_; }
  [[nodiscard]] std::string registry_address() const;

  // THUB_Alloc_mem: host memory allocated and registered through UCX (shared memory that
  // readers on this host map and copy from themselves), kept until free_mem or the context
  // goes. free_mem refuses memory a model still serves (kState) or that did not come from
  // alloc_mem (kArg).
  void* alloc_mem(size_t bytes);
  void free_mem(void* base);
  // The allocation holding [p, p + n), or null: models register tensors there with it.
  [[nodiscard]] std::shared_ptr<transport::MemoryRegion> find_allocation(const void* p, uint64_t n) const;

  void set_last_error(const std::string& s);
  [[nodiscard]] std::string last_error() const;

  [[nodiscard]] Executor& engine() { return *engine_; }
  [[nodiscard]] Executor& copier() { return *copier_; }

  // Models listen for registry orders (retention) and connection changes (failover): the
  // engine hands each event to every model attached.
  void attach(const std::shared_ptr<RegistryListener>& m);
  void detach(const RegistryListener* m);
  // On the engine: why every registry is gone (kGone, not yet followed by kBack), or null
  // while one answers or reconnection is under way. A model opened now starts from it.
  [[nodiscard]] const std::string* registry_gone() const { return registry_gone_ ? &*registry_gone_ : nullptr; }

 private:
  ContextConfig cfg_;
  std::unique_ptr<registry::Server> server_;
  std::string net_devices_, net_choice_;
  std::unique_ptr<transport::Worker> worker_;
  std::unique_ptr<registry::Connection> conn_;
  mutable std::mutex mu_;
  std::string last_error_;
  std::vector<std::weak_ptr<RegistryListener>> models_;
  std::map<uintptr_t, std::shared_ptr<transport::MemoryRegion>> allocations_;  // by base address
  std::unique_ptr<Executor> engine_;
  std::unique_ptr<Executor> copier_;
  std::optional<std::string> registry_gone_;  // on the engine
  void dispatch(const MachineEvent& ev);  // on the engine
};

}  // namespace thub::client
