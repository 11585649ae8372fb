// The machine as the data plane sees it: NICs, GPUs and NUMA nodes found by hwloc (or
// loaded from a recorded hwloc XML), and which NIC is nearest to a buffer's location.
// Detecting (load) is separate from planning (nearest_nics), as NCCL does it.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace thub::topo {

struct Nic {
  std::string name;     // OS device name as UCX knows it: "mlx5_0" (OpenFabrics) or "eth0"
  bool rdma = false;    // an OpenFabrics (verbs) device
  int numa = -1;        // NUMA node it hangs off, -1 unknown
  std::string pci_bus;  // "0000:17:00.0", empty for virtual devices
};

struct Gpu {
  int index = 0;
  std::string pci_bus;
  int numa = -1;
};

struct Location {         // where a buffer lives
  bool gpu = false;
  int numa = -1;          // host memory: its NUMA node (-1: any)
  std::string pci_bus;    // GPU memory: the GPU's PCI bus id
};

class Topology {
 public:
  virtual ~Topology() = default;
  // TENSORHUB_TOPOLOGY_XML if set, else the running machine. Never null; on failure an
  // empty topology with `err` filled.
  static std::unique_ptr<Topology> load_default(std::string* err);
  static std::unique_ptr<Topology> load_machine(std::string* err);
  static std::unique_ptr<Topology> load_xml(const std::string& path, std::string* err);

  virtual const std::vector<Nic>& nics() const = 0;
  virtual const std::vector<Gpu>& gpus() const = 0;
  virtual int numa_nodes() const = 0;
  // NICs nearest to `loc`, best first (RDMA before plain network at equal distance).
  virtual std::vector<Nic> nearest_nics(const Location& loc) const = 0;
  // The value for UCX_NET_DEVICES for a worker serving `loc` ("" = let UCX choose).
  virtual std::string ucx_net_devices(const Location& loc) const = 0;
  virtual std::string describe() const = 0;
};

}  // namespace thub::topo
