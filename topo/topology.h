// The machine as the data plane sees it: NICs, GPUs and NUMA nodes found by hwloc (or
// loaded from a recorded hwloc XML), and which NIC is nearest to a buffer's location.
// Detecting (load) is separate from planning (nearest_nics), as NCCL does it.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace thub::topo {

struct Nic {
  std::string name;     // OS device name as UCX knows it: "mlx5_0" (OpenFabrics) or "eth0"
  bool rdma = false;    // an OpenFabrics (verbs) device
  int numa = -1;        // NUMA node it hangs off, -1 unknown
  std::string pci_bus;  // "0000:17:00.0", empty for virtual devices
  int port = 1;         // RDMA: the port UCX uses ("mlx5_0:1"), the first active one
  // From rdma-core (libibverbs) on the running machine, where it knows the device
  // (topo/verbs.h); else as assumed: active, rate unknown.
  bool active = true;       // a port of it is up (IBV_PORT_ACTIVE): a NIC without one is never chosen
  double gbps = 0;          // that port's data rate (speed x width), 0: unknown
  std::string link_layer;   // "InfiniBand", "Ethernet" (RoCE), "" unknown
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

  static Location host(int numa_node) { return Location{false, numa_node, {}}; }
  // Any spelling of the bus id: "0000:17:00.0", "00000000:17:00.0" (nvidia-smi), "17:00.0".
  static Location gpu_at(std::string bus) { return Location{true, -1, std::move(bus)}; }
};

class Topology {
 public:
  virtual ~Topology() = default;
  // The hwloc XML file `xml` if non-empty (the info key topology_xml, read from
  // TENSORHUB_TOPOLOGY_XML by src/common/), else the running machine. Never null; on failure
  // an empty topology with `err` filled.
  static std::unique_ptr<Topology> load_default(const std::string& xml, std::string* err);
  static std::unique_ptr<Topology> load_machine(std::string* err);
  static std::unique_ptr<Topology> load_xml(const std::string& path, std::string* err);

  virtual const std::vector<Nic>& nics() const = 0;
  virtual const std::vector<Gpu>& gpus() const = 0;
  virtual int numa_nodes() const = 0;
  // NICs nearest to `loc`, best first (RDMA before plain network at equal distance, then the
  // faster rail): those at the smallest distance only; a NIC whose ports are all down never. GPU: by the PCI path between GPU and NIC in the hwloc
  // tree (same PCI switch < same host bridge < same NUMA node < same package < system);
  // host memory: NICs of that NUMA node, else of its package, else all; numa -1: all.
  // A GPU bus id that is not known falls back to `loc.numa`.
  virtual std::vector<Nic> nearest_nics(const Location& loc) const = 0;
  // The value for UCX_NET_DEVICES for a worker serving `loc` ("" = let UCX choose): the
  // nearest RDMA NICs ("mlx5_0:1,mlx5_1:1") when the machine has any, since a far RDMA NIC
  // beats a near TCP one; else the nearest plain network devices ("eth0").
  virtual std::string ucx_net_devices(const Location& loc) const = 0;
  virtual std::string describe() const = 0;

  // Added with the hwloc implementation; not pure, so fakes in other layers' tests still
  // compile. The NUMA node ids (numactl's numbering), ascending.
  virtual std::vector<int> numa_ids() const;
  // How close nearest_nics(loc) are: "PCI switch", "host bridge", "NUMA node", "package",
  // "system"; "" when no NIC is known.
  virtual std::string proximity(const Location& loc) const { return {}; }
};

}  // namespace thub::topo
