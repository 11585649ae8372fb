// Topology::load_machine on the machine the tests run on, whatever it has.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "topo/pci_bus.h"
#include "topo/topology.h"

namespace thub::topo {
namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

TEST(MachineProbeTest, FindsAtLeastOneNumaNode) {
  std::string err;
  auto t = Topology::load_machine(&err);
  ASSERT_EQ(err, "");
  EXPECT_GE(t->numa_nodes(), 1);
  EXPECT_EQ(t->numa_ids().size(), static_cast<size_t>(t->numa_nodes()));
  EXPECT_NE(t->describe().find("this machine"), std::string::npos);
}

TEST(MachineProbeTest, DevicesAreWellFormed) {
  std::string err;
  auto t = Topology::load_machine(&err);
  ASSERT_EQ(err, "");
  for (const Nic& n : t->nics()) {
    EXPECT_FALSE(n.name.empty());
    EXPECT_NE(n.name, "lo");
    if (!n.pci_bus.empty()) {
      EXPECT_EQ(normalize_pci_bus(n.pci_bus), n.pci_bus) << n.name;
    }
    EXPECT_GE(n.port, 1) << n.name;
  }
  for (const Gpu& g : t->gpus()) EXPECT_EQ(normalize_pci_bus(g.pci_bus), g.pci_bus);
}

TEST(MachineProbeTest, UcxNetDevicesNameKnownNicsAndNeverLoopback) {
  std::string err;
  auto t = Topology::load_machine(&err);
  ASSERT_EQ(err, "");
  std::vector<Location> locs = {Location::host(-1)};
  for (int id : t->numa_ids()) locs.push_back(Location::host(id));
  for (const Gpu& g : t->gpus()) locs.push_back(Location::gpu_at(g.pci_bus));
  for (const Location& loc : locs) {
    const std::string devices = t->ucx_net_devices(loc);
    EXPECT_EQ(devices.empty(), t->nics().empty()) << devices;
    for (const std::string& d : split(devices)) {
      const std::string name = d.substr(0, d.find(':'));
      EXPECT_NE(name, "lo");
      bool known = false;
      for (const Nic& n : t->nics()) known = known || n.name == name;
      EXPECT_TRUE(known) << d;
    }
  }
}

}  // namespace
}  // namespace thub::topo
