#include "schedule.h"

#include <charconv>

namespace chorus::algorithms {

Fold::Fold(int n) : size(n), pof2(1), rem(0) {
  while (pof2 <= n / 2) pof2 *= 2;
  rem = n - pof2;
}

int Fold::NewRank(int rank) const {
  if (rank < 2 * rem) return rank % 2 == 0 ? -1 : rank / 2;
  return rank - rem;
}

int Fold::RankOf(int new_rank) const { return new_rank < rem ? 2 * new_rank + 1 : new_rank + rem; }

Grid SquarestGrid(int size) {
  Grid grid{size, 1};
  for (int y = 1; y * y <= size; ++y) {
    if (size % y == 0) grid = {size / y, y};
  }
  return grid;
}

namespace {

// A positive decimal number filling `text`, or 0.
int Positive(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() && value > 0 ? value : 0;
}

}  // namespace

std::optional<Grid> ParseGrid(std::string_view text, int size, std::string* problem) {
  const auto cross = text.find('x');
  const int x = cross == std::string_view::npos ? 0 : Positive(text.substr(0, cross));
  const int y = cross == std::string_view::npos ? 0 : Positive(text.substr(cross + 1));
  const Grid squarest = SquarestGrid(size);
  const std::string example = std::to_string(squarest.x) + "x" + std::to_string(squarest.y);
  if (x == 0 || y == 0) {
    *problem = "grid='" + std::string(text) +
               "' is not XxY with two positive numbers (columns x rows), e.g. grid=" + example;
    return std::nullopt;
  }
  if (static_cast<long long>(x) * y != size) {
    *problem = "grid=" + std::string(text) + " has " +
               std::to_string(static_cast<long long>(x) * y) + " ranks but the job has " +
               std::to_string(size) + "; give grid=XxY with X * Y = " + std::to_string(size) +
               ", e.g. grid=" + example;
    return std::nullopt;
  }
  return Grid{x, y};
}

}  // namespace chorus::algorithms
