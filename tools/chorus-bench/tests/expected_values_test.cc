// The inputs and expected results behind #wrong, and the buffers of one operation.
#include "expected_values.h"

#include <chorus/base/dtype.h>
#include <gtest/gtest.h>

#include <chorus/plugin_sdk.hpp>
#include <vector>

#include "collective_run.h"

namespace chorus::bench {
namespace {

class ExpectedValues : public ::testing::TestWithParam<chorus_dtype> {};

TEST_P(ExpectedValues, ReducedPatternMatchesAnElementwiseReduction) {
  const chorus_dtype dtype = GetParam();
  for (int ranks : {1, 2, 3, 4}) {
    for (auto op : {CHORUS_REDUCE_SUM, CHORUS_REDUCE_PROD, CHORUS_REDUCE_MIN, CHORUS_REDUCE_MAX}) {
      const ReducedPattern pattern(ranks, op, dtype);
      for (size_t i : {size_t{0}, size_t{1}, size_t{13}, size_t{1001}}) {
        double want = InputValue(i, 0, op);
        for (int r = 1; r < ranks; ++r) {
          const double x = InputValue(i, r, op);
          want = op == CHORUS_REDUCE_SUM    ? want + x
                 : op == CHORUS_REDUCE_PROD ? want * x
                 : op == CHORUS_REDUCE_MIN  ? std::min(want, x)
                                            : std::max(want, x);
        }
        EXPECT_EQ(pattern.at(i), want) << DtypeName(dtype) << " " << ReduceOpName(op) << " i=" << i;
      }
    }
  }
}

TEST_P(ExpectedValues, CountsEveryWrongElement) {
  const chorus_dtype dtype = GetParam();
  const size_t count = 1001;
  std::vector<unsigned char> data(count * chorus_dtype_size(dtype));
  FillInput(data.data(), count, dtype, CHORUS_REDUCE_SUM, 2, 5);
  EXPECT_EQ(CountWrongInput(data.data(), count, dtype, CHORUS_REDUCE_SUM, 2, 5), 0u);
  EXPECT_EQ(CountWrongInput(data.data(), count, dtype, CHORUS_REDUCE_SUM, 3, 5), count);
  sdk::StoreElement(data.data(), 7, dtype, 0);
  sdk::StoreElement(data.data(), 1000, dtype, 100);
  EXPECT_EQ(CountWrongInput(data.data(), count, dtype, CHORUS_REDUCE_SUM, 2, 5), 2u);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ExpectedValues,
                         ::testing::Values(CHORUS_F32, CHORUS_F64, CHORUS_F16, CHORUS_BF16,
                                           CHORUS_I32, CHORUS_I64, CHORUS_U8, CHORUS_I8),
                         [](const auto& info) { return std::string(DtypeName(info.param)); });

TEST(ExpectedValues, MeanRoundsIntegersTowardZero) {
  // Ranks 0..2 at index 0 hold 1, 2, 3: mean 2; at index 5 hold 6, 7, 1: 14/3.
  EXPECT_EQ(ReducedPattern(3, CHORUS_REDUCE_MEAN, CHORUS_I32).at(5), 4.0);
  EXPECT_EQ(ReducedPattern(3, CHORUS_REDUCE_MEAN, CHORUS_F64).at(5), 14.0 / 3);
  EXPECT_EQ(ReducedPattern(3, CHORUS_REDUCE_MEAN, CHORUS_F32).at(0), 2.0);
}

TEST(CollectiveRun, PoisonedOutputIsAllWrongAndInPlaceCopiesTheInput) {
  for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                    CollectiveKind::kBroadcast, CollectiveKind::kReduceScatter}) {
    RunSpec spec{kind, CHORUS_F32, CHORUS_REDUCE_SUM, 0, 1, 3, 101, false};
    RunBuffers buffers;
    FillInputs(spec, buffers);
    EXPECT_EQ(buffers.input.size(), InputBytes(spec));
    EXPECT_EQ(buffers.work.size(), WorkBytes(spec));
    PrepareIteration(spec, buffers, true);
    const uint64_t results = kind == CollectiveKind::kAllGather ? 303u : 101u;
    EXPECT_EQ(CountWrongElements(spec, buffers), results) << CollectiveName(kind);
  }
  // In place, a broadcast's non-root buffer starts as its own input: wrong until broadcast.
  RunSpec spec{CollectiveKind::kBroadcast, CHORUS_I8, CHORUS_REDUCE_SUM, 0, 1, 2, 14, true};
  RunBuffers buffers;
  FillInputs(spec, buffers);
  PrepareIteration(spec, buffers, true);
  EXPECT_EQ(CountWrongElements(spec, buffers), 14u);
  spec.rank = 0;  // the root's buffer is its input: right
  FillInputs(spec, buffers);
  PrepareIteration(spec, buffers, true);
  EXPECT_EQ(CountWrongElements(spec, buffers), 0u);
}

}  // namespace
}  // namespace chorus::bench
