#include "model.h"

#include <chorus/base/error.h>
#include <chorus/distribute/replica_context.h>
#include <chorus/training/loss.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace fashion_mnist {
namespace {

// Uniform in [-limit, limit) from the generator's bits, the same on every platform.
std::vector<float> GlorotUniform(std::mt19937_64& rng, int64_t fan_in, int64_t fan_out) {
  const double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  std::vector<float> values(static_cast<size_t>(fan_in * fan_out));
  for (float& v : values) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    v = static_cast<float>((2 * u - 1) * limit);
  }
  return values;
}

chorus::Variable Create(const std::string& name, chorus::Shape shape,
                        const std::vector<float>& initial) {
  chorus::VariableSpec spec;
  spec.name = name;
  return chorus::Variable::Create(spec, std::move(shape), initial);
}

std::vector<float> HostValues(const chorus::Variable& variable) {
  return variable.value().ToVector();
}

int NumReplicasInSync() {
  const chorus::ReplicaContext* context = chorus::CurrentReplicaContext();
  return context != nullptr ? context->num_replicas_in_sync() : 1;
}

// The activations of one example's forward pass.
struct Activations {
  std::vector<double> hidden_pre;  // before ReLU
  std::vector<double> hidden;      // after ReLU
  std::vector<double> logits;
};

void Forward(const ModelConfig& c, const HostWeights& w, const float* x, Activations& a) {
  a.hidden_pre.assign(w.bias1.begin(), w.bias1.end());
  for (int64_t k = 0; k < c.inputs; ++k) {
    const double xk = x[k];
    if (xk == 0.0) continue;  // adds nothing; images are mostly background
    const float* row = w.kernel1.data() + k * c.hidden;
    for (int64_t j = 0; j < c.hidden; ++j) a.hidden_pre[static_cast<size_t>(j)] += xk * row[j];
  }
  a.hidden.resize(a.hidden_pre.size());
  for (size_t j = 0; j < a.hidden.size(); ++j) a.hidden[j] = std::max(a.hidden_pre[j], 0.0);
  a.logits.assign(w.bias2.begin(), w.bias2.end());
  for (int64_t j = 0; j < c.hidden; ++j) {
    const double hj = a.hidden[static_cast<size_t>(j)];
    if (hj == 0.0) continue;
    const float* row = w.kernel2.data() + j * c.classes;
    for (int64_t o = 0; o < c.classes; ++o) a.logits[static_cast<size_t>(o)] += hj * row[o];
  }
}

// Softmax probabilities of `logits` (in place) and the cross-entropy of `label`.
double SoftmaxCrossEntropy(std::vector<double>& logits, int32_t label) {
  const double peak = *std::max_element(logits.begin(), logits.end());
  double total = 0;
  for (double& z : logits) {
    z = std::exp(z - peak);
    total += z;
  }
  const double label_probability = logits[static_cast<size_t>(label)] / total;
  for (double& z : logits) z /= total;
  return -std::log(std::max(label_probability, 1e-300));
}

int64_t ArgMax(const std::vector<double>& values) {
  return std::max_element(values.begin(), values.end()) - values.begin();
}

void CheckBatch(const ModelConfig& c, const HostExamples& batch) {
  for (int64_t i = 0; i < batch.size; ++i) {
    if (batch.labels[i] < 0 || batch.labels[i] >= c.classes) {
      throw chorus::Error(CHORUS_INVALID_ARGUMENT, "label " + std::to_string(batch.labels[i]) +
                                                       " of example " + std::to_string(i) +
                                                       " is not a class in [0, " +
                                                       std::to_string(c.classes) + ")");
    }
  }
}

}  // namespace

Model::Model(const ModelConfig& config) : config_(config) {
  std::mt19937_64 rng(config.seed);
  const std::vector<float> kernel1 = GlorotUniform(rng, config.inputs, config.hidden);
  const std::vector<float> kernel2 = GlorotUniform(rng, config.hidden, config.classes);
  variables_.push_back(Create("dense/kernel", {config.inputs, config.hidden}, kernel1));
  variables_.push_back(
      Create("dense/bias", {config.hidden}, std::vector<float>(config.hidden, 0.0f)));
  variables_.push_back(Create("dense_1/kernel", {config.hidden, config.classes}, kernel2));
  variables_.push_back(
      Create("dense_1/bias", {config.classes}, std::vector<float>(config.classes, 0.0f)));
}

HostWeights Model::ReadWeights() const {
  return HostWeights{HostValues(variables_[0]), HostValues(variables_[1]),
                     HostValues(variables_[2]), HostValues(variables_[3])};
}

ReplicaStep Model::LossAndGradients(const HostWeights& w, const HostExamples& batch,
                                    int64_t global_batch_size,
                                    std::optional<double> regularization_scale) const {
  const ModelConfig& c = config_;
  CheckBatch(c, batch);
  if (global_batch_size <= 0) global_batch_size = batch.size * NumReplicasInSync();
  const double scale = global_batch_size > 0 ? 1.0 / static_cast<double>(global_batch_size) : 0;
  const auto hidden = static_cast<size_t>(c.hidden);
  const auto classes = static_cast<size_t>(c.classes);

  std::vector<double> d_kernel1(static_cast<size_t>(c.inputs) * hidden, 0.0);
  std::vector<double> d_bias1(hidden, 0.0), d_kernel2(hidden * classes, 0.0), d_bias2(classes, 0.0),
      d_hidden(hidden);
  std::vector<float> per_example_loss(static_cast<size_t>(batch.size));
  ReplicaStep step;
  Activations a;
  for (int64_t i = 0; i < batch.size; ++i) {
    const float* x = batch.features + i * c.inputs;
    Forward(c, w, x, a);
    if (ArgMax(a.logits) == batch.labels[i]) ++step.correct;
    step.logits.insert(step.logits.end(), a.logits.begin(), a.logits.end());
    std::vector<double>& d_logits = a.logits;  // becomes the probabilities, then the gradient
    per_example_loss[static_cast<size_t>(i)] =
        static_cast<float>(SoftmaxCrossEntropy(d_logits, batch.labels[i]));
    d_logits[static_cast<size_t>(batch.labels[i])] -= 1.0;
    for (double& g : d_logits) g *= scale;
    // Second layer.
    for (size_t o = 0; o < classes; ++o) d_bias2[o] += d_logits[o];
    for (size_t j = 0; j < hidden; ++j) {
      const double hj = a.hidden[j];
      const float* row = w.kernel2.data() + j * classes;
      double dh = 0;
      for (size_t o = 0; o < classes; ++o) {
        d_kernel2[j * classes + o] += hj * d_logits[o];
        dh += row[o] * d_logits[o];
      }
      d_hidden[j] = a.hidden_pre[j] > 0.0 ? dh : 0.0;
    }
    // First layer.
    for (size_t j = 0; j < hidden; ++j) d_bias1[j] += d_hidden[j];
    for (int64_t k = 0; k < c.inputs; ++k) {
      const double xk = x[k];
      if (xk == 0.0) continue;
      double* row = d_kernel1.data() + static_cast<size_t>(k) * hidden;
      for (size_t j = 0; j < hidden; ++j) row[j] += xk * d_hidden[j];
    }
  }

  // L2 on the kernels, scaled by the number of replicas like the loss that holds it.
  double l2_sum = 0;
  for (float v : w.kernel1) l2_sum += static_cast<double>(v) * v;
  for (float v : w.kernel2) l2_sum += static_cast<double>(v) * v;
  const float regularization = static_cast<float>(c.l2 * l2_sum);
  step.regularization_loss = regularization;
  step.per_example_loss = per_example_loss;
  step.scaled_loss = chorus::ComputeAverageLoss(per_example_loss, {}, global_batch_size) +
                     chorus::ScaleRegularizationLoss(regularization);
  const double l2_grad =
      2.0 * static_cast<double>(c.l2) * regularization_scale.value_or(1.0 / NumReplicasInSync());
  auto finish = [](const std::vector<double>& sums, const std::vector<float>* kernel,
                   double l2_factor) {
    std::vector<float> out(sums.size());
    for (size_t i = 0; i < sums.size(); ++i) {
      const double decay = kernel != nullptr ? l2_factor * (*kernel)[i] : 0.0;
      out[i] = static_cast<float>(sums[i] + decay);
    }
    return out;
  };
  step.gradients.push_back(finish(d_kernel1, &w.kernel1, l2_grad));
  step.gradients.push_back(finish(d_bias1, nullptr, 0));
  step.gradients.push_back(finish(d_kernel2, &w.kernel2, l2_grad));
  step.gradients.push_back(finish(d_bias2, nullptr, 0));
  return step;
}

chorus::GradientsAndVariables Model::GradientsOn(const chorus::Device& device,
                                                 const ReplicaStep& step) const {
  chorus::GradientsAndVariables out;
  for (size_t v = 0; v < variables_.size(); ++v) {
    out.emplace_back(chorus::Tensor::FromVector(device, variables_[v].shape(), step.gradients[v]),
                     variables_[v]);
  }
  return out;
}

EvalSums Model::Evaluate(const HostWeights& w, const HostExamples& batch) const {
  CheckBatch(config_, batch);
  EvalSums sums;
  Activations a;
  for (int64_t i = 0; i < batch.size; ++i) {
    Forward(config_, w, batch.features + i * config_.inputs, a);
    if (ArgMax(a.logits) == batch.labels[i]) ++sums.correct;
    sums.loss += SoftmaxCrossEntropy(a.logits, batch.labels[i]);
  }
  sums.count = batch.size;
  return sums;
}

void Model::Predict(const HostWeights& w, const HostExamples& batch,
                    std::vector<float>& per_example_loss, std::vector<float>& logits) const {
  CheckBatch(config_, batch);
  per_example_loss.clear();
  logits.clear();
  Activations a;
  for (int64_t i = 0; i < batch.size; ++i) {
    Forward(config_, w, batch.features + i * config_.inputs, a);
    logits.insert(logits.end(), a.logits.begin(), a.logits.end());
    per_example_loss.push_back(static_cast<float>(SoftmaxCrossEntropy(a.logits, batch.labels[i])));
  }
}

HostBatchCopy ToHost(const chorus::Batch& batch) {
  chorus::HostBatch host = chorus::CopyToHost(batch);
  return HostBatchCopy{std::move(host.features), std::move(host.labels)};
}

}  // namespace fashion_mnist
