// Which NICs a worker serving a buffer gets: per GPU, per NUMA node, and the
// UCX_NET_DEVICES string, on the fixtures and on a hand-built model.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/topo/fixtures.h"
#include "topo/nic_choice.h"
#include "topo/topology.h"

namespace thub::topo {
namespace {

using test::load;

std::vector<std::string> names(const std::vector<Nic>& nics) {
  std::vector<std::string> out;
  for (const Nic& n : nics) out.push_back(n.name);
  return out;
}

TEST(NicChoiceTest, HgxGpuIGetsMlx5IOnItsPciSwitch) {
  auto t = load(test::kHgx);
  ASSERT_EQ(t->gpus().size(), 8u);
  for (const Gpu& g : t->gpus()) {
    const std::string mlx = "mlx5_" + std::to_string(g.index);
    const Location loc = Location::gpu_at(g.pci_bus);
    const std::vector<Nic> near = t->nearest_nics(loc);
    ASSERT_FALSE(near.empty()) << g.pci_bus;
    EXPECT_EQ(near.front().name, mlx);
    EXPECT_TRUE(near.front().rdma);
    EXPECT_EQ(near.size(), 2u);  // and its IPoIB netdev, after it
    EXPECT_EQ(t->ucx_net_devices(loc), mlx + ":1");
    EXPECT_EQ(t->proximity(loc), "PCI switch");
  }
}

TEST(NicChoiceTest, GpuBusIdMatchesInAnySpelling) {
  auto t = load(test::kHgx);
  EXPECT_EQ(t->ucx_net_devices(Location::gpu_at("00000000:B3:00.0")), "mlx5_5:1");
  EXPECT_EQ(t->ucx_net_devices(Location::gpu_at("0000:B3:00.0")), "mlx5_5:1");
  EXPECT_EQ(t->ucx_net_devices(Location::gpu_at("b3:00.0")), "mlx5_5:1");
}

TEST(NicChoiceTest, HgxHostMemoryGetsItsSocketsNics) {
  auto t = load(test::kHgx);
  EXPECT_EQ(t->ucx_net_devices(Location::host(0)), "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1");
  EXPECT_EQ(t->ucx_net_devices(Location::host(1)), "mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
  const std::vector<std::string> near0 = names(t->nearest_nics(Location::host(0)));
  ASSERT_EQ(near0.size(), 9u);  // 4 mlx5 first, then eno1 and the 4 IPoIB netdevs
  EXPECT_EQ(std::vector<std::string>(near0.begin(), near0.begin() + 4),
            (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}));
  EXPECT_EQ(near0[4], "eno1");
  EXPECT_EQ(t->proximity(Location::host(0)), "NUMA node");
}

TEST(NicChoiceTest, AnyNumaGetsAllRdmaNics) {
  auto t = load(test::kHgx);
  EXPECT_EQ(t->ucx_net_devices(Location::host(-1)),
            "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
  const std::vector<Nic> all = t->nearest_nics(Location::host(-1));
  ASSERT_EQ(all.size(), t->nics().size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].rdma, i < 8) << all[i].name;
}

TEST(NicChoiceTest, UnknownGpuFallsBackToItsNumaNode) {
  auto t = load(test::kHgx);
  Location loc = Location::gpu_at("0000:99:00.0");
  loc.numa = 1;
  EXPECT_EQ(t->ucx_net_devices(loc), "mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
}

TEST(NicChoiceTest, CpuNodeGetsTheRdmaNicOfEachSocket) {
  auto t = load(test::kCpuNode);
  EXPECT_EQ(t->ucx_net_devices(Location::host(0)), "mlx5_0:1");
  EXPECT_EQ(t->ucx_net_devices(Location::host(1)), "mlx5_1:1");
  EXPECT_EQ(t->ucx_net_devices(Location::host(-1)), "mlx5_0:1,mlx5_1:1");
  EXPECT_EQ(names(t->nearest_nics(Location::host(1))),
            (std::vector<std::string>{"mlx5_1", "enp194s0np0"}));
}

TEST(NicChoiceTest, NoRdmaFallsBackToEthernet) {
  auto t = load(test::kEthOnly);
  ASSERT_EQ(t->gpus().size(), 2u);
  EXPECT_EQ(t->ucx_net_devices(Location::gpu_at(t->gpus()[0].pci_bus)), "eth0");
  EXPECT_EQ(t->proximity(Location::gpu_at(t->gpus()[0].pci_bus)), "PCI switch");
  EXPECT_EQ(t->ucx_net_devices(Location::gpu_at(t->gpus()[1].pci_bus)), "eth1");
  EXPECT_EQ(t->proximity(Location::gpu_at(t->gpus()[1].pci_bus)), "host bridge");
  EXPECT_EQ(t->ucx_net_devices(Location::host(0)), "eth0,eth1");
}

// Hand-built: a GPU whose switch holds a plain Ethernet port while the RDMA NIC is on the
// other socket. The nearest NIC is the Ethernet one, but UCX gets the RDMA one.
TEST(NicChoiceTest, FarRdmaNicBeatsNearEthernetForUcx) {
  const Hop machine{1, HopKind::kCpuSide}, pkg0{10, HopKind::kCpuSide}, pkg1{20, HopKind::kCpuSide};
  const Hop hb0{100, HopKind::kHostBridge}, sw{101, HopKind::kPciBridge};
  MachineModel m;
  m.numa_nodes = {{0, 0}, {1, 1}};
  m.gpus = {Gpu{0, "0000:02:00.0", 0}};
  m.gpu_sites = {Site{{machine, pkg0, hb0, sw, {102, HopKind::kPciDevice}}, {0}, 0}};
  m.nics = {Nic{"eth0", false, 0, "0000:03:00.0", 1, true, 0, ""}, Nic{"mlx5_0", true, 1, "0000:81:00.0", 1, true, 0, ""}};
  m.nic_sites = {Site{{machine, pkg0, hb0, sw, {103, HopKind::kPciDevice}}, {0}, 0},
                 Site{{machine, pkg1, {200, HopKind::kHostBridge}, {201, HopKind::kPciDevice}},
                      {1}, 1}};
  const Location loc = Location::gpu_at("0000:02:00.0");
  const std::vector<RankedNic> near = nearest_nics(m, loc, /*rdma_only=*/false);
  ASSERT_EQ(near.size(), 1u);
  EXPECT_EQ(m.nics[near.front().index].name, "eth0");
  EXPECT_EQ(ucx_net_devices(m, loc), "mlx5_0:1");
}

TEST(NicChoiceTest, RdmaPortIsTheActiveOne) {
  MachineModel m;
  m.nics = {Nic{"mlx5_0", true, -1, "", 2, true, 0, ""}};
  m.nic_sites = {Site{}};
  EXPECT_EQ(ucx_net_devices(m, Location::host(-1)), "mlx5_0:2");
}

TEST(NicChoiceTest, NoNicLetsUcxChoose) {
  MachineModel m;
  EXPECT_EQ(ucx_net_devices(m, Location::host(0)), "");
  EXPECT_TRUE(nearest_nics(m, Location::gpu_at("0000:13:00.0"), false).empty());
}

}  // namespace
}  // namespace thub::topo
