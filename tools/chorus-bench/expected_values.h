// The values chorus-bench fills its buffers with, and the check of every result against the
// exact answer (the #wrong column). Element i of rank r is a small integer depending on i and r,
// exact in every dtype, so a result is either right to the last bit or wrong.
#ifndef CHORUS_TOOLS_BENCH_EXPECTED_VALUES_H_
#define CHORUS_TOOLS_BENCH_EXPECTED_VALUES_H_

#include <chorus/plugin.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace chorus::bench {

// Element `index` of rank `rank`: 1..7 ((index + rank) mod 7, plus 1); for PROD 1 or 2, so a
// product over a few ranks still fits i8.
double InputValue(size_t index, int rank, chorus_reduce_op op);

// Writes InputValue(offset + i, rank, op) to elements 0..count-1.
void FillInput(void* data, size_t count, chorus_dtype dtype, chorus_reduce_op op, int rank,
               size_t offset);

// The reduction over `ranks` ranks of InputValue(index, r, op), as the dtype holds it (MEAN: the
// sum divided by ranks, rounded toward zero for integers). The inputs repeat every 14 indices,
// so the answers are computed once.
class ReducedPattern {
 public:
  ReducedPattern(int ranks, chorus_reduce_op op, chorus_dtype dtype);
  double at(size_t index) const { return table_[index % kPeriod]; }

 private:
  static constexpr size_t kPeriod = 14;  // lcm of the periods 7 (sums) and 2 (products)
  std::array<double, kPeriod> table_{};
};

// Elements 0..count-1 of `data` that differ from pattern.at(offset + i).
uint64_t CountWrongReduced(const void* data, size_t count, chorus_dtype dtype,
                           const ReducedPattern& pattern, size_t offset);
// Elements 0..count-1 of `data` that differ from InputValue(offset + i, rank, op).
uint64_t CountWrongInput(const void* data, size_t count, chorus_dtype dtype, chorus_reduce_op op,
                         int rank, size_t offset);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_EXPECTED_VALUES_H_
