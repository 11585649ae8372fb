// NIC facts from rdma-core (issue 21 item 5): a NIC whose ports are all down is never chosen,
// equally near rails go fastest first, the port UCX is given is the first one up; on a machine
// without RDMA devices the probe reports none and says why.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/topo/fixtures.h"
#include "topo/detect.h"
#include "topo/hwloc_topology.h"
#include "topo/nic_choice.h"
#include "topo/verbs.h"

namespace thub::topo {
namespace {

MachineModel model(const std::string& name) {
  std::string err;
  std::optional<HwlocTopology> hw = HwlocTopology::load(test::fixture(name), &err);
  EXPECT_TRUE(hw) << err;
  return hw ? detect(*hw, name) : MachineModel{};
}

// Every RDMA NIC of m up on port 1 at `gbps` (HDR 4x: 200), InfiniBand.
std::vector<PortFacts> all_up(const MachineModel& m, double gbps = 200) {
  std::vector<PortFacts> f;
  for (const Nic& n : m.nics)
    if (n.rdma) f.push_back(PortFacts{n.name, 1, true, gbps, "InfiniBand"});
  return f;
}

void set(std::vector<PortFacts>& f, const std::string& dev, bool active, double gbps = 200) {
  for (PortFacts& p : f)
    if (p.device == dev) {
      p.active = active;
      p.gbps = gbps;
    }
}

TEST(VerbsTest, RatesFromTheVerbsCodes) {
  EXPECT_DOUBLE_EQ(verbs_rate_gbps(64, 2), 200.0);   // HDR 4x
  EXPECT_DOUBLE_EQ(verbs_rate_gbps(128, 2), 400.0);  // NDR 4x
  EXPECT_DOUBLE_EQ(verbs_rate_gbps(32, 2), 100.0);   // EDR 4x
  EXPECT_DOUBLE_EQ(verbs_rate_gbps(64, 16), 100.0);  // HDR 2x
  EXPECT_DOUBLE_EQ(verbs_rate_gbps(3, 2), 0.0);      // unknown speed
  EXPECT_DOUBLE_EQ(verbs_rate_gbps(64, 3), 0.0);     // unknown width
}

TEST(VerbsTest, AGpusOwnNicDownIsNeverChosen) {
  MachineModel m = model(test::kHgx);
  ASSERT_EQ(m.gpus.size(), 8u);
  const Location gpu0 = Location::gpu_at(m.gpus[0].pci_bus);
  std::vector<PortFacts> f = all_up(m);
  apply_port_facts(m, f);
  EXPECT_EQ(ucx_net_devices(m, gpu0), "mlx5_0:1");
  set(f, "mlx5_0", false);
  MachineModel down = model(test::kHgx);
  apply_port_facts(down, f);
  const std::string devices = ucx_net_devices(down, gpu0);
  EXPECT_FALSE(devices.empty());
  EXPECT_EQ(devices.find("mlx5_0:"), std::string::npos) << devices;
  for (const RankedNic& r : rank_nics(down, gpu0)) EXPECT_NE(down.nics[r.index].name, "mlx5_0");
  // The other GPUs keep their own.
  for (size_t i = 1; i < down.gpus.size(); ++i)
    EXPECT_EQ(ucx_net_devices(down, Location::gpu_at(down.gpus[i].pci_bus)), "mlx5_" + std::to_string(i) + ":1");
}

TEST(VerbsTest, EquallyNearRailsGoFastestFirst) {
  MachineModel m = model(test::kHgx);
  EXPECT_EQ(ucx_net_devices(m, Location::host(0)), "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1");  // unknown rates: tree order
  std::vector<PortFacts> f = all_up(m);
  set(f, "mlx5_2", true, 400);
  set(f, "mlx5_1", true, 100);
  apply_port_facts(m, f);
  EXPECT_EQ(ucx_net_devices(m, Location::host(0)), "mlx5_2:1,mlx5_0:1,mlx5_3:1,mlx5_1:1");
}

TEST(VerbsTest, TheFirstPortUpIsTheOneUcxIsGiven) {
  MachineModel m = model(test::kHgx);
  std::vector<PortFacts> f = all_up(m);
  set(f, "mlx5_0", false);
  f.push_back(PortFacts{"mlx5_0", 2, true, 200, "Ethernet"});
  apply_port_facts(m, f);
  EXPECT_EQ(ucx_net_devices(m, Location::gpu_at(m.gpus[0].pci_bus)), "mlx5_0:2");
  const auto it = std::find_if(m.nics.begin(), m.nics.end(), [](const Nic& n) { return n.name == "mlx5_0"; });
  ASSERT_NE(it, m.nics.end());
  EXPECT_EQ(it->link_layer, "Ethernet");
  EXPECT_DOUBLE_EQ(it->gbps, 200.0);
}

TEST(VerbsTest, FactsOfDevicesItDoesNotHaveChangeNothing) {
  MachineModel m = model(test::kCpuNode);
  const std::string before = ucx_net_devices(m, Location::host(-1));
  apply_port_facts(m, {PortFacts{"mlx5_9", 1, false, 0, ""}, PortFacts{"eno1", 1, false, 0, ""}});
  EXPECT_EQ(ucx_net_devices(m, Location::host(-1)), before);
}

TEST(VerbsTest, ThisMachinesProbeSaysWhyItHasNone) {
  std::string why;
  const std::vector<PortFacts> ports = probe_verbs(&why);
  if (!ports.empty()) GTEST_SKIP() << "this machine has RDMA ports (" << ports.size() << "): nothing to check here";
  EXPECT_FALSE(why.empty());
  // The running machine's topology then keeps hwloc's view, and names where its facts came from.
  auto t = Topology::load_machine(&why);
  EXPECT_NE(t->describe().find("port facts: "), std::string::npos) << t->describe();
}

}  // namespace
}  // namespace thub::topo
