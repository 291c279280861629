#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "cuda_kernels.h"

namespace chorus::nccl {
namespace {

// Arithmetic type of a storage type: 16-bit floats compute in float.
template <typename T>
struct Math {
  using type = T;
};
template <>
struct Math<__half> {
  using type = float;
};
template <>
struct Math<__nv_bfloat16> {
  using type = float;
};

template <typename T>
__device__ typename Math<T>::type Load(T v) {
  return v;
}
template <>
__device__ float Load<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ float Load<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ T Store(typename Math<T>::type v) {
  return v;
}
template <>
__device__ __half Store<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __nv_bfloat16 Store<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Integer SUM and PROD wrap (through the unsigned type), as the host kernels do.
template <typename M>
__device__ M Add(M x, M y) {
  return x + y;
}
template <typename M>
__device__ M Mul(M x, M y) {
  return x * y;
}
#define CHORUS_WRAPPING(T, U)                                     \
  template <>                                                     \
  __device__ T Add<T>(T x, T y) {                                 \
    return static_cast<T>(static_cast<U>(x) + static_cast<U>(y)); \
  }                                                               \
  template <>                                                     \
  __device__ T Mul<T>(T x, T y) {                                 \
    return static_cast<T>(static_cast<U>(x) * static_cast<U>(y)); \
  }
CHORUS_WRAPPING(int32_t, uint32_t)
CHORUS_WRAPPING(int64_t, uint64_t)
CHORUS_WRAPPING(int8_t, uint32_t)
CHORUS_WRAPPING(uint8_t, uint32_t)
#undef CHORUS_WRAPPING

template <typename T, chorus_reduce_op Op>
__global__ void ReduceKernel(T* dst, const T* a, const T* b, size_t count) {
  using M = typename Math<T>::type;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{blockDim.x} * gridDim.x) {
    const M x = Load<T>(a[i]);
    const M y = Load<T>(b[i]);
    M r;
    if constexpr (Op == CHORUS_REDUCE_SUM)
      r = Add<M>(x, y);
    else if constexpr (Op == CHORUS_REDUCE_PROD)
      r = Mul<M>(x, y);
    else if constexpr (Op == CHORUS_REDUCE_MIN)
      r = y < x ? y : x;
    else
      r = x < y ? y : x;
    dst[i] = Store<T>(r);
  }
}

template <typename T>
__global__ void DivideKernel(T* data, size_t count, uint64_t divisor) {
  using M = typename Math<T>::type;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{blockDim.x} * gridDim.x) {
    if constexpr (std::is_integral_v<M>) {
      // In 64 bits, so a divisor beyond the type's range gives 0 rather than overflowing.
      using W = std::conditional_t<std::is_signed_v<M>, long long, unsigned long long>;
      const W d = divisor > 0x7fffffffffffffffULL ? static_cast<W>(0x7fffffffffffffffLL)
                                                  : static_cast<W>(divisor);
      data[i] = static_cast<T>(static_cast<W>(data[i]) / d);
    } else {
      data[i] = Store<T>(static_cast<M>(Load<T>(data[i]) / static_cast<M>(divisor)));
    }
  }
}

constexpr unsigned kThreads = 256;
unsigned Blocks(size_t count) {
  const size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

template <typename T>
int Reduce(void* dst, const void* a, const void* b, size_t count, chorus_reduce_op op,
           cudaStream_t stream) {
  auto* d = static_cast<T*>(dst);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  switch (op) {
    case CHORUS_REDUCE_SUM:
      ReduceKernel<T, CHORUS_REDUCE_SUM><<<Blocks(count), kThreads, 0, stream>>>(d, x, y, count);
      break;
    case CHORUS_REDUCE_PROD:
      ReduceKernel<T, CHORUS_REDUCE_PROD><<<Blocks(count), kThreads, 0, stream>>>(d, x, y, count);
      break;
    case CHORUS_REDUCE_MIN:
      ReduceKernel<T, CHORUS_REDUCE_MIN><<<Blocks(count), kThreads, 0, stream>>>(d, x, y, count);
      break;
    case CHORUS_REDUCE_MAX:
      ReduceKernel<T, CHORUS_REDUCE_MAX><<<Blocks(count), kThreads, 0, stream>>>(d, x, y, count);
      break;
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int Divide(void* data, size_t count, uint64_t divisor, cudaStream_t stream) {
  DivideKernel<T><<<Blocks(count), kThreads, 0, stream>>>(static_cast<T*>(data), count, divisor);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int LaunchReduce(void* dst, const void* a, const void* b, size_t count, chorus_dtype dtype,
                 chorus_reduce_op op, void* stream) {
  if (count == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case CHORUS_F32:
      return Reduce<float>(dst, a, b, count, op, s);
    case CHORUS_F64:
      return Reduce<double>(dst, a, b, count, op, s);
    case CHORUS_F16:
      return Reduce<__half>(dst, a, b, count, op, s);
    case CHORUS_BF16:
      return Reduce<__nv_bfloat16>(dst, a, b, count, op, s);
    case CHORUS_I32:
      return Reduce<int32_t>(dst, a, b, count, op, s);
    case CHORUS_I64:
      return Reduce<int64_t>(dst, a, b, count, op, s);
    case CHORUS_U8:
      return Reduce<uint8_t>(dst, a, b, count, op, s);
    case CHORUS_I8:
      return Reduce<int8_t>(dst, a, b, count, op, s);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

int LaunchDivide(void* data, size_t count, chorus_dtype dtype, uint64_t divisor, void* stream) {
  if (count == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case CHORUS_F32:
      return Divide<float>(data, count, divisor, s);
    case CHORUS_F64:
      return Divide<double>(data, count, divisor, s);
    case CHORUS_F16:
      return Divide<__half>(data, count, divisor, s);
    case CHORUS_BF16:
      return Divide<__nv_bfloat16>(data, count, divisor, s);
    case CHORUS_I32:
      return Divide<int32_t>(data, count, divisor, s);
    case CHORUS_I64:
      return Divide<int64_t>(data, count, divisor, s);
    case CHORUS_U8:
      return Divide<uint8_t>(data, count, divisor, s);
    case CHORUS_I8:
      return Divide<int8_t>(data, count, divisor, s);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace chorus::nccl
