// Paths of the hwloc XML fixtures (THUB_TOPO_FIXTURES is set by CMake).
#pragma once

#include <string>

namespace thub::topo::test {

inline std::string fixture(const std::string& name) {
  return std::string(THUB_TOPO_FIXTURES) + "/" + name;
}

inline const std::string kHgx = "hgx_8gpu_8nic.xml";         // 2 sockets, 8 GPUs, 8 mlx5, eno1
inline const std::string kCpuNode = "cpu_2socket_2nic.xml";  // 2 sockets, mlx5_0/1, eno1
inline const std::string kEthOnly = "eth_only_2gpu.xml";     // 1 socket, 2 GPUs, eth0/eth1

}  // namespace thub::topo::test
