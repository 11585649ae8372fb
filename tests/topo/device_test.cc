// Where a context's tensors live (the info key `device`, issue 21 item 5) and the NICs that
// gives: on the 8-GPU, 8-NIC fixture a context on GPU i uses mlx5_i only.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tests/topo/fixtures.h"
#include "topo/device.h"
#include "topo/topology.h"

namespace thub::topo {
namespace {

using test::load;

std::string devices_for(const Topology& t, const std::string& device, int current_numa, std::string* note = nullptr) {
  std::string why;
  auto d = parse_device(device, &why);
  EXPECT_TRUE(d) << why;
  return d ? t.ucx_net_devices(buffer_location(*d, t, current_numa, note)) : std::string();
}

TEST(DeviceTest, ParsesItsFourForms) {
  std::string why;
  for (const char* ok : {"", "auto", "host", "numa:0", "numa:3", "cuda:0", "cuda:7"}) EXPECT_TRUE(parse_device(ok, &why)) << ok;
  EXPECT_EQ(parse_device("cuda:7", nullptr)->kind, DeviceSpec::Kind::kCuda);
  EXPECT_EQ(parse_device("cuda:7", nullptr)->index, 7);
  EXPECT_EQ(parse_device("numa:3", nullptr)->kind, DeviceSpec::Kind::kNuma);
  for (const char* bad : {"cuda", "cuda:", "cuda:x", "cuda:-1", "gpu:1", "numa", "numa:1.5", "cuda:12345678", "HOST"}) {
    why.clear();
    EXPECT_FALSE(parse_device(bad, &why)) << bad;
    EXPECT_NE(why.find("auto, host, numa:N, cuda:N"), std::string::npos) << why;
  }
}

TEST(DeviceTest, OnTheHgxNodeAContextOnGpuIUsesMlx5IOnly) {
  auto t = load(test::kHgx);
  ASSERT_EQ(t->gpus().size(), 8u);
  for (int i = 0; i < 8; ++i) {
    std::string note;
    EXPECT_EQ(devices_for(*t, "cuda:" + std::to_string(i), 0, &note), "mlx5_" + std::to_string(i) + ":1");
    EXPECT_NE(note.find("CUDA device " + std::to_string(i)), std::string::npos) << note;
  }
}

TEST(DeviceTest, HostMemoryTakesItsNumaNodesNics) {
  auto t = load(test::kHgx);
  EXPECT_EQ(devices_for(*t, "numa:1", 0), "mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
  EXPECT_EQ(devices_for(*t, "auto", 0), "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1");  // this thread's node
  EXPECT_EQ(devices_for(*t, "auto", 1), "mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
  EXPECT_EQ(devices_for(*t, "host", 1), "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
}

TEST(DeviceTest, AGpuTheTopologyDoesNotKnowFallsBackToThisThreadsNode) {
  auto t = load(test::kHgx);
  std::string note;
  EXPECT_EQ(devices_for(*t, "cuda:9", 1, &note), "mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
  EXPECT_NE(note.find("not in the topology"), std::string::npos) << note;
}

TEST(DeviceTest, ThisThreadsNumaNodeIsOneOfTheMachines) {
  const int node = current_numa_node();
  ASSERT_GE(node, 0);
  std::string err;
  auto t = Topology::load_machine(&err);
  const std::vector<int> ids = t->numa_ids();
  if (!ids.empty()) {
    EXPECT_NE(std::find(ids.begin(), ids.end(), node), ids.end());
  }
}

}  // namespace
}  // namespace thub::topo
