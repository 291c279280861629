// The 2D-torus all-reduce of TPU pods (Ying et al., "Image Classification at Supercomputer
// Scale", 2018) over a virtual grid of x columns and y rows: a ring reduce-scatter along each
// row (x blocks), a ring all-reduce of each rank's block along its column, then a ring
// all-gather along the row. Each rank sends 2(x-1)/x of the buffer along rows and 2(y-1)/(xy) of
// it along columns, in 2(x-1) + 2(y-1) steps instead of a flat ring's 2(xy-1): on a real torus
// the row and column rings use different links.
#include <chorus/algorithm_sdk.hpp>

#include "run_context.h"

namespace chorus::algorithms {
namespace {

enum TorusPhase : uint64_t {
  kRowScatter = 1,
  kColumnScatter = 2,
  kColumnGather = 3,
  kRowGather = 4
};

}  // namespace

void RunTorusAllReduce(RunContext& run, const Grid& grid) {
  run.CopySendToRecv();
  const size_t count = run.args().count;
  if (run.size() == 1 || count == 0) return;
  const int row = run.rank() / grid.x, column = run.rank() % grid.x;
  std::vector<int> row_ranks, column_ranks;
  for (int c = 0; c < grid.x; ++c) row_ranks.push_back(row * grid.x + c);
  for (int r = 0; r < grid.y; ++r) column_ranks.push_back(r * grid.x + column);

  const size_t es = run.element_bytes();
  const sdk::BlockLayout row_layout{count, static_cast<size_t>(grid.x)};
  uint8_t* data = run.recv();
  run.RingReduceScatter(row_ranks, static_cast<size_t>(column), data, row_layout,
                        run.Tag(kRowScatter));
  // This rank holds the row's reduction of block (column + 1) % x; so does every rank of its
  // column, each for its own row: reduce it across the rows.
  const size_t block = static_cast<size_t>((column + 1) % grid.x);
  uint8_t* mine = data + row_layout.Begin(block) * es;
  const sdk::BlockLayout column_layout{row_layout.Size(block), static_cast<size_t>(grid.y)};
  run.RingReduceScatter(column_ranks, static_cast<size_t>(row), mine, column_layout,
                        run.Tag(kColumnScatter));
  run.RingAllGather(column_ranks, static_cast<size_t>(row), mine, column_layout,
                    run.Tag(kColumnGather));
  run.RingAllGather(row_ranks, static_cast<size_t>(column), data, row_layout, run.Tag(kRowGather));
}

}  // namespace chorus::algorithms
