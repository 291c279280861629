// nccl-tests' figures: the row layout (bytes and counts), algbw, busbw for every operation and
// rank count, and the median.
#include "metrics.h"

#include <gtest/gtest.h>

namespace chorus::bench {
namespace {

TEST(AlgorithmBandwidth, IsBytesPerNanosecond) {
  EXPECT_DOUBLE_EQ(AlgorithmBandwidthGbps(1'000'000'000, 1e6), 1.0);  // 1 GB in 1 s
  EXPECT_DOUBLE_EQ(AlgorithmBandwidthGbps(4096, 2.0), 2.048);
  EXPECT_DOUBLE_EQ(AlgorithmBandwidthGbps(0, 5.0), 0.0);
  EXPECT_DOUBLE_EQ(AlgorithmBandwidthGbps(4096, 0.0), 0.0);  // no time: no figure, no inf
}

class BusBandwidth : public ::testing::TestWithParam<int> {};

TEST_P(BusBandwidth, FactorsAreNcclTests) {
  const int n = GetParam();
  const double dn = n;
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveKind::kAllReduce, n), 2 * (dn - 1) / dn);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveKind::kBatchReduce, n), 2 * (dn - 1) / dn);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveKind::kAllGather, n), (dn - 1) / dn);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveKind::kReduceScatter, n), (dn - 1) / dn);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveKind::kBroadcast, n), 1.0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, BusBandwidth, ::testing::Values(1, 2, 3, 4, 8, 1024));

TEST(BusBandwidth, KnownValues) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveKind::kAllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveKind::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveKind::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveKind::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveKind::kReduceScatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveKind::kAllReduce, 0), 0.0);
}

TEST(RowLayout, AllReduceAndBroadcastCountTheBuffer) {
  for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kBroadcast}) {
    EXPECT_EQ(LayoutFor(kind, 4096, 4, 3).count, 1024u);
    EXPECT_EQ(LayoutFor(kind, 4096, 4, 3).bytes, 4096u);
    EXPECT_EQ(LayoutFor(kind, 7, 4, 2).count, 1u);  // rounded down to whole elements
    EXPECT_EQ(LayoutFor(kind, 7, 4, 2).bytes, 4u);
    EXPECT_EQ(LayoutFor(kind, 0, 4, 2).count, 0u);
    EXPECT_EQ(LayoutFor(kind, 1, 1, 2).count, 1u);
  }
}

TEST(RowLayout, AllGatherAndReduceScatterCountAllBlocks) {
  for (auto kind : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter}) {
    // 4 KiB of f32 over 4 ranks: 256 per rank, the size is the whole 4 KiB.
    EXPECT_EQ(LayoutFor(kind, 4096, 4, 4).count, 256u);
    EXPECT_EQ(LayoutFor(kind, 4096, 4, 4).bytes, 4096u);
    // 4096 bytes over 3 ranks: 341 f32 each, 4092 bytes in all.
    EXPECT_EQ(LayoutFor(kind, 4096, 4, 3).count, 341u);
    EXPECT_EQ(LayoutFor(kind, 4096, 4, 3).bytes, 4092u);
    EXPECT_EQ(LayoutFor(kind, 8, 4, 3).count, 0u);  // fewer elements than ranks
    EXPECT_EQ(LayoutFor(kind, 8, 4, 3).bytes, 0u);
  }
}

TEST(Mean, OfSomeAndOfNone) {
  EXPECT_DOUBLE_EQ(Mean({}), 0.0);
  EXPECT_DOUBLE_EQ(Mean({1, 2, 6}), 3.0);
}

TEST(Median, OddEvenAndEmpty) {
  EXPECT_DOUBLE_EQ(Median({}), 0.0);
  EXPECT_DOUBLE_EQ(Median({5}), 5.0);
  EXPECT_DOUBLE_EQ(Median({9, 1, 5}), 5.0);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Median({1, 100, 2, 3, 1000}), 3.0);  // outliers do not move it
}

TEST(CollectiveKind, NamesRoundTripAndUnknownListsValid) {
  for (auto kind :
       {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kBroadcast,
        CollectiveKind::kReduceScatter, CollectiveKind::kBatchReduce}) {
    EXPECT_EQ(ParseCollective(CollectiveName(kind)), kind);
  }
  try {
    ParseCollective("allreduce");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'allreduce'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("all_reduce, all_gather"), std::string::npos);
  }
  EXPECT_EQ(ParseCollectiveList("all_reduce,,broadcast").size(), 2u);
  EXPECT_THROW(ParseCollectiveList(""), std::invalid_argument);
}

}  // namespace
}  // namespace chorus::bench
