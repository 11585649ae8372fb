// NIC facts from rdma-core (libibverbs) where present: each RDMA device's ports, whether they
// are up, their link layer and data rate. hwloc stays the source of locality (where a NIC
// hangs); these say which NICs can carry traffic now and how fast, so that a down port is never
// chosen and equally near rails are ordered by rate (topo/nic_choice.h).
#pragma once

#include <string>
#include <vector>

#include "topo/machine_model.h"

namespace thub::topo {

struct PortFacts {
  std::string device;       // "mlx5_0"
  int port = 1;             // 1-based, as UCX names it ("mlx5_0:1")
  bool active = false;      // IBV_PORT_ACTIVE
  double gbps = 0;          // data rate: lane speed x width
  std::string link_layer;   // "InfiniBand", "Ethernet"
};

// Every port of every RDMA device libibverbs lists on this machine. Empty, with `why` saying
// so, where there is none (no RDMA device, or a build without libibverbs).
std::vector<PortFacts> probe_verbs(std::string* why);

// Lane speed (IBV_SPEED_*: active_speed) and width (IBV_WIDTH_*: active_width) in Gbit/s of
// data; 0 for a code it does not know.
double verbs_rate_gbps(int active_speed, int active_width);

// Puts the facts on m's RDMA NICs (by device name): the first active port (its rate, link
// layer), else the NIC is marked down. NICs the facts do not name are left as they are.
void apply_port_facts(MachineModel& m, const std::vector<PortFacts>& facts);

}  // namespace thub::topo
