#include "typed_values.h"

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstring>

namespace chorus::gloo_test {
namespace {

bool IsSigned(chorus_dtype dtype) { return dtype != CHORUS_U8; }

// Writes values converted by `convert` as T from element `offset` on.
template <typename T, typename Convert>
void PutAll(void* base, size_t offset, const std::vector<double>& values, Convert convert) {
  auto* bytes = static_cast<unsigned char*>(base) + offset * sizeof(T);
  for (size_t i = 0; i < values.size(); ++i) {
    const T value = convert(values[i]);
    std::memcpy(bytes + i * sizeof(T), &value, sizeof(T));
  }
}

template <typename T>
T Cast(double value) {
  return static_cast<T>(value);
}

template <typename T>
T Take(const void* base, size_t i) {
  T value;
  std::memcpy(&value, static_cast<const unsigned char*>(base) + i * sizeof(T), sizeof(T));
  return value;
}

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
  void* base = bytes_.data();
  switch (dtype_) {
    case CHORUS_F32:
      return PutAll<float>(base, offset, values, Cast<float>);
    case CHORUS_F64:
      return PutAll<double>(base, offset, values, Cast<double>);
    case CHORUS_F16:
      return PutAll<uint16_t>(base, offset, values,
                              [](double v) { return sdk::FloatToHalf(static_cast<float>(v)); });
    case CHORUS_BF16:
      return PutAll<uint16_t>(base, offset, values,
                              [](double v) { return sdk::FloatToBf16(static_cast<float>(v)); });
    case CHORUS_I32:
      return PutAll<int32_t>(base, offset, values, Cast<int32_t>);
    case CHORUS_I64:
      return PutAll<int64_t>(base, offset, values, Cast<int64_t>);
    case CHORUS_U8:
      return PutAll<uint8_t>(base, offset, values, Cast<uint8_t>);
    case CHORUS_I8:
      return PutAll<int8_t>(base, offset, values, Cast<int8_t>);
    default:
      return;
  }
}

double TypedBuffer::Get(size_t i) const {
  const void* base = bytes_.data();
  switch (dtype_) {
    case CHORUS_F32:
      return Take<float>(base, i);
    case CHORUS_F64:
      return Take<double>(base, i);
    case CHORUS_F16:
      return sdk::HalfToFloat(Take<uint16_t>(base, i));
    case CHORUS_BF16:
      return sdk::Bf16ToFloat(Take<uint16_t>(base, i));
    case CHORUS_I32:
      return Take<int32_t>(base, i);
    case CHORUS_I64:
      return static_cast<double>(Take<int64_t>(base, i));
    case CHORUS_U8:
      return Take<uint8_t>(base, i);
    case CHORUS_I8:
      return Take<int8_t>(base, i);
    default:
      return 0;
  }
}

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
