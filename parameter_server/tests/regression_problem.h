// The convex problem of the tests: least squares y = x . w* + noise over kFeatures features,
// the same examples in the test (the chief) and in ps_test_task (the workers).
#pragma once

#include <chorus/distribute/dataset.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace chorus::test {

inline constexpr int64_t kFeatures = 8;
inline constexpr int64_t kExamples = 2048;
inline constexpr int64_t kBatch = 32;

inline std::vector<float> TrueWeights() {
  std::vector<float> w(kFeatures);
  for (int64_t i = 0; i < kFeatures; ++i)
    w[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i) - 1.5f;
  return w;
}

// Each example is kFeatures inputs then its target y, one row of kFeatures + 1.
inline std::vector<float> RegressionRows() {
  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::normal_distribution<float> noise(0.0f, 0.1f);
  const std::vector<float> w = TrueWeights();
  std::vector<float> rows;
  for (int64_t n = 0; n < kExamples; ++n) {
    float y = 0;
    for (int64_t i = 0; i < kFeatures; ++i) {
      const float x = uniform(random);
      rows.push_back(x);
      y += x * w[static_cast<size_t>(i)];
    }
    rows.push_back(y + noise(random));
  }
  return rows;
}

inline Dataset RegressionDataset() {
  return Dataset::FromExamples({kFeatures + 1}, RegressionRows(),
                               std::vector<int32_t>(static_cast<size_t>(kExamples), 0));
}

// Mean of 0.5 (x . w - y)^2 over rows of kFeatures + 1 (the loss the workers minimise).
inline double RegressionLoss(const std::vector<float>& rows, const std::vector<float>& w) {
  const size_t stride = static_cast<size_t>(kFeatures + 1);
  double sum = 0;
  const size_t count = rows.size() / stride;
  for (size_t n = 0; n < count; ++n) {
    double error = -rows[n * stride + static_cast<size_t>(kFeatures)];
    for (size_t i = 0; i < static_cast<size_t>(kFeatures); ++i)
      error += rows[n * stride + i] * w[i];
    sum += 0.5 * error * error;
  }
  return count == 0 ? 0.0 : sum / static_cast<double>(count);
}

}  // namespace chorus::test
