#include "topo/nic_choice.h"

#include <algorithm>

#include "topo/pci_bus.h"

namespace thub::topo {
namespace {

const Site* gpu_site(const MachineModel& m, const std::string& bus) {
  const std::string want = normalize_pci_bus(bus);
  if (want.empty()) return nullptr;
  for (size_t i = 0; i < m.gpus.size(); ++i) {
    if (m.gpus[i].pci_bus == want) return &m.gpu_sites[i];
  }
  return nullptr;
}

const NumaNode* numa_node(const MachineModel& m, int id) {
  for (const NumaNode& n : m.numa_nodes) {
    if (n.id == id) return &n;
  }
  return nullptr;  // -1 or an id this machine does not have: anywhere
}

}  // namespace

std::vector<RankedNic> rank_nics(const MachineModel& m, const Location& loc) {
  const Site* gpu = loc.gpu ? gpu_site(m, loc.pci_bus) : nullptr;
  const NumaNode* node = numa_node(m, loc.numa);
  std::vector<RankedNic> ranked;
  ranked.reserve(m.nics.size());
  for (size_t i = 0; i < m.nics.size(); ++i) {
    if (!m.nics[i].active) continue;  // every port down (rdma-core says so): never chosen
    const Site& site = m.nic_sites[i];
    ranked.push_back({i, gpu ? device_distance(*gpu, site) : host_distance(node, site)});
  }
  std::stable_sort(ranked.begin(), ranked.end(), [&m](const RankedNic& a, const RankedNic& b) {
    if (a.distance < b.distance) return true;
    if (b.distance < a.distance) return false;
    const Nic& x = m.nics[a.index];
    const Nic& y = m.nics[b.index];
    if (x.rdma != y.rdma) return x.rdma;
    return x.gbps > y.gbps;  // equally near rails: the faster first (UCX splits by bandwidth)
  });
  return ranked;
}

std::vector<RankedNic> nearest_nics(const MachineModel& m, const Location& loc, bool rdma_only) {
  std::vector<RankedNic> ranked = rank_nics(m, loc);
  if (rdma_only) {
    ranked.erase(std::remove_if(ranked.begin(), ranked.end(),
                                [&m](const RankedNic& r) { return !m.nics[r.index].rdma; }),
                 ranked.end());
  }
  if (ranked.empty()) return ranked;
  const Distance best = ranked.front().distance;
  ranked.erase(std::find_if(ranked.begin(), ranked.end(),
                            [&best](const RankedNic& r) { return !(r.distance == best); }),
               ranked.end());
  return ranked;
}

std::string ucx_net_devices(const MachineModel& m, const Location& loc) {
  const bool any_rdma =
      std::any_of(m.nics.begin(), m.nics.end(), [](const Nic& n) { return n.rdma; });
  std::string out;
  for (const RankedNic& r : nearest_nics(m, loc, any_rdma)) {
    const Nic& nic = m.nics[r.index];
    if (!out.empty()) out += ',';
    out += nic.rdma ? nic.name + ':' + std::to_string(nic.port) : nic.name;
  }
  return out;
}

}  // namespace thub::topo
