// The fashion_mnist example's CNN compute class (oneDNN): parameters and their initial values,
// gradients against finite differences, logits against a plain-loop reference, empty batches,
// bad labels, a short training run; and its speed per batch, printed.
#include "cnn.h"

#include <chorus/base/error.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "invalid_argument_of.h"
#include "synthetic_data.h"

namespace fashion_mnist {
namespace {

constexpr int64_t kPixels = 28 * 28;
constexpr int kClasses = 10;

std::vector<const float*> Pointers(const std::vector<std::vector<float>>& arrays) {
  std::vector<const float*> pointers;
  for (const std::vector<float>& a : arrays) pointers.push_back(a.data());
  return pointers;
}

struct Batch {
  std::vector<float> images;
  std::vector<int32_t> labels;
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

Batch RandomBatch(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  Batch batch;
  for (int64_t i = 0; i < n * kPixels; ++i) batch.images.push_back(pixel(rng));
  for (int64_t i = 0; i < n; ++i) batch.labels.push_back(static_cast<int32_t>(rng() % kClasses));
  return batch;
}

// Initial values with the biases made nonzero too, so that their paths are exercised.
std::vector<std::vector<float>> TestWeights(uint64_t seed) {
  std::vector<std::vector<float>> weights = CnnInitialValues({.l2 = 0, .seed = seed});
  std::mt19937_64 rng(seed + 1000);
  std::uniform_real_distribution<float> small(-0.05f, 0.05f);
  for (size_t k = 0; k < weights.size(); ++k) {
    if (!CnnParameters()[k].is_kernel) {
      for (float& b : weights[k]) b = small(rng);
    }
  }
  return weights;
}

// The model in plain loops, in double, on Keras-layout weights, one example at a time, in three
// stages whose outputs can be kept: the finite differences of a dense weight rerun only the last.
// Conv2D(3x3, valid, relu) then MaxPooling2D(2x2) on a side x side x in_channels map (h, w, c).
std::vector<double> ConvReluPool(const std::vector<double>& in, int64_t side, int64_t in_channels,
                                 const std::vector<float>& kernel, const std::vector<float>& bias) {
  const int64_t channels = static_cast<int64_t>(bias.size());
  const int64_t conv_side = side - 2, out_side = conv_side / 2;
  std::vector<double> conv(static_cast<size_t>(conv_side * conv_side * channels));
  for (int64_t y = 0; y < conv_side; ++y) {
    for (int64_t x = 0; x < conv_side; ++x) {
      double* out = conv.data() + (y * conv_side + x) * channels;
      std::copy(bias.begin(), bias.end(), out);
      for (int64_t ky = 0; ky < 3; ++ky) {
        for (int64_t kx = 0; kx < 3; ++kx) {
          const double* pixel = in.data() + ((y + ky) * side + x + kx) * in_channels;
          const float* taps = kernel.data() + (ky * 3 + kx) * in_channels * channels;
          for (int64_t c = 0; c < in_channels; ++c) {
            for (int64_t o = 0; o < channels; ++o) out[o] += pixel[c] * taps[c * channels + o];
          }
        }
      }
      for (int64_t o = 0; o < channels; ++o) out[o] = std::max(out[o], 0.0);
    }
  }
  std::vector<double> pooled(static_cast<size_t>(out_side * out_side * channels), -1e300);
  for (int64_t y = 0; y < 2 * out_side; ++y) {
    for (int64_t x = 0; x < 2 * out_side; ++x) {
      const double* from = conv.data() + (y * conv_side + x) * channels;
      double* to = pooled.data() + ((y / 2) * out_side + x / 2) * channels;
      for (int64_t c = 0; c < channels; ++c) to[c] = std::max(to[c], from[c]);
    }
  }
  return pooled;
}

std::vector<double> Dense(const std::vector<double>& in, const std::vector<float>& kernel,
                          const std::vector<float>& bias, bool relu) {
  const size_t outputs = bias.size();
  std::vector<double> out(bias.begin(), bias.end());
  for (size_t i = 0; i < in.size(); ++i) {
    for (size_t o = 0; o < outputs; ++o) out[o] += in[i] * kernel[i * outputs + o];
  }
  if (relu) {
    for (double& v : out) v = std::max(v, 0.0);
  }
  return out;
}

class Reference {
 public:
  Reference(const std::vector<std::vector<float>>& weights, const Batch& batch)
      : weights_(weights), batch_(batch) {}

  // Logits [n, 10], when only weights[changed] may differ from the previous call (and weights
  // [changed] of the call before, which the caller put back).
  std::vector<double> Logits(size_t changed = 0) {
    const size_t first_changed = std::min(changed, last_changed_);
    last_changed_ = changed;
    const auto n = static_cast<size_t>(batch_.size());
    if (first_changed < 2 || pooled1_.size() != n) {
      pooled1_.clear();
      for (size_t i = 0; i < n; ++i) {
        const std::vector<double> image(
            batch_.images.begin() + static_cast<int64_t>(i) * kPixels,
            batch_.images.begin() + static_cast<int64_t>(i + 1) * kPixels);
        pooled1_.push_back(ConvReluPool(image, 28, 1, weights_[0], weights_[1]));
      }
    }
    if (first_changed < 4 || pooled2_.size() != n) {
      pooled2_.clear();  // [5, 5, 64] per example, flattened h, w, c
      for (const std::vector<double>& p : pooled1_) {
        pooled2_.push_back(ConvReluPool(p, 13, 32, weights_[2], weights_[3]));
      }
    }
    std::vector<double> logits;
    for (const std::vector<double>& p : pooled2_) {
      const std::vector<double> z =
          Dense(Dense(p, weights_[4], weights_[5], true), weights_[6], weights_[7], false);
      logits.insert(logits.end(), z.begin(), z.end());
    }
    return logits;
  }

 private:
  const std::vector<std::vector<float>>& weights_;
  const Batch& batch_;
  size_t last_changed_ = 0;
  std::vector<std::vector<double>> pooled1_, pooled2_;
};

std::vector<double> ReferenceLogits(const std::vector<std::vector<float>>& w, const Batch& batch) {
  return Reference(w, batch).Logits();
}

TEST(CnnParameters, KerasNamesShapesAndInitialValues) {
  const std::vector<ParameterSpec>& specs = CnnParameters();
  ASSERT_EQ(specs.size(), 8u);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"conv2d/kernel", {3, 3, 1, 32}},    {"conv2d/bias", {32}},
      {"conv2d_1/kernel", {3, 3, 32, 64}}, {"conv2d_1/bias", {64}},
      {"dense/kernel", {1600, 64}},        {"dense/bias", {64}},
      {"dense_1/kernel", {64, 10}},        {"dense_1/bias", {10}}};
  const std::vector<double> glorot_limits = {std::sqrt(6.0 / (9 + 9 * 32)),
                                             std::sqrt(6.0 / (9 * 32 + 9 * 64)),
                                             std::sqrt(6.0 / (1600 + 64)), std::sqrt(6.0 / 74)};
  const std::vector<std::vector<float>> values = CnnInitialValues({.seed = 7});
  ASSERT_EQ(values.size(), 8u);
  size_t kernel = 0;
  for (size_t k = 0; k < specs.size(); ++k) {
    EXPECT_EQ(specs[k].name, expected[k].first);
    EXPECT_EQ(specs[k].shape, expected[k].second);
    EXPECT_EQ(specs[k].is_kernel, k % 2 == 0);
    int64_t size = 1;
    for (int64_t d : specs[k].shape) size *= d;
    ASSERT_EQ(values[k].size(), static_cast<size_t>(size)) << specs[k].name;
    if (!specs[k].is_kernel) {
      for (float v : values[k]) EXPECT_EQ(v, 0.0f) << specs[k].name;
      continue;
    }
    const double limit = glorot_limits[kernel++];
    double max_abs = 0;
    for (float v : values[k]) max_abs = std::max(max_abs, std::abs(double{v}));
    EXPECT_LE(max_abs, limit) << specs[k].name;
    EXPECT_GT(max_abs, 0.9 * limit) << specs[k].name << ": values fill [-limit, limit)";
  }
  EXPECT_EQ(CnnInitialValues({.seed = 7}), values);
  EXPECT_NE(CnnInitialValues({.seed = 8})[0], values[0]);
  EXPECT_NE(CnnInitialValues({.seed = 8})[4], values[4]);
}

TEST(CnnCompute, LogitsMatchAPlainLoopReference) {
  const std::vector<std::vector<float>> weights = TestWeights(3);
  const Batch batch = RandomBatch(5, 11);
  CnnCompute cnn({}, 1);
  const CnnOutputs out =
      cnn.Forward(Pointers(weights), batch.images.data(), batch.labels.data(), batch.size());
  const std::vector<double> expected = ReferenceLogits(weights, batch);
  ASSERT_EQ(out.logits.size(), expected.size());
  ASSERT_EQ(out.per_example_loss.size(), 5u);
  double scale = 0;
  for (double v : expected) scale = std::max(scale, std::abs(v));
  ASSERT_GT(scale, 0.01);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(out.logits[i], expected[i], 1e-4 * scale) << "logit " << i;
  }
  for (int64_t i = 0; i < batch.size(); ++i) {
    const double* z = expected.data() + i * kClasses;
    double total = 0;
    for (int c = 0; c < kClasses; ++c) total += std::exp(z[c]);
    EXPECT_NEAR(out.per_example_loss[static_cast<size_t>(i)],
                std::log(total) - z[batch.labels[static_cast<size_t>(i)]], 1e-4);
  }
  double squared = 0;
  for (size_t k = 0; k < 8; k += 2) {
    for (float v : weights[k]) squared += double{v} * v;
  }
  EXPECT_NEAR(out.regularization_loss, 1e-5 * squared, 1e-6 * 1e-5 * squared);

  // Another batch size, then the first again: each gets its own primitives.
  const Batch big = RandomBatch(17, 12);
  const CnnOutputs big_out =
      cnn.Forward(Pointers(weights), big.images.data(), big.labels.data(), big.size());
  const std::vector<double> big_expected = ReferenceLogits(weights, big);
  for (size_t i = 0; i < big_expected.size(); ++i) {
    EXPECT_NEAR(big_out.logits[i], big_expected[i], 1e-4 * scale) << "logit " << i;
  }
  EXPECT_EQ(
      cnn.Forward(Pointers(weights), batch.images.data(), batch.labels.data(), batch.size()).logits,
      out.logits);
}

// Finite differences of the objective through the double-precision reference (which the test
// above ties to Forward's logits). In f32 through Forward itself they do not work: with steps
// large enough to beat f32 rounding (1e-3 and up), a conv weight's step moves dozens of the
// thousands of relu inputs and max-pool windows it feeds across their kinks, and a sixth of the
// coordinates came out 5-20% off. In double a step of 1e-5 crosses a kink rarely; a coordinate
// whose difference quotients for two steps disagree has one nearby and is skipped.
TEST(CnnCompute, GradientsMatchFiniteDifferences) {
  const CnnConfig config{.l2 = 1e-2f, .seed = 5};
  std::vector<std::vector<float>> weights = TestWeights(5);
  const Batch batch = RandomBatch(3, 21);
  const double loss_scale = 1.0 / 3, regularization_scale = 0.5;
  CnnCompute cnn(config, 1);
  std::vector<std::vector<float>> gradients;
  cnn.ForwardBackward(Pointers(weights), batch.images.data(), batch.labels.data(), 3, loss_scale,
                      regularization_scale, gradients);
  ASSERT_EQ(gradients.size(), 8u);

  Reference reference(weights, batch);
  auto objective = [&](size_t changed) {
    const std::vector<double> logits = reference.Logits(changed);
    double loss = 0;
    for (int64_t i = 0; i < batch.size(); ++i) {
      const double* z = logits.data() + i * kClasses;
      double total = 0;
      for (int c = 0; c < kClasses; ++c) total += std::exp(z[c]);
      loss += std::log(total) - z[batch.labels[static_cast<size_t>(i)]];
    }
    double squared = 0;
    for (size_t k = 0; k < weights.size(); k += 2) {
      for (float v : weights[k]) squared += double{v} * v;
    }
    return loss_scale * loss + regularization_scale * config.l2 * squared;
  };
  // The central difference quotient at weights[k][i] for a step of about `step`.
  auto difference_quotient = [&](size_t k, size_t i, float step) {
    const float original = weights[k][i];
    weights[k][i] = original + step;
    const double up_delta = double{weights[k][i]} - original;  // the step f32 can represent
    const double up = objective(k);
    weights[k][i] = original - step;
    const double down_delta = double{original} - weights[k][i];
    const double down = objective(k);
    weights[k][i] = original;
    return (up - down) / (up_delta + down_delta);
  };

  std::mt19937_64 rng(99);
  int checked = 0;
  for (size_t k = 0; k < weights.size(); ++k) {
    ASSERT_EQ(gradients[k].size(), weights[k].size());
    int checked_here = 0;
    for (int sample = 0; sample < 20; ++sample) {
      const size_t i = static_cast<size_t>(rng() % weights[k].size());
      const double numeric = difference_quotient(k, i, 1e-5f);
      const double analytic = gradients[k][i];
      if (std::abs(numeric - analytic) > 1e-5 + 2e-3 * std::abs(numeric)) {
        const double numeric_smaller_step = difference_quotient(k, i, 3e-6f);
        if (std::abs(numeric - numeric_smaller_step) > 1e-7 + 1e-4 * std::abs(numeric)) continue;
      }
      EXPECT_LE(std::abs(numeric - analytic), 1e-5 + 2e-3 * std::abs(numeric))
          << CnnParameters()[k].name << "[" << i << "]: analytic " << analytic << ", numeric "
          << numeric;
      ++checked_here;
    }
    EXPECT_GE(checked_here, 10) << CnnParameters()[k].name << ": too many coordinates near a kink";
    checked += checked_here;
  }
  std::printf("CNN gradient check: %d of 160 coordinates away from kinks, all match\n", checked);
}
TEST(CnnCompute, EmptyBatchHasNoLossAndOnlyTheRegularizationGradient) {
  const CnnConfig config{.l2 = 1e-3f};
  const std::vector<std::vector<float>> weights = TestWeights(4);
  CnnCompute cnn(config, 1);
  const CnnOutputs forward = cnn.Forward(Pointers(weights), nullptr, nullptr, 0);
  EXPECT_TRUE(forward.per_example_loss.empty());
  EXPECT_TRUE(forward.logits.empty());
  EXPECT_GT(forward.regularization_loss, 0.0f);
  std::vector<std::vector<float>> gradients(8, std::vector<float>(3, 1.0f));  // resized, cleared
  cnn.ForwardBackward(Pointers(weights), nullptr, nullptr, 0, 1.0, 0.25, gradients);
  ASSERT_EQ(gradients.size(), 8u);
  for (size_t k = 0; k < 8; ++k) {
    ASSERT_EQ(gradients[k].size(), weights[k].size());
    for (size_t i = 0; i < weights[k].size(); ++i) {
      const float expected = CnnParameters()[k].is_kernel ? 2 * 0.25f * 1e-3f * weights[k][i] : 0;
      ASSERT_NEAR(gradients[k][i], expected, 1e-12) << CnnParameters()[k].name << "[" << i << "]";
    }
  }
}

TEST(CnnCompute, BadLabelsAndCountsAreErrors) {
  const std::vector<std::vector<float>> weights = CnnInitialValues({});
  Batch batch = RandomBatch(4, 1);
  CnnCompute cnn({}, 1);
  std::vector<std::vector<float>> gradients;
  batch.labels[2] = 10;
  const std::string message = test::InvalidArgumentOf([&] {
    cnn.ForwardBackward(Pointers(weights), batch.images.data(), batch.labels.data(), 4, 0.25, 1,
                        gradients);
  });
  EXPECT_NE(message.find("label 10 of example 2"), std::string::npos) << message;
  EXPECT_NE(message.find("[0, 10)"), std::string::npos) << message;
  batch.labels[2] = -1;
  EXPECT_NE(test::InvalidArgumentOf([&] {
              cnn.Forward(Pointers(weights), batch.images.data(), batch.labels.data(), 4);
            }).find("label -1 of example 2"),
            std::string::npos);
  EXPECT_NE(test::InvalidArgumentOf([&] {
              cnn.Forward(Pointers(weights), batch.images.data(), batch.labels.data(), -1);
            }).find("n >= 0"),
            std::string::npos);
}

// Replicas are plain threads, each with its own CnnCompute: they run at the same time and get what
// one thread alone gets.
TEST(CnnCompute, ReplicaThreadsMatchOneThread) {
  const std::vector<std::vector<float>> weights = TestWeights(6);
  const Batch batch = RandomBatch(16, 31);
  auto run = [&](CnnCompute& cnn, CnnOutputs& out, std::vector<std::vector<float>>& gradients) {
    for (int repeat = 0; repeat < 5; ++repeat) {
      out = cnn.ForwardBackward(Pointers(weights), batch.images.data(), batch.labels.data(), 16,
                                1.0 / 32, 0.5, gradients);
    }
  };
  CnnCompute alone({}, 1);
  CnnOutputs expected;
  std::vector<std::vector<float>> expected_gradients;
  run(alone, expected, expected_gradients);

  std::vector<CnnCompute> replicas;
  replicas.emplace_back(CnnConfig{}, 1);
  replicas.emplace_back(CnnConfig{}, 1);
  std::vector<CnnOutputs> outs(2);
  std::vector<std::vector<std::vector<float>>> gradients(2);
  {
    std::vector<std::jthread> threads;
    for (size_t r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] { run(replicas[r], outs[r], gradients[r]); });
    }
  }
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(outs[r].logits, expected.logits) << "replica " << r;
    EXPECT_EQ(outs[r].per_example_loss, expected.per_example_loss) << "replica " << r;
    EXPECT_EQ(gradients[r], expected_gradients) << "replica " << r;
  }
}

TEST(CnnCompute, SgdOnAFixedBatchHalvesTheLoss) {
  const ImageSet data = GenerateSyntheticData(3, 64, 0).train;
  ASSERT_EQ(data.size(), 64);
  CnnConfig config;
  std::vector<std::vector<float>> weights = CnnInitialValues(config);
  CnnCompute cnn(config, 1);
  std::vector<std::vector<float>> gradients;
  auto mean_loss = [](const CnnOutputs& out) {
    double sum = 0;
    for (float l : out.per_example_loss) sum += l;
    return sum / static_cast<double>(out.per_example_loss.size());
  };
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    const CnnOutputs out = cnn.ForwardBackward(Pointers(weights), data.pixels.data(),
                                               data.labels.data(), 64, 1.0 / 64, 1.0, gradients);
    (step == 0 ? first : last) = mean_loss(out);
    for (size_t k = 0; k < weights.size(); ++k) {
      for (size_t i = 0; i < weights[k].size(); ++i) weights[k][i] -= 0.05f * gradients[k][i];
    }
  }
  last = mean_loss(
      cnn.Forward(Pointers(weights), data.pixels.data(), data.labels.data(), data.size()));
  std::printf("CNN SGD on 64 synthetic examples: mean loss %.4f -> %.4f after 200 steps\n", first,
              last);
  EXPECT_LT(last, first / 2);
}

TEST(CnnCompute, PrintsMillisecondsPerBatch) {
  const std::vector<std::vector<float>> weights = CnnInitialValues({});
  std::vector<std::vector<float>> gradients;
  for (int threads : {1, 2}) {
    CnnCompute cnn({}, threads);
    for (int64_t n : {16, 64}) {
      const Batch batch = RandomBatch(n, 5);
      auto step = [&] {
        return cnn.ForwardBackward(Pointers(weights), batch.images.data(), batch.labels.data(), n,
                                   1.0 / static_cast<double>(n), 1.0, gradients);
      };
      step();  // builds the primitives
      const int repeats = n == 16 ? 20 : 5;
      const auto start = std::chrono::steady_clock::now();
      for (int r = 0; r < repeats; ++r) step();
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count() /
          repeats;
      std::printf("CNN forward+backward, %d thread(s), batch %3lld: %.2f ms\n", threads,
                  static_cast<long long>(n), ms);
      EXPECT_EQ(step().per_example_loss.size(), static_cast<size_t>(n));
    }
  }
}

}  // namespace
}  // namespace fashion_mnist
