// Arithmetic the algorithms share, free of any transport: the fold that lets a power-of-two
// schedule (recursive doubling, recursive halving) serve any rank count, and the virtual 2D grid
// of the torus.
#ifndef CHORUS_ALGORITHMS_SCHEDULE_H_
#define CHORUS_ALGORITHMS_SCHEDULE_H_

#include <optional>
#include <string>
#include <string_view>

namespace chorus::algorithms {

// n ranks as pof2 = 2^floor(log2 n) active ones: the first 2 * rem ranks (rem = n - pof2) pair
// up, the even one folding its data into the odd one before the schedule and getting the result
// back after it. Active ranks are numbered 0..pof2-1 ("new ranks").
struct Fold {
  explicit Fold(int size);
  // The new rank of `rank`, or -1 for a rank that folds into its odd neighbour.
  int NewRank(int rank) const;
  // The rank of new rank `new_rank`.
  int RankOf(int new_rank) const;
  bool Folds(int rank) const { return rank < 2 * rem; }

  int size, pof2, rem;
};

// A virtual grid of x columns and y rows (x * y ranks); rank r sits in row r / x, column r % x.
struct Grid {
  int x = 1, y = 1;
};

// The most square grid of `size` ranks, x >= y (a prime count gives one row).
Grid SquarestGrid(int size);

// "XxY" (e.g. "2x3"); nullopt with *problem set when the text is no such pair of positive
// numbers or their product is not `size`.
std::optional<Grid> ParseGrid(std::string_view text, int size, std::string* problem);

}  // namespace chorus::algorithms

#endif  // CHORUS_ALGORITHMS_SCHEDULE_H_
