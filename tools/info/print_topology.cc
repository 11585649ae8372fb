#include "tools/info/print_topology.h"

#include <cstdio>
#include <string>
#include <vector>

namespace thub::info {
namespace {

std::string names(const std::vector<topo::Nic>& nics) {
  std::string out;
  for (const topo::Nic& n : nics) out += (out.empty() ? "" : ",") + n.name;
  return out.empty() ? "-" : out;
}

void print_choice(std::ostream& out, const topo::Topology& t, const std::string& what,
                  const topo::Location& loc) {
  const std::string devices = t.ucx_net_devices(loc);
  const std::string proximity = t.proximity(loc);
  char line[512];
  std::snprintf(line, sizeof line, "  %-24s %-12s %s\n", what.c_str(),
                proximity.empty() ? "-" : proximity.c_str(), names(t.nearest_nics(loc)).c_str());
  out << line;
  std::snprintf(line, sizeof line, "  %-24s %-12s UCX_NET_DEVICES=%s\n", "", "",
                devices.empty() ? "(unset: UCX chooses)" : devices.c_str());
  out << line;
}

}  // namespace

void print_topology(std::ostream& out, const topo::Topology& t) {
  out << t.describe();
  out << "NIC choice per buffer location (nearest NICs, how near, UCX_NET_DEVICES):\n";
  for (const topo::Gpu& g : t.gpus()) {
    print_choice(out, t, "gpu " + std::to_string(g.index) + " " + g.pci_bus,
                 topo::Location::gpu_at(g.pci_bus));
  }
  for (int numa : t.numa_ids()) {
    print_choice(out, t, "host numa " + std::to_string(numa), topo::Location::host(numa));
  }
  print_choice(out, t, "host, any numa", topo::Location::host(-1));
}

}  // namespace thub::info
