// Paths of the hwloc XML fixtures (THUB_TOPO_FIXTURES is set by CMake).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "topo/topology.h"

namespace thub::topo::test {

inline std::string fixture(const std::string& name) {
  return std::string(THUB_TOPO_FIXTURES) + "/" + name;
}

// A fixture loaded as a Topology; the test fails if it does not load.
inline std::unique_ptr<Topology> load(const std::string& name) {
  std::string err;
  auto t = Topology::load_xml(fixture(name), &err);
  EXPECT_EQ(err, "");
  return t;
}

inline const std::string kHgx = "hgx_8gpu_8nic.xml";         // 2 sockets, 8 GPUs, 8 mlx5, eno1
inline const std::string kCpuNode = "cpu_2socket_2nic.xml";  // 2 sockets, mlx5_0/1, eno1
inline const std::string kEthOnly = "eth_only_2gpu.xml";     // 1 socket, 2 GPUs, eth0/eth1

}  // namespace thub::topo::test
