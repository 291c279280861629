// A small model for the fit loop's tests: softmax regression (logits = x W + b) with L2 on W,
// its forward and backward pass in plain double loops. Header-only, shared by the unit tests and
// the multi-process task.
#ifndef CHORUS_TESTS_SUPPORT_LINEAR_SOFTMAX_MODEL_H_
#define CHORUS_TESTS_SUPPORT_LINEAR_SOFTMAX_MODEL_H_

#include <chorus/distribute/dataset.h>
#include <chorus/training/fit.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace chorus::testing {

class LinearSoftmaxModel : public TrainableModel {
 public:
  // Creates W [inputs, classes] (small seeded values) and b [classes] in the current scope.
  LinearSoftmaxModel(int64_t inputs, int64_t classes, float l2, uint64_t seed = 1)
      : inputs_(inputs), classes_(classes), l2_(l2) {
    std::mt19937_64 rng(seed);
    std::vector<float> w(static_cast<size_t>(inputs * classes));
    for (float& v : w) v = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-53 - 0.5);
    VariableSpec spec;
    spec.name = "linear/kernel";
    kernel_ = Variable::Create(spec, {inputs, classes}, w);
    spec.name = "linear/bias";
    bias_ = Variable::Create(spec, {classes}, std::vector<float>(static_cast<size_t>(classes)));
  }

  std::vector<Variable> trainable_variables() const override { return {kernel_, bias_}; }

  StepOutputs TrainStep(const Device& device, const Batch& batch, const LossScale& scale,
                        std::vector<Tensor>& gradients) override {
    const std::vector<float> w = kernel_.value().ToVector(), b = bias_.value().ToVector();
    const HostBatch host = CopyToHost(batch);
    StepOutputs out = Forward(w, b, host);
    std::vector<double> dw(w.size(), 0.0), db(b.size(), 0.0);
    const auto k = static_cast<size_t>(classes_);
    for (int64_t i = 0; i < host.size; ++i) {
      const float* logits = out.logits.data() + i * classes_;
      const std::vector<double> p = Softmax(logits);
      for (size_t c = 0; c < k; ++c) {
        const double g =
            (p[c] - (static_cast<int32_t>(c) == host.labels[static_cast<size_t>(i)] ? 1 : 0)) *
            scale.per_example;
        db[c] += g;
        for (int64_t j = 0; j < inputs_; ++j) {
          dw[static_cast<size_t>(j) * k + c] +=
              g * host.features[static_cast<size_t>(i * inputs_ + j)];
        }
      }
    }
    std::vector<float> gw(w.size()), gb(b.size());
    for (size_t i = 0; i < w.size(); ++i) {
      gw[i] = static_cast<float>(dw[i] + scale.regularization * 2.0 * l2_ * w[i]);
    }
    for (size_t i = 0; i < b.size(); ++i) gb[i] = static_cast<float>(db[i]);
    gradients = {Tensor::FromVector(device, kernel_.shape(), gw),
                 Tensor::FromVector(device, bias_.shape(), gb)};
    return out;
  }

  StepOutputs TestStep(const Device& device, const Batch& batch) override {
    (void)device;
    return Forward(kernel_.value().ToVector(), bias_.value().ToVector(), CopyToHost(batch));
  }

  // The forward pass on host values, for hand counts.
  StepOutputs Forward(const std::vector<float>& w, const std::vector<float>& b,
                      const HostBatch& host) const {
    StepOutputs out;
    out.num_classes = classes_;
    const auto k = static_cast<size_t>(classes_);
    for (int64_t i = 0; i < host.size; ++i) {
      std::vector<double> z(b.begin(), b.end());
      for (int64_t j = 0; j < inputs_; ++j) {
        const double x = host.features[static_cast<size_t>(i * inputs_ + j)];
        for (size_t c = 0; c < k; ++c) z[c] += x * w[static_cast<size_t>(j) * k + c];
      }
      for (double v : z) out.logits.push_back(static_cast<float>(v));
      const std::vector<double> p = Softmax(out.logits.data() + i * classes_);
      out.per_example_loss.push_back(static_cast<float>(
          -std::log(std::max(p[static_cast<size_t>(host.labels[static_cast<size_t>(i)])], 1e-30))));
    }
    double squares = 0;
    for (float v : w) squares += static_cast<double>(v) * v;
    out.regularization_loss = static_cast<float>(l2_ * squares);
    return out;
  }

  const Variable& kernel() const { return kernel_; }
  const Variable& bias() const { return bias_; }

 private:
  std::vector<double> Softmax(const float* logits) const {
    const auto k = static_cast<size_t>(classes_);
    const double peak = *std::max_element(logits, logits + k);
    std::vector<double> p(k);
    double total = 0;
    for (size_t c = 0; c < k; ++c) total += p[c] = std::exp(logits[c] - peak);
    for (double& v : p) v /= total;
    return p;
  }

  int64_t inputs_, classes_;
  float l2_;
  Variable kernel_, bias_;
};

// n examples of `inputs` features in [0, 1) with labels from a fixed random linear rule.
inline Dataset SeparableData(int64_t n, int64_t inputs, int64_t classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto uniform = [&rng] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  std::vector<double> rule(static_cast<size_t>(inputs * classes));
  for (double& v : rule) v = uniform() * 2 - 1;
  std::vector<float> features;
  std::vector<int32_t> labels;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> score(static_cast<size_t>(classes), 0.0);
    for (int64_t j = 0; j < inputs; ++j) {
      const double x = uniform();
      features.push_back(static_cast<float>(x));
      for (int64_t c = 0; c < classes; ++c) {
        score[static_cast<size_t>(c)] += x * rule[static_cast<size_t>(j * classes + c)];
      }
    }
    labels.push_back(
        static_cast<int32_t>(std::max_element(score.begin(), score.end()) - score.begin()));
  }
  return Dataset::FromExamples({inputs}, std::move(features), std::move(labels));
}

}  // namespace chorus::testing

#endif  // CHORUS_TESTS_SUPPORT_LINEAR_SOFTMAX_MODEL_H_
