#include "base/host_kernels.h"

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <type_traits>

namespace chorus::internal {
namespace {

using sdk::Fail;

// Storage type and the type arithmetic is done in.
template <typename T>
struct Native {
  static T Load(const void* p, size_t i) {
    T v;
    std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(T), sizeof(T));
    return v;
  }
  static void Store(void* p, size_t i, T v) {
    std::memcpy(static_cast<char*>(p) + i * sizeof(T), &v, sizeof(T));
  }
  using Math = T;
};

struct Half {
  static float Load(const void* p, size_t i) {
    uint16_t v;
    std::memcpy(&v, static_cast<const char*>(p) + i * 2, 2);
    return sdk::HalfToFloat(v);
  }
  static void Store(void* p, size_t i, float v) {
    uint16_t h = sdk::FloatToHalf(v);
    std::memcpy(static_cast<char*>(p) + i * 2, &h, 2);
  }
  using Math = float;
};

struct Bfloat {
  static float Load(const void* p, size_t i) {
    uint16_t v;
    std::memcpy(&v, static_cast<const char*>(p) + i * 2, 2);
    return sdk::Bf16ToFloat(v);
  }
  static void Store(void* p, size_t i, float v) {
    uint16_t h = sdk::FloatToBf16(v);
    std::memcpy(static_cast<char*>(p) + i * 2, &h, 2);
  }
  using Math = float;
};

// Sum and product of signed integers through their unsigned type: wraps, never UB.
template <typename T>
T Add(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
  } else {
    return x + y;
  }
}
template <typename T>
T Multiply(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    using Wide = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<T>(static_cast<U>(static_cast<Wide>(static_cast<U>(x)) *
                                         static_cast<Wide>(static_cast<U>(y))));
  } else {
    return x * y;
  }
}

struct SumOp {
  template <typename T>
  T operator()(T x, T y) const {
    return Add<T>(x, y);
  }
};
struct ProdOp {
  template <typename T>
  T operator()(T x, T y) const {
    return Multiply<T>(x, y);
  }
};
struct MinOp {
  template <typename T>
  T operator()(T x, T y) const {
    return std::min(x, y);
  }
};
struct MaxOp {
  template <typename T>
  T operator()(T x, T y) const {
    return std::max(x, y);
  }
};

// Calls body(op_functor) for a reduce op.
template <typename Body>
void WithOp(chorus_reduce_op op, Body&& body) {
  switch (op) {
    case CHORUS_REDUCE_SUM:
      return body(SumOp{});
    case CHORUS_REDUCE_PROD:
      return body(ProdOp{});
    case CHORUS_REDUCE_MIN:
      return body(MinOp{});
    case CHORUS_REDUCE_MAX:
      return body(MaxOp{});
    default:
      Fail(CHORUS_INVALID_ARGUMENT, "reduce kernel: op ", static_cast<int>(op),
           " is not SUM, PROD, MIN or MAX");
  }
}

// Element by element through the dtype's load and store (f16, bf16, unaligned memory).
template <typename Access>
void ReduceTyped(void* dst, const void* a, const void* b, size_t count, chorus_reduce_op op) {
  using M = typename Access::Math;
  WithOp(op, [&](auto apply) {
    for (size_t i = 0; i < count; ++i) {
      Access::Store(dst, i,
                    apply(static_cast<M>(Access::Load(a, i)), static_cast<M>(Access::Load(b, i))));
    }
  });
}

// The hot case: a plain loop the compiler vectorises.
template <typename T>
void ReduceContiguous(T* dst, const T* a, const T* b, size_t count, chorus_reduce_op op) {
  WithOp(op, [&](auto apply) {
    for (size_t i = 0; i < count; ++i) dst[i] = apply(a[i], b[i]);
  });
}

template <typename T>
void ReduceNative(void* dst, const void* a, const void* b, size_t count, chorus_reduce_op op) {
  const bool aligned = reinterpret_cast<uintptr_t>(dst) % alignof(T) == 0 &&
                       reinterpret_cast<uintptr_t>(a) % alignof(T) == 0 &&
                       reinterpret_cast<uintptr_t>(b) % alignof(T) == 0;
  if (aligned) {
    ReduceContiguous(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b),
                     count, op);
  } else {
    ReduceTyped<Native<T>>(dst, a, b, count, op);
  }
}

template <typename Access>
void DivideTyped(void* data, size_t count, uint64_t divisor) {
  using M = typename Access::Math;
  for (size_t i = 0; i < count; ++i) {
    M value = Access::Load(data, i);
    if constexpr (std::is_integral_v<M> && std::is_signed_v<M>) {
      // C division truncates toward zero. A divisor above INT64_MAX has no signed 64-bit form:
      // the quotient is 0, except INT64_MIN / 2^63 = -1.
      const long long v = value;
      long long quotient = 0;
      if (divisor <= static_cast<uint64_t>(INT64_MAX)) {
        quotient = v / static_cast<long long>(divisor);
      } else if (v == INT64_MIN && divisor == (uint64_t{1} << 63)) {
        quotient = -1;
      }
      Access::Store(data, i, static_cast<M>(quotient));
    } else if constexpr (std::is_integral_v<M>) {
      Access::Store(data, i, static_cast<M>(static_cast<unsigned long long>(value) / divisor));
    } else {
      Access::Store(data, i, static_cast<M>(value / static_cast<M>(divisor)));
    }
  }
}

}  // namespace

void ReduceHost(void* dst, const void* a, const void* b, size_t count, chorus_dtype dtype,
                chorus_reduce_op op) {
  if (count == 0) return;
  if (dst == nullptr || a == nullptr || b == nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT, "reduce kernel: NULL buffer with count ", count);
  }
  switch (dtype) {
    case CHORUS_F32:
      return ReduceNative<float>(dst, a, b, count, op);
    case CHORUS_F64:
      return ReduceNative<double>(dst, a, b, count, op);
    case CHORUS_F16:
      return ReduceTyped<Half>(dst, a, b, count, op);
    case CHORUS_BF16:
      return ReduceTyped<Bfloat>(dst, a, b, count, op);
    case CHORUS_I32:
      return ReduceNative<int32_t>(dst, a, b, count, op);
    case CHORUS_I64:
      return ReduceNative<int64_t>(dst, a, b, count, op);
    case CHORUS_U8:
      return ReduceNative<uint8_t>(dst, a, b, count, op);
    case CHORUS_I8:
      return ReduceNative<int8_t>(dst, a, b, count, op);
    default:
      Fail(CHORUS_INVALID_ARGUMENT, "reduce kernel: unknown dtype ", static_cast<int>(dtype));
  }
}

void DivideHost(void* data, size_t count, chorus_dtype dtype, uint64_t divisor) {
  if (divisor == 0) Fail(CHORUS_INVALID_ARGUMENT, "divide kernel: divisor is 0");
  if (count == 0) return;
  if (data == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "divide kernel: NULL data with count ", count);
  switch (dtype) {
    case CHORUS_F32:
      return DivideTyped<Native<float>>(data, count, divisor);
    case CHORUS_F64:
      return DivideTyped<Native<double>>(data, count, divisor);
    case CHORUS_F16:
      return DivideTyped<Half>(data, count, divisor);
    case CHORUS_BF16:
      return DivideTyped<Bfloat>(data, count, divisor);
    case CHORUS_I32:
      return DivideTyped<Native<int32_t>>(data, count, divisor);
    case CHORUS_I64:
      return DivideTyped<Native<int64_t>>(data, count, divisor);
    case CHORUS_U8:
      return DivideTyped<Native<uint8_t>>(data, count, divisor);
    case CHORUS_I8:
      return DivideTyped<Native<int8_t>>(data, count, divisor);
    default:
      Fail(CHORUS_INVALID_ARGUMENT, "divide kernel: unknown dtype ", static_cast<int>(dtype));
  }
}

}  // namespace chorus::internal
