// The message of the check before each gloo operation (src/call_check.h): rank 0's call and the
// first rank's that differs, each described as the caller passed it.
#include "call_check.h"

#include <gtest/gtest.h>

namespace chorus::gloo_plugin {
namespace {

CallSignature AllReduce(int64_t count) {
  return {static_cast<int64_t>(CallOp::kAllReduce), count, CHORUS_F32, CHORUS_REDUCE_SUM, 0};
}

TEST(GlooCallCheck, EqualCallsPass) {
  EXPECT_EQ(CallMismatch({AllReduce(10), AllReduce(10), AllReduce(10)}), "");
}

TEST(GlooCallCheck, ACountMismatchNamesRankZeroAndTheFirstThatDiffers) {
  EXPECT_EQ(CallMismatch({AllReduce(10), AllReduce(10), AllReduce(9), AllReduce(8)}),
            "the ranks disagree on the call: rank 0 passes all_reduce of 10 f32 (sum) but rank 2 "
            "passes all_reduce of 9 f32 (sum); every rank must issue the same operations, in the "
            "same order, with the same counts, dtypes, reduce ops and roots");
}

TEST(GlooCallCheck, EachOperationIsDescribedWithWhatItUses) {
  const CallSignature broadcast{static_cast<int64_t>(CallOp::kBroadcast), 4, CHORUS_I32, 0, 1};
  EXPECT_EQ(DescribeCall(broadcast), "broadcast of 4 i32 from rank 1");
  const CallSignature gather{static_cast<int64_t>(CallOp::kAllGather), 3, CHORUS_BF16, 0, 0};
  EXPECT_EQ(DescribeCall(gather), "all_gather of 3 bf16");
  const CallSignature scatter{static_cast<int64_t>(CallOp::kReduceScatter), 2, CHORUS_F64,
                              CHORUS_REDUCE_MAX, 0};
  EXPECT_EQ(DescribeCall(scatter), "reduce_scatter of 2 f64 (max)");
  EXPECT_EQ(DescribeCall({static_cast<int64_t>(CallOp::kBarrier), 0, 0, 0, 0}), "barrier");
  EXPECT_EQ(DescribeCall({static_cast<int64_t>(CallOp::kAllGather), 1, 99, 0, 0}),
            "all_gather of 1 ?");
}

TEST(GlooCallCheck, AnotherOperationIsAMismatch) {
  const CallSignature barrier{static_cast<int64_t>(CallOp::kBarrier), 0, 0, 0, 0};
  EXPECT_NE(CallMismatch({AllReduce(10), barrier}).find("rank 1 passes barrier;"),
            std::string::npos);
}

}  // namespace
}  // namespace chorus::gloo_plugin
