#include "typed_values.h"

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstring>

namespace chorus::gloo_test {
namespace {

bool IsSigned(chorus_dtype dtype) { return dtype != CHORUS_U8; }

}  // namespace

double InputValue(chorus_dtype dtype, chorus_reduce_op op, int rank, size_t i) {
  const auto r = static_cast<size_t>(rank);
  switch (op) {
    case CHORUS_REDUCE_SUM: {
      const double v = static_cast<double>((r * 7 + i) % 9);
      return IsSigned(dtype) ? v - 4 : v;
    }
    case CHORUS_REDUCE_PROD: {
      const double v = static_cast<double>((r + i) % 3 + 1);
      return IsSigned(dtype) && (r + i / 2) % 2 == 1 ? -v : v;
    }
    default: {
      const double v = static_cast<double>((r * 5 + i * 3) % 11);
      return IsSigned(dtype) ? v - 5 : v;
    }
  }
}

std::vector<std::pair<chorus_dtype, chorus_reduce_op>> DtypeOpPairs(size_t count) {
  std::vector<std::pair<chorus_dtype, chorus_reduce_op>> pairs;
  size_t index = 0;
  for (chorus_dtype dtype : kAllDtypes) {
    for (chorus_reduce_op op : kAllOps) {
      if (count <= 100000 || op == kAllOps[index % 4]) pairs.emplace_back(dtype, op);
    }
    ++index;
  }
  return pairs;
}

double MovedValue(int rank, size_t i) { return static_cast<double>((rank * 31 + i) % 101); }

double Reduced(chorus_dtype dtype, chorus_reduce_op op, int size, size_t i) {
  double result = InputValue(dtype, op, 0, i);
  for (int rank = 1; rank < size; ++rank) {
    const double v = InputValue(dtype, op, rank, i);
    switch (op) {
      case CHORUS_REDUCE_SUM:
        result += v;
        break;
      case CHORUS_REDUCE_PROD:
        result *= v;
        break;
      case CHORUS_REDUCE_MIN:
        result = std::min(result, v);
        break;
      default:
        result = std::max(result, v);
        break;
    }
  }
  return result;
}

TypedBuffer::TypedBuffer(chorus_dtype dtype, size_t count, unsigned char fill)
    : dtype_(dtype), count_(count), bytes_(count * chorus_dtype_size(dtype) + 1, fill) {}

void TypedBuffer::Set(size_t offset, const std::vector<double>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    sdk::StoreElement(bytes_.data(), offset + i, dtype_, values[i]);
  }
}

double TypedBuffer::Get(size_t i) const { return sdk::LoadElement(bytes_.data(), i, dtype_); }

}  // namespace chorus::gloo_test

namespace chorus::gloo_test {

std::string Mismatches(const TypedBuffer& buffer, size_t offset,
                       const std::vector<double>& expected) {
  size_t wrong = 0, first = 0;
  double got = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double g = buffer.Get(offset + i);
    if (g != expected[i] && wrong++ == 0) first = i, got = g;
  }
  if (wrong == 0) return "";
  return std::to_string(wrong) + " of " + std::to_string(expected.size()) +
         " elements differ; first [" + std::to_string(first) + "] = " + std::to_string(got) +
         ", want " + std::to_string(expected[first]);
}

}  // namespace chorus::gloo_test
