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

void StoreValue(void* data, size_t i, chorus_dtype dtype, double value) {
  switch (dtype) {
    case CHORUS_F32:
      static_cast<float*>(data)[i] = static_cast<float>(value);
      break;
    case CHORUS_F64:
      static_cast<double*>(data)[i] = value;
      break;
    case CHORUS_F16:
      static_cast<uint16_t*>(data)[i] = sdk::FloatToHalf(static_cast<float>(value));
      break;
    case CHORUS_BF16:
      static_cast<uint16_t*>(data)[i] = sdk::FloatToBf16(static_cast<float>(value));
      break;
    case CHORUS_I32:
      static_cast<int32_t*>(data)[i] = static_cast<int32_t>(value);
      break;
    case CHORUS_I64:
      static_cast<int64_t*>(data)[i] = static_cast<int64_t>(value);
      break;
    case CHORUS_U8:
      static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(value);
      break;
    case CHORUS_I8:
      static_cast<int8_t*>(data)[i] = static_cast<int8_t>(value);
      break;
    default:
      break;
  }
}

double LoadValue(const void* data, size_t i, chorus_dtype dtype) {
  switch (dtype) {
    case CHORUS_F32:
      return static_cast<const float*>(data)[i];
    case CHORUS_F64:
      return static_cast<const double*>(data)[i];
    case CHORUS_F16:
      return sdk::HalfToFloat(static_cast<const uint16_t*>(data)[i]);
    case CHORUS_BF16:
      return sdk::Bf16ToFloat(static_cast<const uint16_t*>(data)[i]);
    case CHORUS_I32:
      return static_cast<const int32_t*>(data)[i];
    case CHORUS_I64:
      return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case CHORUS_U8:
      return static_cast<const uint8_t*>(data)[i];
    case CHORUS_I8:
      return static_cast<const int8_t*>(data)[i];
    default:
      return std::nan("");
  }
}

void FillInput(void* data, size_t count, chorus_dtype dtype, chorus_reduce_op op, int rank,
               size_t offset) {
  for (size_t i = 0; i < count; ++i) StoreValue(data, i, dtype, InputValue(offset + i, rank, op));
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
    StoreValue(slot, 0, dtype, v);
    table_[i] = LoadValue(slot, 0, dtype);
  }
}

uint64_t CountWrongReduced(const void* data, size_t count, chorus_dtype dtype,
                           const ReducedPattern& pattern, size_t offset) {
  uint64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += LoadValue(data, i, dtype) != pattern.at(offset + i);
  return wrong;
}

uint64_t CountWrongInput(const void* data, size_t count, chorus_dtype dtype, chorus_reduce_op op,
                         int rank, size_t offset) {
  uint64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    unsigned char slot[8];
    StoreValue(slot, 0, dtype, InputValue(offset + i, rank, op));
    wrong += LoadValue(data, i, dtype) != LoadValue(slot, 0, dtype);
  }
  return wrong;
}

}  // namespace chorus::bench
