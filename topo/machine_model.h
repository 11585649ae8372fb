// What detection hands to planning: the devices and, for each, where it hangs in the
// machine's tree. Plain data with no hwloc in it, so the NIC choice is a pure function that
// tests can also feed by hand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topo/topology.h"

namespace thub::topo {

enum class HopKind : std::uint8_t {
  kCpuSide,     // machine, package, group, cache...: everything that is not I/O
  kHostBridge,  // a PCI root complex
  kPciBridge,   // a root port or a PCIe switch port
  kPciDevice,
};

struct Hop {
  std::uint64_t id = 0;  // unique within one topology (hwloc's gp_index)
  HopKind kind = HopKind::kCpuSide;
};

// Where a device hangs: its ancestors from the root down to itself (its PCI function, or
// its nearest non-I/O object for a device without one), the NUMA nodes local to that
// nearest non-I/O object, and the package holding it (-1: above the packages).
struct Site {
  std::vector<Hop> path;
  std::vector<int> numa;
  int package = -1;
};

struct NumaNode {
  int id = 0;        // OS index, numactl's numbering
  int package = -1;
};

struct MachineModel {
  std::string source;  // "this machine (host vm)", "hwloc XML <path> (host hgx-h100)"
  std::vector<NumaNode> numa_nodes;  // ascending id
  std::vector<Nic> nics;             // in hwloc's tree order, which is PCI order
  std::vector<Site> nic_sites;       // nic_sites[i] is where nics[i] hangs
  std::vector<Gpu> gpus;             // ascending index
  std::vector<Site> gpu_sites;
  // Where the NICs' port facts came from ("rdma-core"), or why there are none ("no RDMA
  // device ..."); "" for a recorded topology (not this machine).
  std::string verbs;
};

}  // namespace thub::topo
