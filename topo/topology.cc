// Topology over a detected MachineModel: the loaders (hwloc probe or XML) and the
// planning queries, which delegate to nic_choice.
#include "topo/topology.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "topo/detect.h"
#include "topo/hwloc_topology.h"
#include "topo/nic_choice.h"
#include "topo/verbs.h"

namespace thub::topo {
namespace {

class MachineTopology final : public Topology {
 public:
  explicit MachineTopology(MachineModel m) : m_(std::move(m)) {}

  const std::vector<Nic>& nics() const override { return m_.nics; }
  const std::vector<Gpu>& gpus() const override { return m_.gpus; }
  int numa_nodes() const override { return static_cast<int>(m_.numa_nodes.size()); }

  std::vector<int> numa_ids() const override {
    std::vector<int> ids;
    for (const NumaNode& n : m_.numa_nodes) ids.push_back(n.id);
    return ids;
  }

  std::vector<Nic> nearest_nics(const Location& loc) const override {
    std::vector<Nic> out;
    for (const RankedNic& r : topo::nearest_nics(m_, loc, /*rdma_only=*/false)) {
      out.push_back(m_.nics[r.index]);
    }
    return out;
  }

  std::string ucx_net_devices(const Location& loc) const override {
    return topo::ucx_net_devices(m_, loc);
  }

  std::string proximity(const Location& loc) const override {
    const std::vector<RankedNic> near = topo::nearest_nics(m_, loc, /*rdma_only=*/false);
    return near.empty() ? std::string() : proximity_name(near.front().distance.tier);
  }

  std::string describe() const override;

 private:
  MachineModel m_;
};

std::string numa_text(int numa) { return numa < 0 ? "?" : std::to_string(numa); }

std::string MachineTopology::describe() const {
  std::string out = "topology: " + (m_.source.empty() ? std::string("empty") : m_.source) + "\n";
  char line[256];
  out += "NUMA nodes: " + std::to_string(m_.numa_nodes.size()) + "\n";
  for (const NumaNode& n : m_.numa_nodes) {
    std::snprintf(line, sizeof line, "  numa %-3d package %s\n", n.id,
                  numa_text(n.package).c_str());
    out += line;
  }
  out += "GPUs: " + std::to_string(m_.gpus.size()) + "\n";
  for (const Gpu& g : m_.gpus) {
    std::snprintf(line, sizeof line, "  gpu %-3d %-14s numa %s\n", g.index, g.pci_bus.c_str(),
                  numa_text(g.numa).c_str());
    out += line;
  }
  out += "NICs: " + std::to_string(m_.nics.size()) +
         (m_.verbs.empty() ? std::string() : " (port facts: " + m_.verbs + ")") + "\n";
  for (const Nic& n : m_.nics) {
    const std::string kind = n.rdma ? "rdma port " + std::to_string(n.port) : "net";
    std::string facts = n.active ? "" : "  DOWN (never chosen)";
    if (n.active && n.gbps > 0) {
      char rate[64];
      std::snprintf(rate, sizeof rate, "  %.0f Gb/s", n.gbps);
      facts = rate;
    }
    if (!n.link_layer.empty()) facts += " " + n.link_layer;
    std::snprintf(line, sizeof line, "  %-14s %-12s %-14s numa %s%s\n", n.name.c_str(), kind.c_str(),
                  n.pci_bus.empty() ? "-" : n.pci_bus.c_str(), numa_text(n.numa).c_str(), facts.c_str());
    out += line;
  }
  return out;
}

std::unique_ptr<Topology> load(const std::string& xml_path, const std::string& origin,
                               std::string* err) {
  std::optional<HwlocTopology> hw = HwlocTopology::load(xml_path, err);
  if (!hw) return std::make_unique<MachineTopology>(MachineModel{});
  return std::make_unique<MachineTopology>(detect(*hw, origin));
}

}  // namespace

std::vector<int> Topology::numa_ids() const {
  std::vector<int> ids;
  for (int i = 0; i < numa_nodes(); ++i) ids.push_back(i);
  return ids;
}

std::unique_ptr<Topology> Topology::load_machine(std::string* err) {
  std::optional<HwlocTopology> hw = HwlocTopology::load({}, err);
  if (!hw) return std::make_unique<MachineTopology>(MachineModel{});
  MachineModel m = detect(*hw, "this machine");
  // Which RDMA ports are up and how fast: rdma-core's word, where it has one (a recorded XML
  // is not this machine: its NICs keep what hwloc recorded).
  std::string why;
  apply_port_facts(m, probe_verbs(&why));
  m.verbs = why.empty() ? "rdma-core" : why;
  return std::make_unique<MachineTopology>(std::move(m));
}

std::unique_ptr<Topology> Topology::load_xml(const std::string& path, std::string* err) {
  if (path.empty()) {
    if (err) *err = "topology XML path is empty";
    return std::make_unique<MachineTopology>(MachineModel{});
  }
  return load(path, "hwloc XML " + path, err);
}

std::unique_ptr<Topology> Topology::load_default(const std::string& xml, std::string* err) {
  if (!xml.empty()) return load_xml(xml, err);
  return load_machine(err);
}

}  // namespace thub::topo
