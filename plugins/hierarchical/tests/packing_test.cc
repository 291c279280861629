#include "packing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "roots.h"

namespace chorus::hierarchical {
namespace {

size_t Sum(const std::vector<Pack>& packs) {
  size_t total = 0;
  for (const Pack& p : packs) total += p.count;
  return total;
}

TEST(PlanPacks, NoElementsGiveNoPacks) {
  EXPECT_TRUE(PlanPacks(0, 1).empty());
  EXPECT_TRUE(PlanPacks(0, 4).empty());
}

TEST(PlanPacks, OnePackHoldsEverything) { EXPECT_EQ(PlanPacks(7, 1), (std::vector<Pack>{{0, 7}})); }

TEST(PlanPacks, ZeroPacksMeansOne) { EXPECT_EQ(PlanPacks(5, 0), (std::vector<Pack>{{0, 5}})); }

TEST(PlanPacks, LastPackTakesTheRemainder) {
  EXPECT_EQ(PlanPacks(10, 3), (std::vector<Pack>{{0, 3}, {3, 3}, {6, 4}}));
  EXPECT_EQ(PlanPacks(1001, 2), (std::vector<Pack>{{0, 500}, {500, 501}}));
}

TEST(PlanPacks, EvenSplit) {
  EXPECT_EQ(PlanPacks(8, 4), (std::vector<Pack>{{0, 2}, {2, 2}, {4, 2}, {6, 2}}));
}

TEST(PlanPacks, FewerElementsThanPacksUsesFewerPacks) {
  EXPECT_EQ(PlanPacks(2, 3), (std::vector<Pack>{{0, 1}, {1, 1}}));
  EXPECT_EQ(PlanPacks(1, 1000), (std::vector<Pack>{{0, 1}}));
  EXPECT_EQ(PlanPacks(3, UINT64_MAX).size(), 3u);
}

TEST(PlanPacks, PacksAreContiguousAndCoverEverything) {
  for (size_t total : {1u, 2u, 7u, 64u, 1001u}) {
    for (size_t num_packs : {1u, 2u, 3u, 5u, 8u, 2000u}) {
      const auto packs = PlanPacks(total, num_packs);
      ASSERT_FALSE(packs.empty());
      EXPECT_EQ(packs.size(), std::min(total, num_packs));
      size_t next = 0;
      for (const Pack& p : packs) {
        EXPECT_EQ(p.offset, next);
        EXPECT_GT(p.count, 0u);
        next += p.count;
      }
      EXPECT_EQ(Sum(packs), total) << total << " in " << num_packs;
      for (size_t i = 0; i + 1 < packs.size(); ++i) EXPECT_EQ(packs[i].count, packs[0].count);
      EXPECT_LT(packs.back().count, packs[0].count + packs.size());
    }
  }
}

TEST(PlanLayout, OffsetsFollowCounts) {
  const std::vector<size_t> counts = {3, 0, 5, 1};
  const auto layout = PlanLayout(counts);
  ASSERT_TRUE(layout);
  EXPECT_EQ(layout->offsets, (std::vector<size_t>{0, 3, 3, 8}));
  EXPECT_EQ(layout->total, 9u);
}

TEST(PlanLayout, Empty) {
  const auto layout = PlanLayout({});
  ASSERT_TRUE(layout);
  EXPECT_TRUE(layout->offsets.empty());
  EXPECT_EQ(layout->total, 0u);
}

TEST(PlanLayout, OverflowIsDetected) {
  const std::vector<size_t> counts = {SIZE_MAX, 1};
  EXPECT_FALSE(PlanLayout(counts));
  const std::vector<size_t> fits = {SIZE_MAX - 1, 1};
  EXPECT_TRUE(PlanLayout(fits));
}

TEST(GroupByKey, SameKeysShareAGroupInFirstSeenOrder) {
  const PackKey f32_sum{0, 0}, i32_sum{4, 0}, f32_max{0, 3};
  const std::vector<std::optional<PackKey>> keys = {f32_sum, i32_sum, f32_sum, f32_max, i32_sum};
  EXPECT_EQ(GroupByKey(keys), (std::vector<std::vector<size_t>>{{0, 2}, {1, 4}, {3}}));
}

TEST(GroupByKey, UnkeyedItemsStandAlone) {
  const PackKey k{0, 0};
  const std::vector<std::optional<PackKey>> keys = {std::nullopt, k, std::nullopt, k};
  EXPECT_EQ(GroupByKey(keys), (std::vector<std::vector<size_t>>{{0}, {1, 3}, {2}}));
}

TEST(GroupByKey, Empty) { EXPECT_TRUE(GroupByKey({}).empty()); }

TEST(ChooseRoots, OneDeviceIsItsOwnRoot) {
  for (size_t i = 0; i < 3; ++i) {
    const Roots r = ChooseRoots(1, i);
    EXPECT_EQ(r.half, 0u);
    EXPECT_EQ(r.root_b, 0u);
  }
}

TEST(ChooseRoots, RoundRobinWithinEachHalf) {
  // Eight devices: halves [0, 4) and [4, 8), roots (i % 4, 4 + i % 4), TF's pairs.
  for (size_t i = 0; i < 9; ++i) {
    const Roots r = ChooseRoots(8, i);
    EXPECT_EQ(r.half, 4u);
    EXPECT_EQ(r.root_a, i % 4);
    EXPECT_EQ(r.root_b, 4 + i % 4);
  }
}

TEST(ChooseRoots, OddCountsPutTheExtraDeviceInTheSecondHalf) {
  // Three devices: A = {0}, B = {1, 2}; every device is in a half.
  EXPECT_EQ(ChooseRoots(3, 0).half, 1u);
  EXPECT_EQ(ChooseRoots(3, 0).root_a, 0u);
  EXPECT_EQ(ChooseRoots(3, 0).root_b, 1u);
  EXPECT_EQ(ChooseRoots(3, 1).root_a, 0u);
  EXPECT_EQ(ChooseRoots(3, 1).root_b, 2u);
  EXPECT_EQ(ChooseRoots(3, 2).root_b, 1u);
}

}  // namespace
}  // namespace chorus::hierarchical
