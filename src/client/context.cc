#include "src/client/context.h"

#include <iterator>
#include <sstream>
#include <vector>

#include "src/client/model.h"
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
  conn_ = std::make_unique<registry::Connection>(co);
  conn_->on_order([this](const registry::Order& o) { dispatch_order(o.member, o.offload, o.version); });
  conn_->on_reconnect([this] { dispatch_reconnect(); });
}

void Context::dispatch_order(uint64_t member, bool offload, int64_t version) {
  std::shared_lock<std::shared_mutex> life(life_mu_);
  Model* m = nullptr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = models_.find(member);
    if (it != models_.end()) m = it->second;
  }
  if (!m) return;
  try {
    if (offload) m->offload(member, version);
    else m->discard(version);
  } catch (const std::exception& e) {
    set_last_error(std::string("registry order failed: ") + e.what());
  }
}

void Context::dispatch_reconnect() {
  std::shared_lock<std::shared_mutex> life(life_mu_);
  std::vector<Model*> ms;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [id, m] : models_) ms.push_back(m);
  }
  for (Model* m : ms) {
    try {
      m->reregister();
    } catch (const std::exception& e) {
      set_last_error(std::string("re-registering after registry failover failed: ") + e.what());
    }
  }
}

Context::~Context() {
  conn_.reset();
  worker_.reset();
  if (server_) server_->stop();
  server_.reset();
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

void Context::attach(uint64_t member, Model* m) {
  std::lock_guard<std::mutex> lk(mu_);
  models_[member] = m;
}

void Context::detach(uint64_t member) {
  std::lock_guard<std::mutex> lk(mu_);
  models_.erase(member);
}

void Context::retire(Model* m) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = models_.begin(); it != models_.end();) {
      it = it->second == m ? models_.erase(it) : std::next(it);
    }
  }
  std::unique_lock<std::shared_mutex> life(life_mu_);  // waits for dispatches in progress
}

}  // namespace thub::client
