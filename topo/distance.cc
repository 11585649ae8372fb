#include "topo/distance.h"

#include <algorithm>

namespace thub::topo {
namespace {

bool shares_numa(const Site& a, const Site& b) {
  for (int n : a.numa) {
    if (std::find(b.numa.begin(), b.numa.end(), n) != b.numa.end()) return true;
  }
  return false;
}

// Below the I/O tree the link is NUMA-local, socket-local or across sockets.
Distance cpu_side_distance(const Site& a, const Site& b) {
  if (shares_numa(a, b)) return {Proximity::kNumaNode, 0};
  if (a.package >= 0 && a.package == b.package) return {Proximity::kPackage, 0};
  return {Proximity::kSystem, 0};
}

}  // namespace

const char* proximity_name(Proximity p) {
  switch (p) {
    case Proximity::kPciSwitch: return "PCI switch";
    case Proximity::kHostBridge: return "host bridge";
    case Proximity::kNumaNode: return "NUMA node";
    case Proximity::kPackage: return "package";
    case Proximity::kSystem: return "system";
  }
  return "system";
}

Distance device_distance(const Site& a, const Site& b) {
  size_t shared = 0;
  while (shared < a.path.size() && shared < b.path.size() &&
         a.path[shared].id == b.path[shared].id) {
    ++shared;
  }
  if (shared == 0) return cpu_side_distance(a, b);
  switch (a.path[shared - 1].kind) {
    case HopKind::kPciBridge:
    case HopKind::kPciDevice:
      return {Proximity::kPciSwitch, static_cast<int>(shared)};
    case HopKind::kHostBridge:
      return {Proximity::kHostBridge, 0};
    case HopKind::kCpuSide:
      break;
  }
  return cpu_side_distance(a, b);
}

Distance host_distance(const NumaNode* node, const Site& device) {
  if (node == nullptr) return {Proximity::kSystem, 0};
  if (std::find(device.numa.begin(), device.numa.end(), node->id) != device.numa.end()) {
    return {Proximity::kNumaNode, 0};
  }
  if (node->package >= 0 && node->package == device.package) return {Proximity::kPackage, 0};
  return {Proximity::kSystem, 0};
}

}  // namespace thub::topo
