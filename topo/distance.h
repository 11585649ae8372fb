// How far a NIC is from a buffer: a tier first (the kind of link between them, as
// nvidia-smi topo names them: PIX/PXB, PHB, NODE, SYS), then, inside a PCI switch tree,
// the depth of the deepest common bridge.
#pragma once

#include "topo/machine_model.h"

namespace thub::topo {

enum class Proximity {
  kPciSwitch = 0,   // common ancestor below the host bridge: a PCIe switch or root port
  kHostBridge = 1,  // same PCI root complex
  kNumaNode = 2,    // attached to the same NUMA node
  kPackage = 3,     // same socket, other NUMA node (sub-NUMA clustering)
  kSystem = 4,      // across the inter-socket link, or nothing known
};

const char* proximity_name(Proximity p);

struct Distance {
  Proximity tier = Proximity::kSystem;
  int shared_depth = 0;  // hops shared from the root; used only within kPciSwitch

  bool operator<(const Distance& o) const {
    if (tier != o.tier) return tier < o.tier;
    return shared_depth > o.shared_depth;  // a deeper common bridge is nearer
  }
  bool operator==(const Distance& o) const { return !(*this < o) && !(o < *this); }
};

// Between two devices, e.g. a GPU and a NIC.
Distance device_distance(const Site& a, const Site& b);

// Between host memory on `node` and a device; `node` null means anywhere (all equal).
Distance host_distance(const NumaNode* node, const Site& device);

}  // namespace thub::topo
