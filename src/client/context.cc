#include "src/client/context.h"

#include <algorithm>
#include <iterator>
#include <sstream>
#include <vector>

#include "src/common/status.h"
#include "src/registry/auth.h"
#include "src/registry/connection.h"
#include "src/registry/server.h"
#include "src/registry/socket.h"
#include "src/transport/worker.h"
#include "topo/topology.h"

namespace thub::client {

ContextConfig ContextConfig::from_info(const InfoMap& info) {
  ContextConfig c;
  c.registry = info.get_string("registry", "");
  // The embedded registry listens on the one interface it advertises (THUB_Registry_address),
  // not on all of them: 0.0.0.0 only when registry_listen asks for it (docs/security.md).
  c.registry_listen = info.get_string("registry_listen", registry::advertised_host("") + ":0");
  c.datacenter = info.get_string("datacenter", c.datacenter);
  if (c.datacenter.empty()) throw Error(Code::kArg, "info key 'datacenter' must not be empty");
  c.auth_token = info.get_string("auth_token", "");
  if (std::string file = info.get_string("auth_token_file", ""); !file.empty()) {
    if (!c.auth_token.empty()) throw Error(Code::kArg, "give auth_token or auth_token_file, not both");
    c.auth_token = registry::read_token_file(file);
  }
  (void)info.get_bool("auth_mutual", true);  // validated here, read by the Context
  c.verify = info.get_bool("verify", false);
  c.chunk_size = info.get_size("chunk_size", c.chunk_size, 4096, 1ull << 30);
  c.pipeline_chunk_size = info.get_size("pipeline_chunk_size", c.pipeline_chunk_size, 4096, 1ull << 30);
  c.max_inflight = static_cast<int>(info.get_int("max_inflight", c.max_inflight, 1, 1024));
  c.timeout_ms = info.get_int("timeout_ms", 0, 0, int64_t{1} << 40);
  c.heartbeat_ms = static_cast<int>(info.get_int("heartbeat_ms", c.heartbeat_ms, 10, 3600000));
  c.reconnect_ms = static_cast<int>(info.get_int("reconnect_ms", c.reconnect_ms, 0, 3600000));
  c.registry_timeout_ms = static_cast<int>(info.get_int("registry_timeout_ms", c.registry_timeout_ms, 0, 86400000));
  c.registry_connect_timeout_ms =
      static_cast<int>(info.get_int("registry_connect_timeout_ms", c.registry_connect_timeout_ms, 1, 3600000));
  c.registry_request_timeout_ms =
      static_cast<int>(info.get_int("registry_request_timeout_ms", c.registry_request_timeout_ms, 0, 86400000));
  c.heartbeat_timeout_ms = info.get_int("heartbeat_timeout_ms", c.heartbeat_timeout_ms, 20, 86400000);
  c.stall_timeout_ms = info.get_int("stall_timeout_ms", c.stall_timeout_ms, 10, 86400000);
  c.pipeline = info.get_bool("pipeline", true);
  c.max_readers = static_cast<int>(info.get_int("max_readers", c.max_readers, 1, 1 << 20));
  c.net_devices = info.get_string("net_devices", "");
  c.tls = info.get_string("tls", "");
  c.progress_spin_us = info.get_int("progress_spin_us", c.progress_spin_us, 0, 1000000);
  c.compaction_threshold = info.get_size("compaction_threshold", c.compaction_threshold, 0, uint64_t{1} << 40);
  const std::string mode = info.get_choice("transfer_mode", "auto", "auto|direct|copy|tcp");
  c.transfer_mode = mode == "direct" ? TransferMode::kDirect
                    : mode == "copy" ? TransferMode::kCopy
                    : mode == "tcp"  ? TransferMode::kTcp
                                     : TransferMode::kAuto;
  if (!c.registry.empty()) (void)registry::parse_address_list(c.registry);  // validate early
  (void)registry::parse_host_port(c.registry_listen);
  return c;
}

Context::Context(const InfoMap& info) : cfg_(ContextConfig::from_info(info)) {
  std::vector<std::string> addresses;
  if (cfg_.registry.empty()) {
    registry::ServerOptions so;
    so.listen = cfg_.registry_listen;
    so.auth_token = cfg_.auth_token;
    so.sched.heartbeat_timeout = cfg_.heartbeat_timeout_ms * 1000;
    so.sched.pipeline = cfg_.pipeline;
    so.sched.max_readers_per_source = cfg_.max_readers;
    server_ = std::make_unique<registry::Server>(so);
    server_->start();
    addresses.push_back(server_->address());
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
  if (cfg_.transfer_mode == ContextConfig::TransferMode::kTcp && wo.tls.empty()) wo.tls = "tcp,self";
  if (wo.net_devices.empty()) {
    // The NIC nearest to host memory (topo/); UCX chooses when the topology knows none.
    std::string err;
    auto topo = topo::Topology::load_default(&err);
    wo.net_devices = topo->ucx_net_devices(topo::Location{});
  }
  worker_ = transport::Worker::create(wo);

  registry::ConnectionOptions co;
  co.addresses = addresses;
  co.auth_token = cfg_.auth_token;
  co.auth_mutual = info.get_bool("auth_mutual", true);
  co.datacenter = cfg_.datacenter;
  co.heartbeat_ms = cfg_.heartbeat_ms;
  co.reconnect_ms = cfg_.reconnect_ms;
  co.registry_timeout_ms = cfg_.registry_timeout_ms;
  co.connect_timeout_ms = cfg_.registry_connect_timeout_ms;
  co.request_timeout_ms = cfg_.registry_request_timeout_ms;
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
