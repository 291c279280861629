// The host's reduce kernel (chorus_host.reduce_host), for every dtype and op.
#include <chorus/runtime/plugin_library.h>
#include <gtest/gtest.h>

#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <limits>
#include <vector>

namespace chorus {
namespace {

template <typename T>
std::vector<T> Reduce(const std::vector<T>& a, const std::vector<T>& b, chorus_dtype dtype,
                      chorus_reduce_op op, chorus_status expected = CHORUS_OK) {
  std::vector<T> out(a.size());
  chorus_reduce_kernel_args args{};
  args.struct_size = sizeof(args);
  args.device = CHORUS_HOST_DEVICE;
  args.dst = out.data();
  args.a = a.data();
  args.b = b.data();
  args.count = a.size();
  args.dtype = dtype;
  args.op = op;
  const chorus_host* host = CoreHost();
  EXPECT_EQ(host->reduce_host(host->ctx, &args), expected);
  return out;
}

TEST(HostKernels, FloatOps) {
  const std::vector<float> a{1.5f, -2, 3}, b{2, 4, -1};
  EXPECT_EQ(Reduce(a, b, CHORUS_F32, CHORUS_REDUCE_SUM), (std::vector<float>{3.5f, 2, 2}));
  EXPECT_EQ(Reduce(a, b, CHORUS_F32, CHORUS_REDUCE_PROD), (std::vector<float>{3, -8, -3}));
  EXPECT_EQ(Reduce(a, b, CHORUS_F32, CHORUS_REDUCE_MIN), (std::vector<float>{1.5f, -2, -1}));
  EXPECT_EQ(Reduce(a, b, CHORUS_F32, CHORUS_REDUCE_MAX), (std::vector<float>{2, 4, 3}));
}

TEST(HostKernels, IntegerSumWrapsInsteadOfOverflowing) {
  const std::vector<int32_t> a{std::numeric_limits<int32_t>::max(), -7}, b{1, 3};
  EXPECT_EQ(Reduce(a, b, CHORUS_I32, CHORUS_REDUCE_SUM),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -4}));
  const std::vector<int8_t> c{100, -3}, d{100, 5};
  EXPECT_EQ(Reduce(c, d, CHORUS_I8, CHORUS_REDUCE_PROD), (std::vector<int8_t>{16, -15}));
  const std::vector<uint8_t> e{250, 0}, f{10, 9};
  EXPECT_EQ(Reduce(e, f, CHORUS_U8, CHORUS_REDUCE_SUM), (std::vector<uint8_t>{4, 9}));
  const std::vector<int64_t> g{1ll << 40, -5}, h{3, 2};
  EXPECT_EQ(Reduce(g, h, CHORUS_I64, CHORUS_REDUCE_MAX), (std::vector<int64_t>{1ll << 40, 2}));
}

TEST(HostKernels, HalfAndBfloat) {
  std::vector<uint16_t> a{sdk::FloatToHalf(1.5f), sdk::FloatToHalf(-2)};
  std::vector<uint16_t> b{sdk::FloatToHalf(0.25f), sdk::FloatToHalf(8)};
  auto sum = Reduce(a, b, CHORUS_F16, CHORUS_REDUCE_SUM);
  EXPECT_EQ(sdk::HalfToFloat(sum[0]), 1.75f);
  EXPECT_EQ(sdk::HalfToFloat(sum[1]), 6.0f);
  std::vector<uint16_t> c{sdk::FloatToBf16(3), sdk::FloatToBf16(-1)};
  std::vector<uint16_t> d{sdk::FloatToBf16(5), sdk::FloatToBf16(-4)};
  auto prod = Reduce(c, d, CHORUS_BF16, CHORUS_REDUCE_PROD);
  EXPECT_EQ(sdk::Bf16ToFloat(prod[0]), 15.0f);
  EXPECT_EQ(sdk::Bf16ToFloat(prod[1]), 4.0f);
}

TEST(HostKernels, HalfConversionRoundsToNearestEven) {
  EXPECT_EQ(sdk::FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(sdk::FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(sdk::FloatToHalf(1e6f), 0x7c00);           // overflow to infinity
  EXPECT_EQ(sdk::FloatToHalf(5.9604645e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(sdk::HalfToFloat(0x0001), 5.9604645e-8f);
  EXPECT_EQ(sdk::FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);  // tie, rounds to even
  EXPECT_EQ(sdk::FloatToHalf(1.0f + 3.0f / 2048), 0x3c02);  // tie, rounds to even (up)
  EXPECT_EQ(sdk::FloatToBf16(1.0f), 0x3f80);
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive half survives a round trip
    ASSERT_EQ(sdk::FloatToHalf(sdk::HalfToFloat(static_cast<uint16_t>(h))), h);
  }
}

TEST(HostKernels, InPlaceIsAllowed) {
  std::vector<double> a{1, 2, 3};
  const std::vector<double> b{10, 20, 30};
  chorus_reduce_kernel_args args{};
  args.struct_size = sizeof(args);
  args.dst = a.data();
  args.a = a.data();
  args.b = b.data();
  args.count = 3;
  args.dtype = CHORUS_F64;
  args.op = CHORUS_REDUCE_SUM;
  ASSERT_EQ(CoreHost()->reduce_host(CoreHost()->ctx, &args), CHORUS_OK);
  EXPECT_EQ(a, (std::vector<double>{11, 22, 33}));
}

TEST(HostKernels, BadArgumentsAreRejected) {
  const std::vector<float> a{1}, b{2};
  Reduce(a, b, static_cast<chorus_dtype>(42), CHORUS_REDUCE_SUM, CHORUS_INVALID_ARGUMENT);
  Reduce(a, b, CHORUS_F32, CHORUS_REDUCE_MEAN, CHORUS_INVALID_ARGUMENT);
  chorus_reduce_kernel_args args{};
  args.struct_size = 4;
  EXPECT_EQ(CoreHost()->reduce_host(CoreHost()->ctx, &args), CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(CoreHost()->reduce_host(CoreHost()->ctx, nullptr), CHORUS_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace chorus
