#include <cuda_runtime.h>

#include "cuda_element_ops.h"
#include "cuda_kernels.h"

namespace chorus::nccl {
namespace {

// Grid-stride loops over the element functions of cuda_element_ops.h.
template <typename T, chorus_reduce_op Op>
__global__ void ReduceKernel(T* dst, const T* a, const T* b, size_t count) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{blockDim.x} * gridDim.x) {
    dst[i] = ReduceElement<T, Op>(a[i], b[i]);
  }
}

template <typename T>
__global__ void DivideKernel(T* data, size_t count, uint64_t divisor) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{blockDim.x} * gridDim.x) {
    data[i] = DivideElement<T>(data[i], divisor);
  }
}

constexpr unsigned kThreads = 256;
unsigned Blocks(size_t count) {
  const size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

// Launches through cudaLaunchKernel, which returns this launch's status: cudaGetLastError after
// a <<<>>> launch would also report (and clear) an earlier call's error, the caller's included.
template <typename T, chorus_reduce_op Op>
cudaError_t LaunchReduceKernel(T* dst, const T* a, const T* b, size_t count, cudaStream_t stream) {
  void* args[] = {&dst, &a, &b, &count};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&ReduceKernel<T, Op>), dim3(Blocks(count)),
                          dim3(kThreads), args, 0, stream);
}

template <typename T>
int Reduce(void* dst, const void* a, const void* b, size_t count, chorus_reduce_op op,
           cudaStream_t stream) {
  auto* d = static_cast<T*>(dst);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  switch (op) {
    case CHORUS_REDUCE_SUM:
      return LaunchReduceKernel<T, CHORUS_REDUCE_SUM>(d, x, y, count, stream);
    case CHORUS_REDUCE_PROD:
      return LaunchReduceKernel<T, CHORUS_REDUCE_PROD>(d, x, y, count, stream);
    case CHORUS_REDUCE_MIN:
      return LaunchReduceKernel<T, CHORUS_REDUCE_MIN>(d, x, y, count, stream);
    case CHORUS_REDUCE_MAX:
      return LaunchReduceKernel<T, CHORUS_REDUCE_MAX>(d, x, y, count, stream);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

template <typename T>
int Divide(void* data, size_t count, uint64_t divisor, cudaStream_t stream) {
  auto* d = static_cast<T*>(data);
  void* args[] = {&d, &count, &divisor};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&DivideKernel<T>), dim3(Blocks(count)),
                          dim3(kThreads), args, 0, stream);
}

}  // namespace

int LaunchReduce(void* dst, const void* a, const void* b, size_t count, chorus_dtype dtype,
                 chorus_reduce_op op, void* stream) {
  if (count == 0) return 0;
  int result = static_cast<int>(cudaErrorInvalidValue);
  WithCudaType(dtype, [&](auto type) {
    result = Reduce<decltype(type)>(dst, a, b, count, op, static_cast<cudaStream_t>(stream));
  });
  return result;
}

int LaunchDivide(void* data, size_t count, chorus_dtype dtype, uint64_t divisor, void* stream) {
  if (count == 0) return 0;
  int result = static_cast<int>(cudaErrorInvalidValue);
  WithCudaType(dtype, [&](auto type) {
    result = Divide<decltype(type)>(data, count, divisor, static_cast<cudaStream_t>(stream));
  });
  return result;
}

}  // namespace chorus::nccl
