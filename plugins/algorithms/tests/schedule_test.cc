// The arithmetic of the schedules: the fold of any rank count onto a power of two, the grids of
// the torus, and the SDK's block layout the algorithms cut buffers with.
#include "schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chorus/algorithm_sdk.hpp>
#include <set>

namespace chorus::algorithms {
namespace {

using ::testing::HasSubstr;

TEST(Fold, EveryRankCountFoldsOntoAPowerOfTwo) {
  for (int n = 1; n <= 9; ++n) {
    const Fold fold(n);
    EXPECT_EQ(fold.pof2 + fold.rem, n);
    EXPECT_LE(fold.pof2, n);
    EXPECT_GT(2 * fold.pof2, n);
    std::set<int> new_ranks;
    for (int rank = 0; rank < n; ++rank) {
      const int new_rank = fold.NewRank(rank);
      if (new_rank < 0) {
        // Only the even rank of a folding pair sits out, and its odd neighbour is active.
        EXPECT_TRUE(fold.Folds(rank) && rank % 2 == 0) << n << " ranks, rank " << rank;
        EXPECT_GE(fold.NewRank(rank + 1), 0);
        continue;
      }
      EXPECT_EQ(fold.RankOf(new_rank), rank) << n << " ranks";
      new_ranks.insert(new_rank);
    }
    EXPECT_EQ(static_cast<int>(new_ranks.size()), fold.pof2) << n << " ranks";
    EXPECT_EQ(*new_ranks.rbegin(), fold.pof2 - 1);
  }
  EXPECT_EQ(Fold(6).rem, 2);
  EXPECT_EQ(Fold(6).NewRank(5), 3);
}

TEST(Grid, TheSquarestGridHasEveryRank) {
  EXPECT_EQ(SquarestGrid(6).x, 3);
  EXPECT_EQ(SquarestGrid(6).y, 2);
  EXPECT_EQ(SquarestGrid(16).x, 4);
  EXPECT_EQ(SquarestGrid(7).x, 7);  // a prime count: one row
  EXPECT_EQ(SquarestGrid(7).y, 1);
  EXPECT_EQ(SquarestGrid(1).x * SquarestGrid(1).y, 1);
}

TEST(Grid, AGridOptionIsParsedOrRefusedWithTheFix) {
  std::string problem;
  const auto grid = ParseGrid("2x3", 6, &problem);
  ASSERT_TRUE(grid.has_value()) << problem;
  EXPECT_EQ(grid->x, 2);
  EXPECT_EQ(grid->y, 3);
  EXPECT_FALSE(ParseGrid("3x3", 6, &problem));
  EXPECT_THAT(problem, HasSubstr("grid=3x3 has 9 ranks but the job has 6"));
  EXPECT_THAT(problem, HasSubstr("e.g. grid=3x2"));
  for (const char* bad : {"", "3", "x2", "3x", "0x6", "-2x-3", "2x3x1", "axb", "2 x3"}) {
    EXPECT_FALSE(ParseGrid(bad, 6, &problem)) << bad;
    EXPECT_THAT(problem, HasSubstr("is not XxY")) << bad;
  }
}

TEST(BlockLayout, BlocksCoverTheBufferInOrder) {
  for (size_t count : {0, 1, 5, 7, 64, 1001}) {
    for (size_t blocks : {1, 2, 3, 4, 8}) {
      const sdk::BlockLayout layout{count, blocks};
      size_t next = 0;
      for (size_t b = 0; b < blocks; ++b) {
        EXPECT_EQ(layout.Begin(b), next);
        EXPECT_LE(layout.Size(b), count / blocks + 1);
        next += layout.Size(b);
      }
      EXPECT_EQ(next, count);
      EXPECT_EQ(layout.Begin(blocks), count);
      EXPECT_EQ(layout.SizeOf(0, blocks), count);
    }
  }
}

}  // namespace
}  // namespace chorus::algorithms
