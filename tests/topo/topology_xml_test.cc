// Loading hwloc XML: what detection finds on each fixture, and errors instead of crashes.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "tests/topo/fixtures.h"
#include "topo/topology.h"

namespace thub::topo {
namespace {

using test::fixture;

std::unique_ptr<Topology> load_ok(const std::string& name) {
  std::string err;
  auto t = Topology::load_xml(fixture(name), &err);
  EXPECT_EQ(err, "") << name;
  return t;
}

const Nic* find_nic(const Topology& t, const std::string& name) {
  for (const Nic& n : t.nics()) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

TEST(TopologyXmlTest, HgxFindsEightGpusInPciOrderWithCudaIndex) {
  auto t = load_ok(test::kHgx);
  ASSERT_EQ(t->gpus().size(), 8u);  // the BMC's ASPEED VGA is not one of them
  const char* bus[] = {"0000:13:00.0", "0000:33:00.0", "0000:53:00.0", "0000:73:00.0",
                       "0000:93:00.0", "0000:b3:00.0", "0000:d3:00.0", "0000:f3:00.0"};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(t->gpus()[i].index, i);
    EXPECT_EQ(t->gpus()[i].pci_bus, bus[i]);
    EXPECT_EQ(t->gpus()[i].numa, i < 4 ? 0 : 1);
  }
}

TEST(TopologyXmlTest, HgxFindsRdmaAndNetworkNicsButNoDisk) {
  auto t = load_ok(test::kHgx);
  EXPECT_EQ(t->numa_nodes(), 2);
  EXPECT_EQ(t->numa_ids(), (std::vector<int>{0, 1}));
  ASSERT_EQ(t->nics().size(), 17u);  // 8 mlx5, their 8 IPoIB netdevs, eno1; not nvme0n1
  for (int i = 0; i < 8; ++i) {
    const Nic* n = find_nic(*t, "mlx5_" + std::to_string(i));
    ASSERT_NE(n, nullptr) << i;
    EXPECT_TRUE(n->rdma);
    EXPECT_EQ(n->port, 1);
    EXPECT_EQ(n->numa, i < 4 ? 0 : 1);
  }
  EXPECT_EQ(find_nic(*t, "mlx5_0")->pci_bus, "0000:14:00.0");
  EXPECT_EQ(find_nic(*t, "ibp20s0")->pci_bus, "0000:14:00.0");
  const Nic* eno = find_nic(*t, "eno1");
  ASSERT_NE(eno, nullptr);
  EXPECT_FALSE(eno->rdma);
  EXPECT_EQ(eno->numa, 0);
  EXPECT_EQ(eno->pci_bus, "0000:05:00.0");
  EXPECT_EQ(find_nic(*t, "nvme0n1"), nullptr);
}

TEST(TopologyXmlTest, CpuNodeHasOneRdmaNicPerSocket) {
  auto t = load_ok(test::kCpuNode);
  EXPECT_EQ(t->numa_nodes(), 2);
  EXPECT_TRUE(t->gpus().empty());
  ASSERT_NE(find_nic(*t, "mlx5_0"), nullptr);
  ASSERT_NE(find_nic(*t, "mlx5_1"), nullptr);
  EXPECT_EQ(find_nic(*t, "mlx5_0")->numa, 0);
  EXPECT_EQ(find_nic(*t, "mlx5_1")->numa, 1);
  EXPECT_EQ(find_nic(*t, "mlx5_1")->pci_bus, "0000:c2:00.0");
  ASSERT_NE(find_nic(*t, "enp194s0np0"), nullptr);
  EXPECT_EQ(find_nic(*t, "enp194s0np0")->numa, 1);
  ASSERT_NE(find_nic(*t, "eno1"), nullptr);
  EXPECT_FALSE(find_nic(*t, "eno1")->rdma);
}

TEST(TopologyXmlTest, EthOnlyNodeNumbersGpusOfBothClassesInPciOrder) {
  auto t = load_ok(test::kEthOnly);
  ASSERT_EQ(t->gpus().size(), 2u);  // a 3D controller (0302) and a VGA one (0300)
  EXPECT_EQ(t->gpus()[0].index, 0);
  EXPECT_EQ(t->gpus()[0].pci_bus, "0000:23:00.0");
  EXPECT_EQ(t->gpus()[1].index, 1);
  EXPECT_EQ(t->gpus()[1].pci_bus, "0000:61:00.0");
  ASSERT_EQ(t->nics().size(), 2u);
  for (const Nic& n : t->nics()) EXPECT_FALSE(n.rdma) << n.name;
}

TEST(TopologyXmlTest, DescribeNamesSourceAndDevices) {
  auto t = load_ok(test::kHgx);
  const std::string d = t->describe();
  EXPECT_NE(d.find("hgx_8gpu_8nic.xml"), std::string::npos);
  EXPECT_NE(d.find("host hgx-h100"), std::string::npos);
  EXPECT_NE(d.find("GPUs: 8"), std::string::npos);
  EXPECT_NE(d.find("mlx5_7"), std::string::npos);
}

void expect_empty_with_error(const Topology& t, const std::string& err) {
  EXPECT_FALSE(err.empty());
  EXPECT_TRUE(t.nics().empty());
  EXPECT_TRUE(t.gpus().empty());
  EXPECT_EQ(t.numa_nodes(), 0);
  EXPECT_EQ(t.ucx_net_devices(Location::host(-1)), "");
  EXPECT_TRUE(t.nearest_nics(Location::gpu_at("0000:13:00.0")).empty());
}

TEST(TopologyXmlTest, MissingFileIsAnError) {
  std::string err;
  auto t = Topology::load_xml(fixture("no_such_file.xml"), &err);
  ASSERT_NE(t, nullptr);
  expect_empty_with_error(*t, err);
  EXPECT_NE(err.find("no_such_file.xml"), std::string::npos) << err;
}

TEST(TopologyXmlTest, DirectoryIsAnError) {
  std::string err;
  auto t = Topology::load_xml(THUB_TOPO_FIXTURES, &err);
  ASSERT_NE(t, nullptr);
  expect_empty_with_error(*t, err);
}

TEST(TopologyXmlTest, NonXmlFileIsAnError) {
  const std::string path = ::testing::TempDir() + "topo_not_xml.xml";
  std::ofstream(path) << "this is not a topology\n<topology";
  std::string err;
  auto t = Topology::load_xml(path, &err);
  std::remove(path.c_str());
  ASSERT_NE(t, nullptr);
  expect_empty_with_error(*t, err);
}

TEST(TopologyXmlTest, EmptyPathIsAnErrorAndNullErrIsAllowed) {
  std::string err;
  expect_empty_with_error(*Topology::load_xml("", &err), err);
  auto t = Topology::load_xml(fixture("no_such_file.xml"), nullptr);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->nics().empty());
}

}  // namespace
}  // namespace thub::topo
