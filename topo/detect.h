// Detection: reads NUMA nodes, GPUs and NICs, and where each hangs, out of a loaded hwloc
// topology into a MachineModel (hwloc stays behind this line).
#pragma once

#include <string>

#include "topo/hwloc_topology.h"
#include "topo/machine_model.h"

namespace thub::topo {

// `origin` says where the topology came from ("this machine", "hwloc XML <path>").
MachineModel detect(const HwlocTopology& topo, const std::string& origin);

}  // namespace thub::topo
