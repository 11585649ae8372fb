// Planning on a detected machine: which NICs a worker serving a buffer location should use.
// Pure functions of the MachineModel.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "topo/distance.h"
#include "topo/machine_model.h"

namespace thub::topo {

struct RankedNic {
  std::size_t index = 0;  // into MachineModel::nics
  Distance distance;
};

// Every NIC of `m` that is up (Nic::active), nearest to `loc` first; at equal distance RDMA
// first, then the faster (Nic::gbps), then tree order.
std::vector<RankedNic> rank_nics(const MachineModel& m, const Location& loc);

// The NICs at the smallest distance from `loc` (see Topology::nearest_nics); `rdma_only`
// keeps only RDMA NICs before taking the nearest.
std::vector<RankedNic> nearest_nics(const MachineModel& m, const Location& loc, bool rdma_only);

// "mlx5_0:1,mlx5_1:1" / "eth0" / "" (see Topology::ucx_net_devices).
std::string ucx_net_devices(const MachineModel& m, const Location& loc);

}  // namespace thub::topo
