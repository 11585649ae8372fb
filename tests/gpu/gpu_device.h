// Whether a CUDA device is usable here, and why not (the GPU tests skip with that reason).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace thub::test {

inline bool have_cuda_device(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    *why = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(e);
    (void)cudaGetLastError();
    return false;
  }
  if (n == 0) *why = "cudaGetDeviceCount is 0";
  return n > 0;
}

}  // namespace thub::test
