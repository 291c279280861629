// One element of the cuda enumerator's reduce and divide kernels, for every chorus dtype. The
// functions are __host__ __device__: cuda_kernels.cu runs them on the GPU, and a unit test
// compiled by the host compiler runs the same code against the core's host kernels, so the
// arithmetic is checked on machines without a GPU (cuda_fp16.h and cuda_bf16.h convert on the
// host too).
#ifndef CHORUS_NCCL_CUDA_ELEMENT_OPS_H_
#define CHORUS_NCCL_CUDA_ELEMENT_OPS_H_

#include <chorus/plugin.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#ifdef __CUDACC__
#define CHORUS_NCCL_HD __host__ __device__
#else
#define CHORUS_NCCL_HD
#endif

namespace chorus::nccl {

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
CHORUS_NCCL_HD typename Math<T>::type LoadMath(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return v;
  }
}

// Rounds to nearest even, as the host kernels do.
template <typename T>
CHORUS_NCCL_HD T StoreMath(typename Math<T>::type v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    return v;
  }
}

// Integer SUM and PROD wrap (through an unsigned type at least as wide as unsigned int, so that
// small types are not promoted to int and overflow), as the host kernels do.
template <typename M>
using WrapType =
    std::conditional_t<(sizeof(M) < sizeof(unsigned)), unsigned,
                       std::make_unsigned_t<std::conditional_t<std::is_integral_v<M>, M, int>>>;

template <typename M>
CHORUS_NCCL_HD M Add(M x, M y) {
  if constexpr (std::is_integral_v<M>) {
    return static_cast<M>(static_cast<WrapType<M>>(x) + static_cast<WrapType<M>>(y));
  } else {
    return x + y;
  }
}
template <typename M>
CHORUS_NCCL_HD M Multiply(M x, M y) {
  if constexpr (std::is_integral_v<M>) {
    return static_cast<M>(static_cast<WrapType<M>>(x) * static_cast<WrapType<M>>(y));
  } else {
    return x * y;
  }
}

// a op b for one element. MIN and MAX compare as std::min and std::max do (a NaN in b is
// ignored, a NaN in a is kept), like the host kernels.
template <typename T, chorus_reduce_op Op>
CHORUS_NCCL_HD T ReduceElement(T a, T b) {
  using M = typename Math<T>::type;
  const M x = LoadMath<T>(a);
  const M y = LoadMath<T>(b);
  M r;
  if constexpr (Op == CHORUS_REDUCE_SUM) {
    r = Add<M>(x, y);
  } else if constexpr (Op == CHORUS_REDUCE_PROD) {
    r = Multiply<M>(x, y);
  } else if constexpr (Op == CHORUS_REDUCE_MIN) {
    r = y < x ? y : x;
  } else {
    static_assert(Op == CHORUS_REDUCE_MAX, "SUM, PROD, MIN or MAX");
    r = x < y ? y : x;
  }
  return StoreMath<T>(r);
}

// value / divisor for one element, exact for every divisor (as the host kernels): integers
// round toward zero in 64 bits. A divisor above INT64_MAX has no signed 64-bit form; the
// quotient of a signed value by it is 0, except INT64_MIN / 2^63 = -1. divisor is never 0 (the
// callers check).
template <typename T>
CHORUS_NCCL_HD T DivideElement(T value, uint64_t divisor) {
  using M = typename Math<T>::type;
  if constexpr (std::is_integral_v<M> && std::is_signed_v<M>) {
    const long long v = value;
    if (divisor <= 0x7fffffffffffffffULL)
      return static_cast<T>(v / static_cast<long long>(divisor));
    const long long int64_min = -0x7fffffffffffffffLL - 1;
    return static_cast<T>(v == int64_min && divisor == 0x8000000000000000ULL ? -1 : 0);
  } else if constexpr (std::is_integral_v<M>) {
    return static_cast<T>(static_cast<unsigned long long>(value) / divisor);
  } else {
    return StoreMath<T>(static_cast<M>(LoadMath<T>(value) / static_cast<M>(divisor)));
  }
}

// Calls body(T{}) with the CUDA storage type of `dtype` (host code); false for an unknown dtype.
template <typename Body>
bool WithCudaType(chorus_dtype dtype, Body&& body) {
  switch (dtype) {
    case CHORUS_F32:
      body(float{});
      return true;
    case CHORUS_F64:
      body(double{});
      return true;
    case CHORUS_F16:
      body(__half{});
      return true;
    case CHORUS_BF16:
      body(__nv_bfloat16{});
      return true;
    case CHORUS_I32:
      body(int32_t{});
      return true;
    case CHORUS_I64:
      body(int64_t{});
      return true;
    case CHORUS_U8:
      body(uint8_t{});
      return true;
    case CHORUS_I8:
      body(int8_t{});
      return true;
    default:
      return false;
  }
}

}  // namespace chorus::nccl

#endif  // CHORUS_NCCL_CUDA_ELEMENT_OPS_H_
