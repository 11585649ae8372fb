#include "src/client/context.h"

#include <algorithm>
#include <iterator>
#include <sstream>
#include <vector>

#include "src/common/status.h"
#include "src/registry/auth.h"
#include "src/registry/connection.h"
#include "src/registry/etcd.h"
#include "src/registry/server.h"
#include "src/registry/socket.h"
#include "src/transport/worker.h"
#include "topo/device.h"
#include "topo/topology.h"

namespace thub::client {

ContextConfig ContextConfig::from_info(const InfoMap& info) {
  // Types, defaults and ranges come from the table (src/common/info_keys.h).
  ContextConfig c;
  c.registry = info.get<info_key("registry")>();
  c.datacenter = info.get<info_key("datacenter")>();
  if (c.datacenter.empty()) throw Error(Code::kArg, "info key 'datacenter' must not be empty");
  c.auth_token = registry::token_from(info.get<info_key("auth_token")>(), info.get<info_key("auth_token_file")>());
  c.auth_mutual = info.get<info_key("auth_mutual")>();
  c.verify = info.get<info_key("verify")>();
  c.chunk_size = info.get<info_key("chunk_size")>();
  c.pipeline_chunk_size = info.get<info_key("pipeline_chunk_size")>();
  c.parked_reads = info.get<info_key("parked_reads")>();
  c.max_inflight = static_cast<int>(info.get<info_key("max_inflight")>());
  c.timeout_ms = info.get<info_key("timeout_ms")>();
  c.heartbeat_ms = static_cast<int>(info.get<info_key("heartbeat_ms")>());
  c.reconnect_ms = static_cast<int>(info.get<info_key("reconnect_ms")>());
  c.registry_probe_ms = static_cast<int>(info.get<info_key("registry_probe_ms")>());
  c.registry_timeout_ms = static_cast<int>(info.get<info_key("registry_timeout_ms")>());
  c.registry_connect_timeout_ms = static_cast<int>(info.get<info_key("registry_connect_timeout_ms")>());
  c.registry_request_timeout_ms = static_cast<int>(info.get<info_key("registry_request_timeout_ms")>());
  c.stall_timeout_ms = info.get<info_key("stall_timeout_ms")>();
  c.progress_report_ms = info.get<info_key("progress_report_ms")>();
  c.net_devices = info.get<info_key("net_devices")>();
  c.device = info.get<info_key("device")>();
  if (std::string why; !topo::parse_device(c.device, &why)) throw Error(Code::kArg, "info key 'device': " + why);
  c.tls = info.get<info_key("tls")>();
  c.progress_spin_us = info.get<info_key("progress_spin_us")>();
  c.compaction_threshold = info.get<info_key("compaction_threshold")>();
  c.topology_xml = info.get<info_key("topology_xml")>();
  const std::string mode = info.get<info_key("transfer_mode")>();
  c.transfer_mode = mode == "direct" ? TransferMode::kDirect
                    : mode == "copy" ? TransferMode::kCopy
                    : mode == "tcp"  ? TransferMode::kTcp
                                     : TransferMode::kAuto;
  c.wan_transport = info.get<info_key("wan_transport")>();
  c.offload_seeding = info.get<info_key("offload_seeding")>();
  // Validate early: a list of host:port, or etcd://host:port[,host:port]/prefix.
  if (registry::is_etcd_spec(c.registry)) {
    (void)registry::parse_etcd_target(c.registry);
  } else if (!c.registry.empty()) {
    (void)registry::parse_address_list(c.registry);
  }
  // The embedded registry's keys (registry scope): read, hence checked, even when a
  // registry is given and none is started.
  c.embedded_registry = std::make_shared<const registry::ServerOptions>(registry::ServerOptions::from_info(info));
  return c;
}

std::string nic_choice(const ContextConfig& cfg, const topo::Topology& t, int current_numa, std::string* why) {
  if (!cfg.net_devices.empty()) {
    if (why) *why = "net_devices given";
    return cfg.net_devices;
  }
  std::string note;
  const topo::Location loc = topo::buffer_location(*topo::parse_device(cfg.device, nullptr), t, current_numa, &note);
  const std::string devices = t.ucx_net_devices(loc);
  if (why) {
    const std::string near = t.proximity(loc);
    *why = note + ": " + (devices.empty() ? "no NIC known, UCX chooses" : devices + (near.empty() ? "" : " (" + near + ")"));
  }
  return devices;
}

registry::ConnectionOptions ContextConfig::connection_options(std::vector<std::string> addresses) const {
  registry::ConnectionOptions co;
  if (addresses.size() == 1 && registry::is_etcd_spec(addresses[0])) {
    co.etcd = addresses[0];  // the registry that leads there
  } else {
    co.addresses = std::move(addresses);
  }
  co.auth_token = auth_token;
  co.auth_mutual = auth_mutual;
  co.datacenter = datacenter;
  co.heartbeat_ms = heartbeat_ms;
  co.reconnect_ms = reconnect_ms;
  co.probe_ms = registry_probe_ms;
  co.registry_timeout_ms = registry_timeout_ms;
  co.connect_timeout_ms = registry_connect_timeout_ms;
  co.request_timeout_ms = registry_request_timeout_ms;
  return co;
}

Context::Context(const InfoMap& info) : cfg_(ContextConfig::from_info(info)) {
  std::vector<std::string> addresses;
  if (cfg_.registry.empty()) {
    server_ = std::make_unique<registry::Server>(*cfg_.embedded_registry);
    server_->start();
    addresses.push_back(server_->address());
  } else if (registry::is_etcd_spec(cfg_.registry)) {
    addresses.push_back(cfg_.registry);  // its endpoints are a list of their own
  } else {
    std::istringstream is(cfg_.registry);
    std::string a;
    while (std::getline(is, a, ',')) {
      if (!a.empty()) addresses.push_back(a);
    }
  }

  transport::WorkerOptions wo;
  wo.net_devices = cfg_.net_devices;
  wo.tls = cfg_.tls;
  wo.spin_us = cfg_.progress_spin_us;
  wo.datacenter = cfg_.datacenter;
  wo.wan = transport::parse_wan(cfg_.wan_transport).value_or(transport::WorkerOptions::Wan::kSocket);
  if (cfg_.transfer_mode == ContextConfig::TransferMode::kTcp && wo.tls.empty()) wo.tls = "tcp,self";
  if (wo.net_devices.empty()) {
    // The NICs nearest to where the tensors live (topo/); UCX chooses when the topology knows none.
    std::string err;
    auto topo = topo::Topology::load_default(cfg_.topology_xml, &err);
    wo.net_devices = nic_choice(cfg_, *topo, topo::current_numa_node(), &net_choice_);
  } else {
    net_choice_ = "net_devices given";
  }
  net_devices_ = wo.net_devices;
  worker_ = transport::Worker::create(wo);

  registry::ConnectionOptions co = cfg_.connection_options(addresses);
  engine_ = std::make_unique<Executor>("engine");
  copier_ = std::make_unique<Executor>("copy engine");
  conn_ = std::make_unique<registry::Connection>(co);
  // From the connection's reader thread to the engine: nothing waits there.
  conn_->on_order([this](const registry::Order& o) {
    MachineEvent ev = o.offload ? MachineEvent{OffloadOrdered{o.member, o.version}}
                                : MachineEvent{DiscardOrdered{o.member, o.version}};
    engine_->post([this, ev] { dispatch(ev); });
  });
  conn_->on_event([this](registry::ConnectionEvent e, uint64_t generation, const std::string& why) {
    MachineEvent ev = e == registry::ConnectionEvent::kLost   ? MachineEvent{RegistryLost{}}
                      : e == registry::ConnectionEvent::kBack ? MachineEvent{RegistryBack{generation}}
                                                              : MachineEvent{RegistryGone{why}};
    engine_->post([this, ev] { dispatch(ev); });
  });
}

void Context::dispatch(const MachineEvent& ev) {
  if (const auto* g = std::get_if<RegistryGone>(&ev)) registry_gone_ = g->detail;
  if (std::holds_alternative<RegistryBack>(ev)) registry_gone_.reset();
  std::vector<std::shared_ptr<RegistryListener>> ms;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& w : models_) {
      if (auto m = w.lock()) ms.push_back(std::move(m));
    }
  }
  for (auto& m : ms) m->on_registry(ev);
}

Context::~Context() {
  // No new registry events; what the executors hold runs to its end (it may still send).
  conn_->on_order(nullptr);
  conn_->on_event(nullptr);
  for (int round = 0; round < 3; ++round) {  // work that hands work to the other one
    copier_->call([] {});
    engine_->call([] {});
  }
  copier_->shutdown();
  engine_->shutdown();  // (the objects stay until the end: late posts are dropped)
  {
    std::lock_guard<std::mutex> lk(mu_);
    allocations_.clear();  // before the worker they are registered with
  }
  conn_.reset();
  worker_.reset();
  if (server_) server_->stop();
  server_.reset();
}

void* Context::alloc_mem(size_t bytes) {
  if (bytes == 0) throw Error(Code::kArg, "THUB_Alloc_mem: 0 bytes");
  std::shared_ptr<transport::MemoryRegion> r = worker_->allocate(bytes);
  void* base = r->data();
  std::lock_guard<std::mutex> lk(mu_);
  allocations_[reinterpret_cast<uintptr_t>(base)] = std::move(r);
  return base;
}

void Context::free_mem(void* base) {
  std::shared_ptr<transport::MemoryRegion> gone;
  std::lock_guard<std::mutex> lk(mu_);
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(base));
  if (it == allocations_.end()) {
    throw Error(Code::kArg, "THUB_Free_mem: this address was not returned by THUB_Alloc_mem of this context");
  }
  if (it->second.use_count() > 1) {
    throw Error(Code::kState, "THUB_Free_mem: a model still serves tensors in this memory; close it first");
  }
  gone = std::move(it->second);
  allocations_.erase(it);
}

std::shared_ptr<transport::MemoryRegion> Context::find_allocation(const void* p, uint64_t n) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = allocations_.upper_bound(reinterpret_cast<uintptr_t>(p));
  if (it == allocations_.begin()) return nullptr;
  --it;
  return it->second->contains(p, n) ? it->second : nullptr;
}

std::string Context::registry_address() const { return server_ ? server_->address() : conn_->address(); }

void Context::set_last_error(const std::string& s) {
  std::lock_guard<std::mutex> lk(mu_);
  last_error_ = s;
}

std::string Context::last_error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return last_error_;
}

void Context::attach(const std::shared_ptr<RegistryListener>& m) {
  std::lock_guard<std::mutex> lk(mu_);
  models_.push_back(m);
}

void Context::detach(const RegistryListener* m) {
  std::lock_guard<std::mutex> lk(mu_);
  models_.erase(std::remove_if(models_.begin(), models_.end(),
                               [m](const std::weak_ptr<RegistryListener>& w) {
                                 auto p = w.lock();
                                 return !p || p.get() == m;
                               }),
                models_.end());
}

}  // namespace thub::client
