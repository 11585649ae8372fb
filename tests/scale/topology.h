// Where the members of the at-scale simulation live: hosts with NICs in datacenters, and
// what a transfer between two members crosses (the resources of the fluid network) and how
// long a message takes. Replica 0 is the trainer (DC 0); rollout replica r >= 1 lives in DC
// (r - 1) % datacenters, on hosts of its own (one replica never shares a host with another).
#pragma once

#include <map>
#include <vector>

#include "tests/scale/fluid_network.h"
#include "tests/scale/scale_config.h"

namespace thub::scale {

class Topology {
 public:
  Topology(const ScaleConfig& cfg, FluidNetwork& net);

  // The member's NIC resources (created on first use) and datacenter.
  struct Place {
    int dc = 0;
    int tx = -1, rx = -1;  // its NIC's two directions
  };
  const Place& place(int replica, int shard);
  [[nodiscard]] int dc_of_replica(int replica) const;

  // What bytes from a to b cross: a's NIC out, the DC uplinks if the DCs differ, b's NIC in.
  [[nodiscard]] std::vector<int> route(const Place& a, const Place& b) const;
  // One way, client <-> registry (the registry is in DC 0).
  [[nodiscard]] Ns ctl_one_way(int dc) const;
  [[nodiscard]] Ns data_rtt(int dc_a, int dc_b) const;

  // Bytes per ns one member can move when every member of its host moves at once.
  [[nodiscard]] double member_rate() const { return member_rate_; }

 private:
  const ScaleConfig& cfg_;
  FluidNetwork& net_;
  double member_rate_ = 0;
  std::vector<int> wan_tx_, wan_rx_;      // per DC
  std::map<std::pair<int, int>, Place> places_;
  std::map<std::pair<int, int>, std::pair<int, int>> nics_;  // (host key, nic) -> (tx, rx)
};

}  // namespace thub::scale
