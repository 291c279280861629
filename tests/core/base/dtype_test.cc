#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <gtest/gtest.h>

#include <chorus/names.hpp>

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

// The SDK's table (chorus/names.hpp), which the core, the plugins and the tools name with.
TEST(Names, TheSdkTableNamesEveryValueAndFallsBackOutsideIt) {
  static_assert(sdk::CollectiveOpName(CHORUS_OP_REDUCE_SCATTER)[0] == 'r');
  EXPECT_STREQ(sdk::CollectiveOpName(CHORUS_OP_ALL_REDUCE), "all_reduce");
  EXPECT_STREQ(sdk::CollectiveOpName(CHORUS_OP_BARRIER), "barrier");
  EXPECT_STREQ(sdk::CollectiveOpName(5, "none"), "none");
  EXPECT_STREQ(sdk::DtypeName(CHORUS_BF16), "bf16");
  EXPECT_STREQ(sdk::DtypeName(-1), "?");
  EXPECT_EQ(sdk::DtypeName(CHORUS_DTYPE_COUNT, nullptr), nullptr);
  EXPECT_STREQ(sdk::ReduceOpName(CHORUS_REDUCE_MEAN), "mean");
  EXPECT_EQ(sdk::DtypeOfName("i8"), CHORUS_I8);
  EXPECT_EQ(sdk::ReduceOpOfName("SUM"), std::nullopt);
  EXPECT_EQ(sdk::CollectiveOpOfName("all_gather"), CHORUS_OP_ALL_GATHER);
  EXPECT_EQ(sdk::SignatureCode(CHORUS_OP_ALL_REDUCE), 1);
  EXPECT_STREQ(sdk::SignatureCodeName(sdk::SignatureCode(CHORUS_OP_BROADCAST)), "broadcast");
  EXPECT_STREQ(sdk::SignatureCodeName(0, "none"), "none");
  EXPECT_STREQ(sdk::SignatureCodeName(INT64_MIN), "?");
  // The core's names are the table's.
  EXPECT_STREQ(CollectiveOpName(CHORUS_OP_ALL_GATHER), "all_gather");
  EXPECT_STREQ(CollectiveOpName(static_cast<chorus_collective_op>(9)), "unknown operation");
  EXPECT_STREQ(DtypeName(static_cast<chorus_dtype>(9)), "unknown-dtype");
}

TEST(Status, NamesEveryStatus) {
  EXPECT_STREQ(StatusName(CHORUS_PEER_LOST), "PEER_LOST");
  EXPECT_STREQ(StatusName(CHORUS_UNAVAILABLE), "UNAVAILABLE");
  EXPECT_STREQ(StatusName(static_cast<chorus_status>(42)), "UNKNOWN_STATUS");
}

}  // namespace
}  // namespace chorus
