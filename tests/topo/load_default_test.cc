// Topology::load_default: TENSORHUB_TOPOLOGY_XML picks a recorded topology, else this
// machine is probed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/topo/fixtures.h"
#include "topo/topology.h"

namespace thub::topo {
namespace {

constexpr const char* kEnv = "TENSORHUB_TOPOLOGY_XML";

class LoadDefaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv(kEnv);
    had_ = old != nullptr;
    if (had_) old_ = old;
  }
  void TearDown() override {
    if (had_) setenv(kEnv, old_.c_str(), 1);
    else unsetenv(kEnv);
  }

 private:
  bool had_ = false;
  std::string old_;
};

TEST_F(LoadDefaultTest, HonoursTopologyXmlEnv) {
  setenv(kEnv, test::fixture(test::kHgx).c_str(), 1);
  std::string err;
  auto t = Topology::load_default(&err);
  EXPECT_EQ(err, "");
  EXPECT_EQ(t->gpus().size(), 8u);
  EXPECT_EQ(t->ucx_net_devices(Location::gpu_at("0000:d3:00.0")), "mlx5_6:1");
}

TEST_F(LoadDefaultTest, BadTopologyXmlEnvIsAnErrorNotTheMachine) {
  setenv(kEnv, test::fixture("no_such_file.xml").c_str(), 1);
  std::string err;
  auto t = Topology::load_default(&err);
  ASSERT_NE(t, nullptr);
  EXPECT_NE(err.find("no_such_file.xml"), std::string::npos) << err;
  EXPECT_EQ(t->numa_nodes(), 0);
  EXPECT_EQ(t->ucx_net_devices(Location::host(-1)), "");
}

TEST_F(LoadDefaultTest, WithoutEnvProbesThisMachine) {
  unsetenv(kEnv);
  std::string err;
  auto t = Topology::load_default(&err);
  EXPECT_EQ(err, "");
  EXPECT_GE(t->numa_nodes(), 1);
  EXPECT_NE(t->describe().find("this machine"), std::string::npos);
}

TEST_F(LoadDefaultTest, EmptyEnvProbesThisMachine) {
  setenv(kEnv, "", 1);
  std::string err;
  auto t = Topology::load_default(&err);
  EXPECT_EQ(err, "");
  EXPECT_NE(t->describe().find("this machine"), std::string::npos);
}

}  // namespace
}  // namespace thub::topo
