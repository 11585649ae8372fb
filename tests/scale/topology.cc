#include "tests/scale/topology.h"

#include <stdexcept>

namespace thub::scale {

namespace {
double bytes_per_ns(double gbit) { return gbit * 1e9 / 8 / 1e9; }
Ns us(double x) { return static_cast<Ns>(x * 1000); }
}  // namespace

Topology::Topology(const ScaleConfig& cfg, FluidNetwork& net) : cfg_(cfg), net_(net) {
  if (cfg.gpus_per_host < 1 || cfg.nics_per_host < 1 || cfg.nics_per_host > cfg.gpus_per_host ||
      cfg.gpus_per_host % cfg.nics_per_host != 0)
    throw std::invalid_argument("nics_per_host must divide gpus_per_host");
  if (cfg.datacenters < 1) throw std::invalid_argument("datacenters must be >= 1");
  member_rate_ = bytes_per_ns(cfg.nic_gbit) * cfg.nics_per_host / cfg.gpus_per_host;
  if (cfg.datacenters > 1)
    for (int d = 0; d < cfg.datacenters; ++d) {
      wan_tx_.push_back(net.add_resource(bytes_per_ns(cfg.wan_gbit)));
      wan_rx_.push_back(net.add_resource(bytes_per_ns(cfg.wan_gbit)));
    }
}

int Topology::dc_of_replica(int replica) const { return replica == 0 ? 0 : (replica - 1) % cfg_.datacenters; }

const Topology::Place& Topology::place(int replica, int shard) {
  auto key = std::make_pair(replica, shard);
  if (auto it = places_.find(key); it != places_.end()) return it->second;
  const int hosts_per_replica = (cfg_.shards + cfg_.gpus_per_host - 1) / cfg_.gpus_per_host;
  const int host = replica * hosts_per_replica + shard / cfg_.gpus_per_host;
  const int gpu = shard % cfg_.gpus_per_host;
  const int nic = gpu * cfg_.nics_per_host / cfg_.gpus_per_host;
  auto nk = std::make_pair(host, nic);
  auto nit = nics_.find(nk);
  if (nit == nics_.end()) {
    double r = bytes_per_ns(cfg_.nic_gbit);
    nit = nics_.emplace(nk, std::make_pair(net_.add_resource(r), net_.add_resource(r))).first;
  }
  Place p;
  p.dc = dc_of_replica(replica);
  p.tx = nit->second.first;
  p.rx = nit->second.second;
  return places_.emplace(key, p).first->second;
}

std::vector<int> Topology::route(const Place& a, const Place& b) const {
  if (a.dc == b.dc) return {a.tx, b.rx};
  return {a.tx, wan_tx_.at(a.dc), wan_rx_.at(b.dc), b.rx};
}

Ns Topology::ctl_one_way(int dc) const {
  return us(cfg_.ctl_latency_us) + (dc == 0 ? 0 : us(cfg_.wan_latency_us));
}

Ns Topology::data_rtt(int dc_a, int dc_b) const {
  return us(cfg_.data_rtt_us) + (dc_a == dc_b ? 0 : 2 * us(cfg_.wan_latency_us));
}

}  // namespace thub::scale
