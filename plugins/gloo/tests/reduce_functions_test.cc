// The plugin's reduce functions: Gloo's templates for the native dtypes and gloo::float16, and
// the widening through float for bf16.
#include "reduce_functions.h"

#include <gtest/gtest.h>

#include <chorus/plugin_sdk.hpp>
#include <cstdint>
#include <vector>

namespace chorus::gloo_plugin {
namespace {

TEST(GlooReduceFunctions, NativeTypesUseGlooArithmetic) {
  std::vector<int32_t> a = {1, -5, 7}, b = {2, 3, -9}, out(3);
  FindReduceFunction(CHORUS_I32, CHORUS_REDUCE_SUM)(out.data(), a.data(), b.data(), 3);
  EXPECT_EQ(out, (std::vector<int32_t>{3, -2, -2}));
  FindReduceFunction(CHORUS_I32, CHORUS_REDUCE_MIN)(out.data(), a.data(), b.data(), 3);
  EXPECT_EQ(out, (std::vector<int32_t>{1, -5, -9}));
  std::vector<uint8_t> x = {200, 3}, y = {100, 4};
  FindReduceFunction(CHORUS_U8, CHORUS_REDUCE_SUM)(x.data(), x.data(), y.data(), 2);  // in place
  EXPECT_EQ(x, (std::vector<uint8_t>{44, 7}));                                        // wraps
  std::vector<double> p = {1.5, -2}, q = {-2, 0.25};
  FindReduceFunction(CHORUS_F64, CHORUS_REDUCE_PROD)(p.data(), p.data(), q.data(), 2);
  EXPECT_EQ(p, (std::vector<double>{-3, -0.5}));
}

TEST(GlooReduceFunctions, HalfRoundsThroughFloat) {
  std::vector<uint16_t> a = {sdk::FloatToHalf(1.0f), sdk::FloatToHalf(-3.0f)};
  std::vector<uint16_t> b = {sdk::FloatToHalf(0.5f), sdk::FloatToHalf(2.0f)}, out(2);
  FindReduceFunction(CHORUS_F16, CHORUS_REDUCE_SUM)(out.data(), a.data(), b.data(), 2);
  EXPECT_EQ(sdk::HalfToFloat(out[0]), 1.5f);
  EXPECT_EQ(sdk::HalfToFloat(out[1]), -1.0f);
  FindReduceFunction(CHORUS_F16, CHORUS_REDUCE_MAX)(out.data(), a.data(), b.data(), 2);
  EXPECT_EQ(sdk::HalfToFloat(out[0]), 1.0f);
  EXPECT_EQ(sdk::HalfToFloat(out[1]), 2.0f);
}

TEST(GlooReduceFunctions, Bfloat16ReducesInFloatAndRoundsToNearestEven) {
  // 256 + 1 is not a bf16 (8 bits of mantissa): it rounds to even, 256; 256 + 3 rounds to 260.
  std::vector<uint16_t> a = {sdk::FloatToBf16(256.0f), sdk::FloatToBf16(256.0f)};
  std::vector<uint16_t> b = {sdk::FloatToBf16(1.0f), sdk::FloatToBf16(3.0f)}, out(2);
  FindReduceFunction(CHORUS_BF16, CHORUS_REDUCE_SUM)(out.data(), a.data(), b.data(), 2);
  EXPECT_EQ(sdk::Bf16ToFloat(out[0]), 256.0f);
  EXPECT_EQ(sdk::Bf16ToFloat(out[1]), 260.0f);
  FindReduceFunction(CHORUS_BF16, CHORUS_REDUCE_PROD)(out.data(), b.data(), b.data(), 2);
  EXPECT_EQ(sdk::Bf16ToFloat(out[1]), 9.0f);
  FindReduceFunction(CHORUS_BF16, CHORUS_REDUCE_MIN)(out.data(), a.data(), b.data(), 2);
  EXPECT_EQ(sdk::Bf16ToFloat(out[0]), 1.0f);
}

TEST(GlooReduceFunctions, RejectsUnknownDtypeAndOp) {
  try {
    FindReduceFunction(static_cast<chorus_dtype>(42), CHORUS_REDUCE_SUM);
    ADD_FAILURE() << "no error";
  } catch (const sdk::Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
  }
  try {
    FindReduceFunction(CHORUS_F32, CHORUS_REDUCE_MEAN);
    ADD_FAILURE() << "no error";
  } catch (const sdk::Error& e) {
    EXPECT_EQ(e.status(), CHORUS_UNSUPPORTED);
  }
}

}  // namespace
}  // namespace chorus::gloo_plugin
