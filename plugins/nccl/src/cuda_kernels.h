// Elementwise kernels on CUDA device memory for every chorus dtype, compiled by nvcc
// (cuda_kernels.cu) and called from the plugin's C++ code. Each launches on `stream` (a
// cudaStream_t; NULL = the legacy default stream) of the current device and returns the launch's
// cudaError_t as an int (0 = success).
#ifndef CHORUS_NCCL_CUDA_KERNELS_H_
#define CHORUS_NCCL_CUDA_KERNELS_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <cstdint>

namespace chorus::nccl {

// dst[i] = a[i] op b[i]; dst may equal a or b. op is SUM, PROD, MIN or MAX.
int LaunchReduce(void* dst, const void* a, const void* b, size_t count, chorus_dtype dtype,
                 chorus_reduce_op op, void* stream);
// data[i] /= divisor (integers round toward zero).
int LaunchDivide(void* data, size_t count, chorus_dtype dtype, uint64_t divisor, void* stream);

}  // namespace chorus::nccl

#endif  // CHORUS_NCCL_CUDA_KERNELS_H_
