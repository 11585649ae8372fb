// The context's NIC choice (issue 21 item 5): UCX_NET_DEVICES from where its tensors live, the
// info key `device`, on a recorded 8-GPU, 8-NIC node; net_devices given wins; a bad device is
// THUB_ERR_ARG naming the key.
#include <gtest/gtest.h>

#include <string>

#include "src/client/context.h"
#include "src/common/status.h"
#include "topo/topology.h"

namespace thub::client {
namespace {

const std::string kHgxFixture = std::string(THUB_TOPO_FIXTURES) + "/hgx_8gpu_8nic.xml";

TEST(ContextNicTest, AContextOnGpuIOfTheHgxNodeUsesMlx5I) {
  std::string err;
  auto t = topo::Topology::load_xml(kHgxFixture, &err);
  ASSERT_EQ(err, "");
  for (int i = 0; i < 8; ++i) {
    InfoMap info;
    info.set("device", "cuda:" + std::to_string(i));
    const ContextConfig c = ContextConfig::from_info(info);
    std::string why;
    EXPECT_EQ(nic_choice(c, *t, 0, &why), "mlx5_" + std::to_string(i) + ":1");
    EXPECT_NE(why.find("PCI switch"), std::string::npos) << why;
  }
  InfoMap host;
  host.set("device", "numa:1");
  EXPECT_EQ(nic_choice(ContextConfig::from_info(host), *t, 0, nullptr), "mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
  InfoMap fallback;  // auto: this thread's NUMA node
  EXPECT_EQ(nic_choice(ContextConfig::from_info(fallback), *t, 1, nullptr), "mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
}

TEST(ContextNicTest, NetDevicesGivenWinAndABadDeviceIsAnArgumentError) {
  std::string err;
  auto t = topo::Topology::load_xml(kHgxFixture, &err);
  InfoMap info;
  info.set("device", "cuda:2");
  info.set("net_devices", "mlx5_7:1");
  std::string why;
  EXPECT_EQ(nic_choice(ContextConfig::from_info(info), *t, 0, &why), "mlx5_7:1");
  EXPECT_EQ(why, "net_devices given");
  InfoMap bad;
  bad.set("device", "gpu:1");
  try {
    (void)ContextConfig::from_info(bad);
    ADD_FAILURE() << "a bad device was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kArg);
    EXPECT_NE(std::string(e.what()).find("'device'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace thub::client
