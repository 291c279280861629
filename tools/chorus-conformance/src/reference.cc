#include "reference.h"

#include <chorus/base/dtype.h>
#include <chorus/base/environment.h>
#include <chorus/base/error.h>

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cmath>
#include <cstring>
#include <sstream>
#include <utility>

#include "reused_bytes.h"

namespace chorus::conformance::internal {
namespace {

bool IsSigned(chorus_dtype dtype) { return dtype != CHORUS_U8; }

}  // namespace

bool ShortSweep() {
  static const bool short_sweep = [] {
    const auto value = GetEnv("CHORUS_CONFORMANCE_SWEEP");
    if (!value || *value == "full") return false;
    if (*value == "short") return true;
    throw Error(CHORUS_INVALID_ARGUMENT, "CHORUS_CONFORMANCE_SWEEP='" + *value +
                                             "' is neither 'full' (every case, the default) nor "
                                             "'short' (the large count for u8, f16, f32 and f64 "
                                             "with SUM only)");
  }();
  return short_sweep;
}

bool InSweep(chorus_dtype dtype, chorus_reduce_op op, size_t count) {
  if (count <= kOddCount || !ShortSweep()) return true;
  return op == CHORUS_REDUCE_SUM &&
         (dtype == CHORUS_U8 || dtype == CHORUS_F16 || dtype == CHORUS_F32 || dtype == CHORUS_F64);
}

const std::vector<chorus_dtype>& Dtypes() {
  static const std::vector<chorus_dtype> dtypes = {CHORUS_F32, CHORUS_F64, CHORUS_F16, CHORUS_BF16,
                                                   CHORUS_I32, CHORUS_I64, CHORUS_U8,  CHORUS_I8};
  return dtypes;
}

const std::vector<chorus_reduce_op>& PluginReduceOps() {
  static const std::vector<chorus_reduce_op> ops = {CHORUS_REDUCE_SUM, CHORUS_REDUCE_PROD,
                                                    CHORUS_REDUCE_MIN, CHORUS_REDUCE_MAX};
  return ops;
}

bool IsInteger(chorus_dtype dtype) {
  return dtype == CHORUS_I32 || dtype == CHORUS_I64 || dtype == CHORUS_U8 || dtype == CHORUS_I8;
}

double Epsilon(chorus_dtype dtype) {
  switch (dtype) {
    case CHORUS_F32:
      return std::ldexp(1.0, -23);
    case CHORUS_F64:
      return std::ldexp(1.0, -52);
    case CHORUS_F16:
      return std::ldexp(1.0, -10);
    case CHORUS_BF16:
      return std::ldexp(1.0, -7);
    default:
      return 0;
  }
}

double Representable(chorus_dtype dtype, double value) {
  unsigned char bytes[8];
  sdk::StoreElement(bytes, 0, dtype, value);
  return sdk::LoadElement(bytes, 0, dtype);
}

Pattern PatternFor(chorus_reduce_op op) {
  return op == CHORUS_REDUCE_PROD ? Pattern::kProduct : Pattern::kSmall;
}

double InputValue(chorus_dtype dtype, Pattern pattern, size_t replica, size_t index) {
  const size_t j = index % kPeriod;
  const size_t mix = j * 7919 + replica * 104729 + j * j % 97;  // distinct per replica
  switch (pattern) {
    case Pattern::kSmall:
      return IsSigned(dtype) ? static_cast<double>(mix % 6) - 2 : static_cast<double>(mix % 4);
    case Pattern::kProduct:
      if (replica == 0 && j % 11 == 3) return 0;
      if ((replica + j) % 4 == 0) return 2;  // at most 2 of 8 replicas: |product| <= 4
      if (IsSigned(dtype) && mix % 5 == 0) return -1;
      return 1;
    case Pattern::kData:
      return static_cast<double>(mix % 101);
  }
  return 0;
}

double ReduceReference(chorus_reduce_op op, chorus_dtype dtype, const double* values, size_t n) {
  double result = values[0];
  const chorus_reduce_op fold = op == CHORUS_REDUCE_MEAN ? CHORUS_REDUCE_SUM : op;
  for (size_t r = 1; r < n; ++r) {
    switch (fold) {
      case CHORUS_REDUCE_SUM:
        result += values[r];
        break;
      case CHORUS_REDUCE_PROD:
        result *= values[r];
        break;
      case CHORUS_REDUCE_MIN:
        result = std::min(result, values[r]);
        break;
      case CHORUS_REDUCE_MAX:
        result = std::max(result, values[r]);
        break;
      default:
        return std::nan("");
    }
  }
  if (op == CHORUS_REDUCE_MEAN) {
    result /= static_cast<double>(n);
    if (IsInteger(dtype)) result = std::trunc(result);
  }
  return Representable(dtype, result);
}

HostTensor::HostTensor(chorus_dtype dtype, size_t count)
    : dtype_(dtype), count_(count), bytes_(TakeZeroedBytes(count * chorus_dtype_size(dtype))) {}

HostTensor::HostTensor(const HostTensor& other)
    : dtype_(other.dtype_), count_(other.count_), bytes_(TakeZeroedBytes(other.bytes_.size())) {
  if (!bytes_.empty()) std::memcpy(bytes_.data(), other.bytes_.data(), bytes_.size());
}

HostTensor& HostTensor::operator=(const HostTensor& other) {
  if (this != &other) *this = HostTensor(other);
  return *this;
}

HostTensor& HostTensor::operator=(HostTensor&& other) noexcept {
  if (this != &other) {
    GiveBackBytes(std::move(bytes_));
    dtype_ = other.dtype_;
    count_ = other.count_;
    bytes_ = std::move(other.bytes_);
  }
  return *this;
}

HostTensor::~HostTensor() { GiveBackBytes(std::move(bytes_)); }

void HostTensor::Fill(Pattern pattern, size_t replica, size_t offset) {
  // Values repeat every kPeriod positions: compute one period, copy it over the rest.
  const size_t head = std::min(count_, kPeriod);
  for (size_t i = 0; i < head; ++i) Set(i, InputValue(dtype_, pattern, replica, offset + i));
  Repeat(kPeriod);
}

void HostTensor::Repeat(size_t period) {
  const size_t element = chorus_dtype_size(dtype_);
  // Doubling copies: [0, done) is right, copy it to [done, 2 * done).
  for (size_t done = period; done < count_; done *= 2) {
    const size_t n = std::min(done, count_ - done);
    std::memcpy(bytes_.data() + done * element, bytes_.data(), n * element);
  }
}

HostTensor ExpectedReduce(chorus_reduce_op op, const std::vector<HostTensor>& inputs) {
  const chorus_dtype dtype = inputs.at(0).dtype();
  HostTensor expected(dtype, inputs[0].count());
  std::vector<double> values(inputs.size());
  const size_t head = std::min(expected.count(), kPeriod);
  for (size_t i = 0; i < head; ++i) {
    for (size_t r = 0; r < inputs.size(); ++r) values[r] = inputs[r].Get(i);
    expected.Set(i, ReduceReference(op, dtype, values.data(), values.size()));
  }
  expected.Repeat(kPeriod);
  return expected;
}

testing::AssertionResult SameValues(const HostTensor& actual, const HostTensor& expected,
                                    double relative_tolerance) {
  if (actual.count() != expected.count() || actual.dtype() != expected.dtype()) {
    return testing::AssertionFailure()
           << "holds " << actual.count() << " " << DtypeName(actual.dtype())
           << " elements, expected " << expected.count() << " " << DtypeName(expected.dtype());
  }
  if (actual == expected) return testing::AssertionSuccess();  // the usual case, fast
  size_t mismatches = 0;
  std::ostringstream detail;
  for (size_t i = 0; i < expected.count(); ++i) {
    const double got = actual.Get(i);
    const double want = expected.Get(i);
    const bool same = got == want || (relative_tolerance > 0 &&
                                      std::fabs(got - want) <=
                                          relative_tolerance * std::max(1.0, std::fabs(want)));
    if (same) continue;
    if (++mismatches <= 5) detail << "\n    [" << i << "] is " << got << ", expected " << want;
  }
  if (mismatches == 0) return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << mismatches << " of " << expected.count() << " " << DtypeName(actual.dtype())
         << " elements differ" << detail.str() << (mismatches > 5 ? "\n    ..." : "");
}

}  // namespace chorus::conformance::internal
