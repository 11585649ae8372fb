// Where a context's tensors live, for the NIC choice (the info key `device`): a CUDA device,
// a NUMA node, any host memory, or the NUMA node of the thread that makes the context.
#pragma once

#include <optional>
#include <string>

#include "topo/topology.h"

namespace thub::topo {

struct DeviceSpec {
  enum class Kind { kAuto, kHost, kNuma, kCuda };
  Kind kind = Kind::kAuto;
  int index = -1;  // kNuma: the node (numactl's numbering); kCuda: the CUDA device ordinal
};

// "auto" (or ""), "host", "numa:N", "cuda:N"; nullopt with `why` for anything else.
std::optional<DeviceSpec> parse_device(const std::string& text, std::string* why);

// The buffer location the spec names on `t`: cuda:N is GPU N of the topology (hwloc's CUDA
// numbering where it has one, else PCI order: CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID and, for
// identical GPUs, by default); numa:N that node's host memory; host any; auto the NUMA node
// `current_numa` (-1: any). A GPU the topology does not know falls back to auto, saying so in
// `note` (which also says what was chosen).
Location buffer_location(const DeviceSpec& d, const Topology& t, int current_numa, std::string* note);

// The NUMA node of the CPU the calling thread runs on (getcpu), -1 if unknown.
int current_numa_node();

}  // namespace thub::topo
