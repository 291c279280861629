// The GPU kernels' element arithmetic (cuda_element_ops.h), compiled for the host, against the
// core's host kernels for every dtype and op (label unit: runs without a GPU). The GPU test
// NcclGpu.KernelsMatchTheHostForEveryDtypeAndOp runs the same functions on the device; this one
// covers what it cannot reach cheaply: every 16-bit float pattern, every pair of 8-bit
// integers, wrap-around, infinities, NaN and subnormals, and CUDA's own float16/bfloat16
// conversions against the SDK's (the host reference rounds through the SDK's).
#include "../src/cuda_element_ops.h"

#include <chorus/base/dtype.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>

#include <chorus/plugin_sdk.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace chorus::nccl {
namespace {

std::shared_ptr<DeviceEnumerator> HostKernels() {
  static Registry registry([] {
    LoaderOptions options;
    options.filter = "none";
    return options;
  }());
  static auto cpu = DeviceEnumerator::Create(registry.FindPlugin("core"), {{"count", "1"}});
  return cpu;
}

// Inputs as raw bytes, chosen per element size to cover the interesting values.
struct Inputs {
  std::vector<unsigned char> a, b;
  size_t count = 0;
};

template <typename Bits>
Inputs Make(const std::vector<Bits>& a, const std::vector<Bits>& b) {
  Inputs in;
  in.count = a.size();
  in.a.resize(a.size() * sizeof(Bits));
  in.b.resize(b.size() * sizeof(Bits));
  std::memcpy(in.a.data(), a.data(), in.a.size());
  std::memcpy(in.b.data(), b.data(), in.b.size());
  return in;
}

// A small deterministic generator (xorshift64*), so failures reproduce.
struct Bits64 {
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  uint64_t operator()() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545f4914f6cdd1dULL;
  }
};

template <typename T>
std::vector<T> WithSpecials(std::vector<T> values, const std::vector<T>& specials) {
  for (size_t i = 0; i < specials.size() && i < values.size(); ++i) values[i * 7] = specials[i];
  return values;
}

Inputs InputsFor(chorus_dtype dtype) {
  Bits64 random;
  switch (chorus_dtype_size(dtype)) {
    case 1: {  // every pair of bytes
      std::vector<uint8_t> a, b;
      for (int x = 0; x < 256; ++x) {
        for (int y = 0; y < 256; ++y) {
          a.push_back(static_cast<uint8_t>(x));
          b.push_back(static_cast<uint8_t>(y));
        }
      }
      return Make(a, b);
    }
    case 2: {  // every 16-bit pattern in a, each against several b
      std::vector<uint16_t> a, b;
      for (int round = 0; round < 4; ++round) {
        for (uint32_t x = 0; x < 65536; ++x) {
          a.push_back(static_cast<uint16_t>(x));
          b.push_back(static_cast<uint16_t>(random()));
        }
      }
      return Make(a, b);
    }
    case 4: {
      std::vector<uint32_t> a(1 << 16), b(1 << 16);
      for (size_t i = 0; i < a.size(); ++i) {
        // Floats near 1 as well as arbitrary patterns, so sums and products stay finite often.
        a[i] = static_cast<uint32_t>(random());
        b[i] = i % 2 ? static_cast<uint32_t>(random()) : (a[i] ^ (random() & 0x00ffffffu));
      }
      if (dtype == CHORUS_I32) return Make(a, b);
      const std::vector<uint32_t> specials{0x7f800000u, 0xff800000u, 0x7fc00000u, 0x80000000u,
                                           0x00000001u, 0x7f7fffffu, 0x3f800000u};
      return Make(WithSpecials(a, specials), WithSpecials(b, {0xff800000u, 0x7f800000u}));
    }
    default: {
      std::vector<uint64_t> a(1 << 16), b(1 << 16);
      for (size_t i = 0; i < a.size(); ++i) {
        a[i] = random();
        b[i] = i % 2 ? random() : (a[i] ^ (random() & 0x000fffffffffffffULL));
      }
      const std::vector<uint64_t> extremes{0x8000000000000000ULL, 0x7fffffffffffffffULL,
                                           0xffffffffffffffffULL, 0x7ff0000000000000ULL,
                                           0x7ff8000000000000ULL, 1};
      return Make(WithSpecials(a, extremes), WithSpecials(b, extremes));
    }
  }
}

// Equal bit for bit, or both NaN (a NaN's payload is not specified by either side).
bool SameElement(const unsigned char* x, const unsigned char* y, chorus_dtype dtype) {
  const size_t size = chorus_dtype_size(dtype);
  if (std::memcmp(x, y, size) == 0) return true;
  const bool is_float =
      dtype == CHORUS_F16 || dtype == CHORUS_BF16 || dtype == CHORUS_F32 || dtype == CHORUS_F64;
  return is_float && std::isnan(sdk::LoadElement(x, 0, dtype)) &&
         std::isnan(sdk::LoadElement(y, 0, dtype));
}

// Counts the elements that differ and reports the first few.
void ExpectSame(const std::vector<unsigned char>& actual,
                const std::vector<unsigned char>& expected, const Inputs& in, chorus_dtype dtype) {
  const size_t size = chorus_dtype_size(dtype);
  size_t differing = 0;
  for (size_t i = 0; i < in.count; ++i) {
    if (SameElement(&actual[i * size], &expected[i * size], dtype)) continue;
    if (++differing <= 3) {
      ADD_FAILURE() << "element " << i << ": a=" << sdk::LoadElement(in.a.data(), i, dtype)
                    << " b=" << sdk::LoadElement(in.b.data(), i, dtype)
                    << " gpu code=" << sdk::LoadElement(actual.data(), i, dtype)
                    << " host kernel=" << sdk::LoadElement(expected.data(), i, dtype);
    }
  }
  EXPECT_EQ(differing, 0u) << "of " << in.count << " elements";
}

template <typename T, chorus_reduce_op Op>
void ReduceWithElementOps(void* dst, const void* a, const void* b, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    T x, y;
    std::memcpy(static_cast<void*>(&x), static_cast<const char*>(a) + i * sizeof(T), sizeof(T));
    std::memcpy(static_cast<void*>(&y), static_cast<const char*>(b) + i * sizeof(T), sizeof(T));
    const T r = ReduceElement<T, Op>(x, y);
    std::memcpy(static_cast<char*>(dst) + i * sizeof(T), &r, sizeof(T));
  }
}

template <typename T>
void ReduceAs(void* dst, const void* a, const void* b, size_t count, chorus_reduce_op op) {
  switch (op) {
    case CHORUS_REDUCE_SUM:
      return ReduceWithElementOps<T, CHORUS_REDUCE_SUM>(dst, a, b, count);
    case CHORUS_REDUCE_PROD:
      return ReduceWithElementOps<T, CHORUS_REDUCE_PROD>(dst, a, b, count);
    case CHORUS_REDUCE_MIN:
      return ReduceWithElementOps<T, CHORUS_REDUCE_MIN>(dst, a, b, count);
    default:
      return ReduceWithElementOps<T, CHORUS_REDUCE_MAX>(dst, a, b, count);
  }
}

template <typename T>
void DivideAs(void* data, size_t count, uint64_t divisor) {
  for (size_t i = 0; i < count; ++i) {
    T x;
    std::memcpy(static_cast<void*>(&x), static_cast<const char*>(data) + i * sizeof(T), sizeof(T));
    const T r = DivideElement<T>(x, divisor);
    std::memcpy(static_cast<char*>(data) + i * sizeof(T), &r, sizeof(T));
  }
}

class CudaElementOps : public ::testing::TestWithParam<chorus_dtype> {};

TEST_P(CudaElementOps, ReduceMatchesTheHostKernelForEveryOp) {
  const chorus_dtype dtype = GetParam();
  const Inputs in = InputsFor(dtype);
  const size_t bytes = in.a.size();
  for (int o = CHORUS_REDUCE_SUM; o <= CHORUS_REDUCE_MAX; ++o) {
    const auto op = static_cast<chorus_reduce_op>(o);
    SCOPED_TRACE(ReduceOpName(op));
    std::vector<unsigned char> expected(bytes);
    chorus_reduce_kernel_args host{};
    host.struct_size = sizeof(host);
    host.dst = expected.data();
    host.a = in.a.data();
    host.b = in.b.data();
    host.count = in.count;
    host.dtype = dtype;
    host.op = op;
    ASSERT_EQ(HostKernels()->api().reduce(HostKernels()->context(), &host), CHORUS_OK);
    std::vector<unsigned char> actual(bytes);
    ASSERT_TRUE(WithCudaType(dtype, [&](auto type) {
      ReduceAs<decltype(type)>(actual.data(), in.a.data(), in.b.data(), in.count, op);
    }));
    ExpectSame(actual, expected, in, dtype);
  }
}

TEST_P(CudaElementOps, DivideMatchesTheHostKernelForEveryDivisor) {
  const chorus_dtype dtype = GetParam();
  const Inputs in = InputsFor(dtype);
  for (uint64_t divisor :
       {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{7}, uint64_t{255}, uint64_t{256},
        uint64_t{1} << 40, uint64_t{1} << 63, (uint64_t{1} << 63) + 1, ~uint64_t{0}}) {
    SCOPED_TRACE("divisor " + std::to_string(divisor));
    std::vector<unsigned char> expected = in.a;
    chorus_divide_args host{};
    host.struct_size = sizeof(host);
    host.data = expected.data();
    host.count = in.count;
    host.dtype = dtype;
    host.divisor = divisor;
    ASSERT_EQ(HostKernels()->api().divide(HostKernels()->context(), &host), CHORUS_OK);
    std::vector<unsigned char> actual = in.a;
    ASSERT_TRUE(WithCudaType(
        dtype, [&](auto type) { DivideAs<decltype(type)>(actual.data(), in.count, divisor); }));
    ExpectSame(actual, expected, in, dtype);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDtype, CudaElementOps, ::testing::ValuesIn(AllDtypes()),
                         [](const auto& info) { return std::string(DtypeName(info.param)); });

// The host reference rounds through the SDK's conversions, the GPU through CUDA's: they must
// agree on every float16/bfloat16 value and on the rounding of floats between them.
TEST(CudaConversions, SixteenBitFloatsReadTheSameAsTheSdks) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    __half half;
    __nv_bfloat16 bfloat;
    std::memcpy(static_cast<void*>(&half), &h, 2);
    std::memcpy(static_cast<void*>(&bfloat), &h, 2);
    const float cuda_half = __half2float(half), sdk_half = sdk::HalfToFloat(h);
    const float cuda_bf16 = __bfloat162float(bfloat), sdk_bf16 = sdk::Bf16ToFloat(h);
    if (std::isnan(sdk_half)) {
      ASSERT_TRUE(std::isnan(cuda_half)) << std::hex << bits;
    } else {
      ASSERT_EQ(cuda_half, sdk_half) << std::hex << bits;
    }
    if (std::isnan(sdk_bf16)) {
      ASSERT_TRUE(std::isnan(cuda_bf16)) << std::hex << bits;
    } else {
      ASSERT_EQ(cuda_bf16, sdk_bf16) << std::hex << bits;
    }
  }
}

TEST(CudaConversions, FloatsRoundToSixteenBitsAsTheSdkDoes) {
  // Every float whose low 13 bits are one of the rounding cases (below, at and above a half
  // step of float16; bfloat16's step is 2^16, covered by the 16-bit patterns below), over every
  // sign and exponent, plus a stride through all other patterns.
  std::vector<uint32_t> patterns;
  for (uint32_t high = 0; high < (1u << 19); ++high) {
    for (uint32_t low : {0x0000u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu}) {
      patterns.push_back((high << 13) | low);
    }
  }
  for (uint32_t high = 0; high < 65536; ++high) {
    for (uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      patterns.push_back((high << 16) | low);
    }
  }
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4099) {
    patterns.push_back(static_cast<uint32_t>(bits));
  }
  size_t half_differs = 0, bf16_differs = 0;
  for (uint32_t bits : patterns) {
    float f;
    std::memcpy(&f, &bits, 4);
    const __half half = __float2half_rn(f);
    const __nv_bfloat16 bfloat = __float2bfloat16_rn(f);
    uint16_t cuda_half, cuda_bf16;
    std::memcpy(&cuda_half, static_cast<const void*>(&half), 2);
    std::memcpy(&cuda_bf16, static_cast<const void*>(&bfloat), 2);
    const uint16_t sdk_half = sdk::FloatToHalf(f), sdk_bf16 = sdk::FloatToBf16(f);
    if (std::isnan(f)) {  // both give some NaN; the payload may differ
      half_differs +=
          !std::isnan(sdk::HalfToFloat(cuda_half)) || !std::isnan(sdk::HalfToFloat(sdk_half));
      bf16_differs +=
          !std::isnan(sdk::Bf16ToFloat(cuda_bf16)) || !std::isnan(sdk::Bf16ToFloat(sdk_bf16));
      continue;
    }
    if (cuda_half != sdk_half && ++half_differs <= 3) {
      ADD_FAILURE() << "float16 of " << f << " (0x" << std::hex << bits << "): CUDA 0x" << cuda_half
                    << ", SDK 0x" << sdk_half;
    }
    if (cuda_bf16 != sdk_bf16 && ++bf16_differs <= 3) {
      ADD_FAILURE() << "bfloat16 of " << f << " (0x" << std::hex << bits << "): CUDA 0x"
                    << cuda_bf16 << ", SDK 0x" << sdk_bf16;
    }
  }
  EXPECT_EQ(half_differs, 0u) << "of " << patterns.size() << " floats";
  EXPECT_EQ(bf16_differs, 0u) << "of " << patterns.size() << " floats";
}

}  // namespace
}  // namespace chorus::nccl
