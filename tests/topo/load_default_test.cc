// Topology::load_default: a recorded topology when given (the info key topology_xml, from
// TENSORHUB_TOPOLOGY_XML), else this machine is probed.
#include <gtest/gtest.h>

#include <string>

#include "tests/topo/fixtures.h"
#include "topo/topology.h"

namespace thub::topo {
namespace {

TEST(LoadDefaultTest, HonoursTopologyXml) {
  std::string err;
  auto t = Topology::load_default(test::fixture(test::kHgx), &err);
  EXPECT_EQ(err, "");
  EXPECT_EQ(t->gpus().size(), 8u);
  EXPECT_EQ(t->ucx_net_devices(Location::gpu_at("0000:d3:00.0")), "mlx5_6:1");
}

TEST(LoadDefaultTest, BadTopologyXmlIsAnErrorNotTheMachine) {
  std::string err;
  auto t = Topology::load_default(test::fixture("no_such_file.xml"), &err);
  ASSERT_NE(t, nullptr);
  EXPECT_NE(err.find("no_such_file.xml"), std::string::npos) << err;
  EXPECT_EQ(t->numa_nodes(), 0);
  EXPECT_EQ(t->ucx_net_devices(Location::host(-1)), "");
}

TEST(LoadDefaultTest, EmptyXmlProbesThisMachine) {
  std::string err;
  auto t = Topology::load_default("", &err);
  EXPECT_EQ(err, "");
  EXPECT_GE(t->numa_nodes(), 1);
  EXPECT_NE(t->describe().find("this machine"), std::string::npos);
}

}  // namespace
}  // namespace thub::topo
