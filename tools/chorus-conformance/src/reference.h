// Host-side reference for the conformance checks: dtype conversion through double, input values
// whose results are exact in every dtype, the reference reduce, and element-wise comparison.
#ifndef CHORUS_CONFORMANCE_REFERENCE_H_
#define CHORUS_CONFORMANCE_REFERENCE_H_

#include <chorus/plugin.h>
#include <gtest/gtest.h>

#include <chorus/plugin_sdk.hpp>
#include <cstddef>
#include <string>
#include <vector>

namespace chorus::conformance::internal {

// The odd element count every sweep runs: no vector width or chunk size divides it.
inline constexpr size_t kOddCount = 1001;

// The sweep CHORUS_CONFORMANCE_SWEEP asks for: "full" (unset: every dtype x reduce op at every
// count) or "short": the large count only for one dtype of each element size (u8, f16, f32, f64)
// with SUM; every other case as in the full sweep. What a memory or race checker finds in a
// plugin depends on the sizes, the element size and the aliasing, not on each reduce op at each
// dtype, and the sanitizer builds' suites (10-50x slower) set it. Throws Error(INVALID_ARGUMENT)
// naming the variable for another value.
bool ShortSweep();
// Whether the sweep runs this case (always true in the full sweep).
bool InSweep(chorus_dtype dtype, chorus_reduce_op op, size_t count);

// Every dtype of ABI 1.0 and every reduce op a plugin receives (MEAN is the core's).
const std::vector<chorus_dtype>& Dtypes();
const std::vector<chorus_reduce_op>& PluginReduceOps();

bool IsInteger(chorus_dtype dtype);
// Relative spacing of the dtype's values near 1 (0 for integers).
double Epsilon(chorus_dtype dtype);

// `value` after a round trip through the dtype (sdk::StoreElement, then sdk::LoadElement).
double Representable(chorus_dtype dtype, double value);

// Input values. Every reference result below is exact in every dtype:
//  kSmall (SUM, MEAN, MIN, MAX): -2..3 (0..3 for u8), so sums over <= 8 replicas stay in
//    -16..24: exact in f16, bf16, i8 and u8.
//  kProduct (PROD): mostly 1, a 2 where (replica + index) % 4 == 0 (at most two of 8 replicas),
//    sometimes -1 (signed types) or 0: products stay within -4..4.
//  kData (broadcast, all_gather): 0..100, distinct per replica and position.
// A value depends on the replica and on index % kPeriod only; kPeriod is a prime, so that no
// chunking of a plugin's (a power of two, count / replicas) lines up with it, and a tensor is
// computed for one period and copied for the rest (the sweep stays fast).
enum class Pattern { kSmall, kProduct, kData };
inline constexpr size_t kPeriod = 1009;
Pattern PatternFor(chorus_reduce_op op);
double InputValue(chorus_dtype dtype, Pattern pattern, size_t replica, size_t index);

// op over `values` in double. MEAN is SUM divided by the number of values; for integer dtypes it
// rounds toward zero, as the core's divide kernel does (plugin.h, chorus_divide_args). The
// result is then rounded to the dtype.
double ReduceReference(chorus_reduce_op op, chorus_dtype dtype, const double* values, size_t n);

// `count` elements of one dtype in host memory, zeroed at first. Its storage comes from and goes
// back to reused_bytes.h.
class HostTensor {
 public:
  HostTensor(chorus_dtype dtype, size_t count);
  HostTensor(const HostTensor& other);
  HostTensor& operator=(const HostTensor& other);
  HostTensor(HostTensor&& other) noexcept = default;
  HostTensor& operator=(HostTensor&& other) noexcept;
  ~HostTensor();
  chorus_dtype dtype() const { return dtype_; }
  size_t count() const { return count_; }
  size_t bytes() const { return bytes_.size(); }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  double Get(size_t i) const { return sdk::LoadElement(bytes_.data(), i, dtype_); }
  void Set(size_t i, double value) { sdk::StoreElement(bytes_.data(), i, dtype_, value); }
  // Fills with one input pattern of one replica, starting at position `offset`.
  void Fill(Pattern pattern, size_t replica, size_t offset = 0);
  // Copies elements [0, period) over the rest: element i becomes element i % period.
  void Repeat(size_t period);
  bool operator==(const HostTensor& other) const {
    return dtype_ == other.dtype_ && bytes_ == other.bytes_;
  }

 private:
  chorus_dtype dtype_;
  size_t count_;
  std::vector<unsigned char> bytes_;
};

// The reference reduce of `inputs` (one per replica, each made by Fill, so kPeriod-periodic).
HostTensor ExpectedReduce(chorus_reduce_op op, const std::vector<HostTensor>& inputs);

// Compares `actual` to `expected`. Exact (byte for byte) when relative_tolerance is 0; else
// |actual - expected| <= relative_tolerance * max(1, |expected|). Names up to five mismatching
// elements and how many there were.
testing::AssertionResult SameValues(const HostTensor& actual, const HostTensor& expected,
                                    double relative_tolerance = 0);

}  // namespace chorus::conformance::internal

#endif  // CHORUS_CONFORMANCE_REFERENCE_H_
