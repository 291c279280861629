#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <gtest/gtest.h>

namespace chorus {
namespace {

TEST(Dtype, NamesRoundTrip) {
  for (chorus_dtype dtype : AllDtypes()) EXPECT_EQ(ParseDtype(DtypeName(dtype)), dtype);
  EXPECT_EQ(AllDtypes().size(), 8u);
}

TEST(Dtype, SizesMatchTheAbi) {
  EXPECT_EQ(chorus_dtype_size(CHORUS_F64), 8u);
  EXPECT_EQ(chorus_dtype_size(CHORUS_BF16), 2u);
  EXPECT_EQ(chorus_dtype_size(CHORUS_I8), 1u);
  EXPECT_EQ(chorus_dtype_size(static_cast<chorus_dtype>(99)), 0u);
}

TEST(Dtype, AnUnknownNameListsTheValidOnes) {
  try {
    ParseDtype("float32");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown dtype 'float32'; valid: f32, f64, f16, bf16, i32, i64, u8, i8");
  }
}

TEST(ReduceOp, NamesRoundTripAndUnknownIsAnError) {
  for (int op = 0; op < CHORUS_REDUCE_OP_COUNT; ++op) {
    EXPECT_EQ(ParseReduceOp(ReduceOpName(static_cast<chorus_reduce_op>(op))), op);
  }
  EXPECT_THROW(ParseReduceOp("avg"), Error);
}

TEST(Status, NamesEveryStatus) {
  EXPECT_STREQ(StatusName(CHORUS_PEER_LOST), "PEER_LOST");
  EXPECT_STREQ(StatusName(CHORUS_UNAVAILABLE), "UNAVAILABLE");
  EXPECT_STREQ(StatusName(static_cast<chorus_status>(42)), "UNKNOWN_STATUS");
}

}  // namespace
}  // namespace chorus
