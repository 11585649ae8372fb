#include "topo/detect.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "topo/pci_bus.h"

namespace thub::topo {
namespace {

constexpr unsigned kVendorNvidia = 0x10de;
constexpr unsigned kClassVga = 0x0300;
constexpr unsigned kClass3d = 0x0302;
constexpr int kIbPortActive = 4;  // IB_PORT_ACTIVE in /sys/class/infiniband/*/ports/*/state

HopKind hop_kind(hwloc_obj_t obj) {
  switch (obj->type) {
    case HWLOC_OBJ_BRIDGE:
      return obj->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST ? HopKind::kHostBridge
                                                                      : HopKind::kPciBridge;
    case HWLOC_OBJ_PCI_DEVICE:
      return HopKind::kPciDevice;
    default:
      return HopKind::kCpuSide;
  }
}

int package_of(hwloc_obj_t obj) {
  for (; obj != nullptr; obj = obj->parent) {
    if (obj->type == HWLOC_OBJ_PACKAGE) return static_cast<int>(obj->os_index);
  }
  return -1;
}

// `obj` is a PCI device, or an OS device (then its PCI device, if any, stands for it).
Site site_of(hwloc_topology_t topo, hwloc_obj_t obj) {
  if (obj->type == HWLOC_OBJ_OS_DEVICE) obj = obj->parent;
  Site site;
  for (hwloc_obj_t o = obj; o != nullptr; o = o->parent) {
    site.path.push_back({o->gp_index, hop_kind(o)});
  }
  std::reverse(site.path.begin(), site.path.end());
  hwloc_obj_t cpu_side =
      hwloc_obj_type_is_io(obj->type) ? hwloc_get_non_io_ancestor_obj(topo, obj) : obj;
  if (cpu_side != nullptr && cpu_side->nodeset != nullptr) {
    unsigned node;
    hwloc_bitmap_foreach_begin(node, cpu_side->nodeset) {
      site.numa.push_back(static_cast<int>(node));
    }
    hwloc_bitmap_foreach_end();
    site.package = package_of(cpu_side);
  }
  return site;
}

int single_numa(const Site& site) { return site.numa.size() == 1 ? site.numa.front() : -1; }

std::string pci_bus_of(hwloc_obj_t obj) {
  for (; obj != nullptr; obj = obj->parent) {
    if (obj->type == HWLOC_OBJ_PCI_DEVICE) {
      const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p = obj->attr->pcidev;
      return format_pci_bus(p.domain, p.bus, p.dev, p.func);
    }
  }
  return {};
}

// The CUDA (else NVML) index from a GPU's OS devices "cudaN" / "nvmlN", -1 if none; hwloc
// has them only when built with those plugins.
int cuda_index(hwloc_obj_t pcidev) {
  int nvml = -1;
  for (hwloc_obj_t c = pcidev->io_first_child; c != nullptr; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_OS_DEVICE || c->name == nullptr) continue;
    if (c->attr->osdev.type != HWLOC_OBJ_OSDEV_GPU &&
        c->attr->osdev.type != HWLOC_OBJ_OSDEV_COPROC) {
      continue;
    }
    if (std::strncmp(c->name, "cuda", 4) == 0) return std::atoi(c->name + 4);
    if (std::strncmp(c->name, "nvml", 4) == 0) nvml = std::atoi(c->name + 4);
  }
  return nvml;
}

bool nvidia_display_class(hwloc_obj_t pcidev) {
  const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p = pcidev->attr->pcidev;
  return p.vendor_id == kVendorNvidia && (p.class_id == kClass3d || p.class_id == kClassVga);
}

// UCX names a port; take the first active one hwloc reports (infos "Port<N>State"), else 1.
int active_port(hwloc_obj_t osdev) {
  for (unsigned i = 0; i < osdev->infos_count; ++i) {
    const char* name = osdev->infos[i].name;
    const char* value = osdev->infos[i].value;
    if (std::strncmp(name, "Port", 4) != 0) continue;
    char* end = nullptr;
    const long port = std::strtol(name + 4, &end, 10);
    if (port > 0 && std::strcmp(end, "State") == 0 && std::atoi(value) == kIbPortActive) {
      return static_cast<int>(port);
    }
  }
  return 1;
}

void detect_numa(hwloc_topology_t topo, MachineModel* m) {
  const int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    m->numa_nodes.push_back({static_cast<int>(node->os_index), package_of(node)});
  }
  std::sort(m->numa_nodes.begin(), m->numa_nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
}

void detect_gpus(hwloc_topology_t topo, MachineModel* m) {
  struct Found {
    Gpu gpu;
    Site site;
    int cuda;
  };
  std::vector<Found> found;  // in PCI order, as hwloc walks the tree
  for (hwloc_obj_t p = hwloc_get_next_pcidev(topo, nullptr); p != nullptr;
       p = hwloc_get_next_pcidev(topo, p)) {
    const int cuda = cuda_index(p);
    if (!nvidia_display_class(p) && cuda < 0) continue;
    Site site = site_of(topo, p);
    Gpu gpu;
    gpu.pci_bus = pci_bus_of(p);
    gpu.numa = single_numa(site);
    found.push_back({gpu, std::move(site), cuda});
  }
  // CUDA's numbering when hwloc knows it for every GPU; else PCI order, which is CUDA's with
  // CUDA_DEVICE_ORDER=PCI_BUS_ID and, for identical GPUs, its default too.
  const bool all_cuda =
      std::all_of(found.begin(), found.end(), [](const Found& f) { return f.cuda >= 0; });
  for (size_t i = 0; i < found.size(); ++i) {
    found[i].gpu.index = all_cuda ? found[i].cuda : static_cast<int>(i);
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const Found& a, const Found& b) { return a.gpu.index < b.gpu.index; });
  for (Found& f : found) {
    m->gpus.push_back(std::move(f.gpu));
    m->gpu_sites.push_back(std::move(f.site));
  }
}

void detect_nics(hwloc_topology_t topo, MachineModel* m) {
  for (hwloc_obj_t o = hwloc_get_next_osdev(topo, nullptr); o != nullptr;
       o = hwloc_get_next_osdev(topo, o)) {
    const hwloc_obj_osdev_type_e type = o->attr->osdev.type;
    if (type != HWLOC_OBJ_OSDEV_OPENFABRICS && type != HWLOC_OBJ_OSDEV_NETWORK) continue;
    if (o->name == nullptr || std::strcmp(o->name, "lo") == 0) continue;
    Site site = site_of(topo, o);
    Nic nic;
    nic.name = o->name;
    nic.rdma = type == HWLOC_OBJ_OSDEV_OPENFABRICS;
    nic.numa = single_numa(site);
    nic.pci_bus = pci_bus_of(o);
    if (nic.rdma) nic.port = active_port(o);
    m->nics.push_back(std::move(nic));
    m->nic_sites.push_back(std::move(site));
  }
}

}  // namespace

MachineModel detect(const HwlocTopology& topology, const std::string& origin) {
  hwloc_topology_t topo = topology.get();
  MachineModel m;
  const char* host = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), "HostName");
  m.source = host != nullptr ? origin + " (host " + host + ")" : origin;
  detect_numa(topo, &m);
  detect_gpus(topo, &m);
  detect_nics(topo, &m);
  return m;
}

}  // namespace thub::topo
