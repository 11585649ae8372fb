// The --topology section of tensorhub-info: the machine as topo/ sees it, and the NICs it
// chooses for each GPU and NUMA node.
#pragma once

#include <ostream>

#include "topo/topology.h"

namespace thub::info {

void print_topology(std::ostream& out, const topo::Topology& topology);

}  // namespace thub::info
