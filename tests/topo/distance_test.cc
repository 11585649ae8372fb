// The distance rule on hand-built sites: same PCI switch < same host bridge < same NUMA
// node < same package < system, and a deeper shared bridge is nearer.
#include "topo/distance.h"

#include <gtest/gtest.h>

namespace thub::topo {
namespace {

constexpr HopKind kCpu = HopKind::kCpuSide;
constexpr HopKind kHost = HopKind::kHostBridge;
constexpr HopKind kBridge = HopKind::kPciBridge;
constexpr HopKind kDev = HopKind::kPciDevice;

Site site(std::vector<Hop> path, std::vector<int> numa, int package) {
  return Site{std::move(path), std::move(numa), package};
}

// Machine(1) > Package 0 (10) > host bridge 100 > root port 101 > switch up 102 >
// downstream ports 103 (GPU 104) and 105 (NIC 106); root port 107 > NIC 108.
const Site kGpu = site({{1, kCpu}, {10, kCpu}, {100, kHost}, {101, kBridge}, {102, kBridge},
                        {103, kBridge}, {104, kDev}}, {0}, 0);
const Site kNicSameSwitch = site({{1, kCpu}, {10, kCpu}, {100, kHost}, {101, kBridge},
                                  {102, kBridge}, {105, kBridge}, {106, kDev}}, {0}, 0);
const Site kNicSameHostBridge = site({{1, kCpu}, {10, kCpu}, {100, kHost}, {107, kBridge},
                                      {108, kDev}}, {0}, 0);
const Site kNicSameNuma = site({{1, kCpu}, {10, kCpu}, {200, kHost}, {201, kDev}}, {0}, 0);
const Site kNicOtherNumaSamePackage = site({{1, kCpu}, {10, kCpu}, {11, kCpu}, {300, kHost},
                                            {301, kDev}}, {1}, 0);
const Site kNicOtherSocket = site({{1, kCpu}, {20, kCpu}, {400, kHost}, {401, kDev}}, {2}, 1);

TEST(DistanceTest, TiersFollowThePciPath) {
  EXPECT_EQ(device_distance(kGpu, kNicSameSwitch).tier, Proximity::kPciSwitch);
  EXPECT_EQ(device_distance(kGpu, kNicSameHostBridge).tier, Proximity::kHostBridge);
  EXPECT_EQ(device_distance(kGpu, kNicSameNuma).tier, Proximity::kNumaNode);
  EXPECT_EQ(device_distance(kGpu, kNicOtherNumaSamePackage).tier, Proximity::kPackage);
  EXPECT_EQ(device_distance(kGpu, kNicOtherSocket).tier, Proximity::kSystem);
}

TEST(DistanceTest, NearerTierComparesLess) {
  const Distance sw = device_distance(kGpu, kNicSameSwitch);
  const Distance hb = device_distance(kGpu, kNicSameHostBridge);
  const Distance node = device_distance(kGpu, kNicSameNuma);
  const Distance pkg = device_distance(kGpu, kNicOtherNumaSamePackage);
  const Distance sys = device_distance(kGpu, kNicOtherSocket);
  EXPECT_TRUE(sw < hb);
  EXPECT_TRUE(hb < node);
  EXPECT_TRUE(node < pkg);
  EXPECT_TRUE(pkg < sys);
  EXPECT_FALSE(sys < sw);
}

TEST(DistanceTest, DeeperSharedBridgeIsNearer) {
  // Shares the switch's upstream port (depth 5) vs only the root port (depth 4).
  const Site below_root_port = site({{1, kCpu}, {10, kCpu}, {100, kHost}, {101, kBridge},
                                     {150, kBridge}, {151, kDev}}, {0}, 0);
  const Distance near = device_distance(kGpu, kNicSameSwitch);
  const Distance far = device_distance(kGpu, below_root_port);
  EXPECT_EQ(near.tier, Proximity::kPciSwitch);
  EXPECT_EQ(far.tier, Proximity::kPciSwitch);
  EXPECT_EQ(near.shared_depth, 5);
  EXPECT_EQ(far.shared_depth, 4);
  EXPECT_TRUE(near < far);
}

TEST(DistanceTest, UnknownSiteIsSystem) {
  EXPECT_EQ(device_distance(kGpu, Site{}).tier, Proximity::kSystem);
}

TEST(DistanceTest, HostMemoryByNumaNodeThenPackage) {
  const NumaNode node0{0, 0};
  EXPECT_EQ(host_distance(&node0, kNicSameNuma).tier, Proximity::kNumaNode);
  EXPECT_EQ(host_distance(&node0, kNicOtherNumaSamePackage).tier, Proximity::kPackage);
  EXPECT_EQ(host_distance(&node0, kNicOtherSocket).tier, Proximity::kSystem);
  EXPECT_EQ(host_distance(nullptr, kNicSameNuma), host_distance(nullptr, kNicOtherSocket));
}

}  // namespace
}  // namespace thub::topo
