// Helpers for the tests of the core's tcp transport, ring algorithm and core_ring collective:
// the builtin plugin's tables, ranks as threads (the conformance kit's harness), and typed values
// that are exact in every dtype.
#ifndef CHORUS_TESTS_UNIT_RING_TEST_UTIL_H_
#define CHORUS_TESTS_UNIT_RING_TEST_UTIL_H_

#include <chorus/conformance/rank_threads.h>
#include <chorus/runtime/plugin_library.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>

#include <chorus/plugin_sdk.hpp>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace chorus::ring_test {

// The builtin plugin "core", loaded with no other plugin.
inline const std::shared_ptr<PluginLibrary>& CorePlugin() {
  static const std::shared_ptr<PluginLibrary> core = [] {
    LoaderOptions options;
    options.filter = "none";
    static Registry registry(options);
    return registry.FindPlugin(kBuiltinPluginName);
  }();
  return core;
}
inline const PluginLibrary& Core() { return *CorePlugin(); }

// Runs body(rank) on `size` rank threads at once (conformance::RunRankThreads); a rank whose body
// throws or returns a failure fails the test, naming the rank.
template <typename Body>
void RunRanks(int size, Body&& body) {
  EXPECT_EQ(conformance::RunRankThreads(size, std::forward<Body>(body)).Joined(), "");
}

// Element i of a buffer of `dtype`, as a double; and the other way round. Every value the tests
// use is a small integer, exact in every dtype (bf16 holds integers up to 256 exactly).
inline double Load(chorus_dtype dtype, const std::vector<uint8_t>& buffer, size_t i) {
  return sdk::LoadElement(buffer.data(), i, dtype);
}

inline void Store(chorus_dtype dtype, std::vector<uint8_t>& buffer, size_t i, double value) {
  sdk::StoreElement(buffer.data(), i, dtype, value);
}

// Rank `rank`'s input element i for a reduce with `op`: 1..5 (sums of up to 5 ranks stay
// within 25), or 1..2 for PROD (products stay within 32).
inline double InputValue(chorus_reduce_op op, int rank, size_t i) {
  if (op == CHORUS_REDUCE_PROD)
    return 1.0 + static_cast<double>((i + static_cast<size_t>(rank)) % 2);
  return 1.0 + static_cast<double>((i + 3 * static_cast<size_t>(rank)) % 5);
}

inline double Combine(chorus_reduce_op op, double a, double b) {
  switch (op) {
    case CHORUS_REDUCE_PROD:
      return a * b;
    case CHORUS_REDUCE_MIN:
      return a < b ? a : b;
    case CHORUS_REDUCE_MAX:
      return a > b ? a : b;
    default:
      return a + b;
  }
}

// The reduction over ranks 0..size-1 of InputValue(op, r, i).
inline double Reduced(chorus_reduce_op op, int size, size_t i) {
  double value = InputValue(op, 0, i);
  for (int r = 1; r < size; ++r) value = Combine(op, value, InputValue(op, r, i));
  return value;
}

// A buffer of count elements with value(i) in each.
inline std::vector<uint8_t> Filled(chorus_dtype dtype, size_t count,
                                   const std::function<double(size_t)>& value) {
  std::vector<uint8_t> buffer(count * chorus_dtype_size(dtype));
  for (size_t i = 0; i < count; ++i) Store(dtype, buffer, i, value(i));
  return buffer;
}

// As Filled, for a value(i) that repeats every `period` elements: only the first period is
// computed, the rest copied (the large sweeps would otherwise spend their time here).
inline std::vector<uint8_t> Periodic(chorus_dtype dtype, size_t count, size_t period,
                                     const std::function<double(size_t)>& value) {
  const size_t element = chorus_dtype_size(dtype);
  std::vector<uint8_t> buffer(count * element);
  const size_t head = count < period ? count : period;
  for (size_t i = 0; i < head; ++i) Store(dtype, buffer, i, value(i));
  for (size_t filled = head; filled < count;) {
    const size_t n = filled < count - filled ? filled : count - filled;
    std::memcpy(buffer.data() + filled * element, buffer.data(), n * element);
    filled += n;
  }
  return buffer;
}

// Checks that two buffers hold the same elements; reports the first difference only.
inline void ExpectSame(chorus_dtype dtype, const std::vector<uint8_t>& got,
                       const std::vector<uint8_t>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if (got.empty() || std::memcmp(got.data(), want.data(), got.size()) == 0) return;
  const size_t element = chorus_dtype_size(dtype);
  for (size_t i = 0; i < got.size() / element; ++i) {
    if (std::memcmp(got.data() + i * element, want.data() + i * element, element) != 0) {
      ADD_FAILURE() << what << ": element " << i << " of " << got.size() / element << " is "
                    << Load(dtype, got, i) << ", expected " << Load(dtype, want, i);
      return;
    }
  }
}

// Checks every element against expected(i); reports the first mismatch only.
inline void ExpectValues(chorus_dtype dtype, const std::vector<uint8_t>& buffer, size_t count,
                         const std::function<double(size_t)>& expected, const std::string& what) {
  for (size_t i = 0; i < count; ++i) {
    const double got = Load(dtype, buffer, i);
    const double want = expected(i);
    if (got != want) {
      ADD_FAILURE() << what << ": element " << i << " of " << count << " is " << got
                    << ", expected " << want;
      return;
    }
  }
}

}  // namespace chorus::ring_test

#endif  // CHORUS_TESTS_UNIT_RING_TEST_UTIL_H_
