#include "expected_values.h"

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cmath>

namespace chorus::bench {

double InputValue(size_t index, int rank, chorus_reduce_op op) {
  const size_t r = static_cast<size_t>(rank);
  if (op == CHORUS_REDUCE_PROD) return static_cast<double>((index + r) % 2 + 1);
  return static_cast<double>((index + r) % 7 + 1);
}

void FillInput(void* data, size_t count, chorus_dtype dtype, chorus_reduce_op op, int rank,
               size_t offset) {
  for (size_t i = 0; i < count; ++i)
    sdk::StoreElement(data, i, dtype, InputValue(offset + i, rank, op));
}

ReducedPattern::ReducedPattern(int ranks, chorus_reduce_op op, chorus_dtype dtype) {
  const bool integer =
      dtype == CHORUS_I32 || dtype == CHORUS_I64 || dtype == CHORUS_U8 || dtype == CHORUS_I8;
  for (size_t i = 0; i < kPeriod; ++i) {
    double v = InputValue(i, 0, op);
    for (int r = 1; r < ranks; ++r) {
      const double x = InputValue(i, r, op);
      switch (op) {
        case CHORUS_REDUCE_PROD:
          v *= x;
          break;
        case CHORUS_REDUCE_MIN:
          v = std::min(v, x);
          break;
        case CHORUS_REDUCE_MAX:
          v = std::max(v, x);
          break;
        default:
          v += x;
          break;
      }
    }
    if (op == CHORUS_REDUCE_MEAN) v = integer ? std::trunc(v / ranks) : v / ranks;
    // As the dtype holds it: store and load once.
    unsigned char slot[8];
    sdk::StoreElement(slot, 0, dtype, v);
    table_[i] = sdk::LoadElement(slot, 0, dtype);
  }
}

uint64_t CountWrongReduced(const void* data, size_t count, chorus_dtype dtype,
                           const ReducedPattern& pattern, size_t offset) {
  uint64_t wrong = 0;
  for (size_t i = 0; i < count; ++i)
    wrong += sdk::LoadElement(data, i, dtype) != pattern.at(offset + i);
  return wrong;
}

uint64_t CountWrongInput(const void* data, size_t count, chorus_dtype dtype, chorus_reduce_op op,
                         int rank, size_t offset) {
  uint64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    unsigned char slot[8];
    sdk::StoreElement(slot, 0, dtype, InputValue(offset + i, rank, op));
    wrong += sdk::LoadElement(data, i, dtype) != sdk::LoadElement(slot, 0, dtype);
  }
  return wrong;
}

}  // namespace chorus::bench
