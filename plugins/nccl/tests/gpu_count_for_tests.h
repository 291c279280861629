// The number of CUDA devices the tests can use: 0 without a driver or a GPU.
#pragma once

#include <cuda_runtime.h>

namespace chorus::test {

inline int GpuCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

}  // namespace chorus::test
