// Test data in every dtype: small integers, so that every sum, product, min and max over up to
// four ranks is exact in each dtype (bf16 included), whatever order the reduction takes.
#ifndef CHORUS_PLUGINS_GLOO_TESTS_TYPED_VALUES_H_
#define CHORUS_PLUGINS_GLOO_TESTS_TYPED_VALUES_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace chorus::gloo_test {

inline constexpr chorus_dtype kAllDtypes[] = {CHORUS_F32, CHORUS_F64, CHORUS_F16, CHORUS_BF16,
                                              CHORUS_I32, CHORUS_I64, CHORUS_U8,  CHORUS_I8};
inline constexpr chorus_reduce_op kAllOps[] = {CHORUS_REDUCE_SUM, CHORUS_REDUCE_PROD,
                                               CHORUS_REDUCE_MIN, CHORUS_REDUCE_MAX};

// The input of `rank` at element i for a reduction by `op`: in [-4, 4] for SUM, in {1, 2, 3}
// (with a sign for signed types) for PROD, in [-5, 5] for MIN and MAX; never negative for u8.
double InputValue(chorus_dtype dtype, chorus_reduce_op op, int rank, size_t i);

// A value for data that is moved, not reduced (broadcast, all_gather): in [0, 100].
double MovedValue(int rank, size_t i);

// The reduction by `op` of InputValue over ranks 0..size-1 at element i.
double Reduced(chorus_dtype dtype, chorus_reduce_op op, int size, size_t i);

// The (dtype, op) pairs a test runs at `count` elements: every pair up to 100000 elements; above,
// each dtype with one op (the four ops rotate over the eight dtypes), so that the suite stays fast
// in Debug builds while every dtype and every op still runs at the largest count.
std::vector<std::pair<chorus_dtype, chorus_reduce_op>> DtypeOpPairs(size_t count);

// values[i] = f(i) for i < count.
template <typename F>
std::vector<double> Values(size_t count, F&& f) {
  std::vector<double> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = f(i);
  return values;
}

// Elements as bytes of dtype.
class TypedBuffer {
 public:
  TypedBuffer(chorus_dtype dtype, size_t count, unsigned char fill = 0x5a);
  void* data() { return bytes_.data(); }
  size_t count() const { return count_; }
  // Writes values[i] to element offset + i.
  void Set(size_t offset, const std::vector<double>& values);
  double Get(size_t i) const;

 private:
  chorus_dtype dtype_;
  size_t count_;
  std::vector<unsigned char> bytes_;
};

// "" when buffer element offset + i == expected[i] for every i, else the first difference and
// how many differ.
std::string Mismatches(const TypedBuffer& buffer, size_t offset,
                       const std::vector<double>& expected);

}  // namespace chorus::gloo_test

#endif  // CHORUS_PLUGINS_GLOO_TESTS_TYPED_VALUES_H_
