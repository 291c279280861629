#include "compiled_step.h"

#include <chorus/base/error.h>
#include <chorus/distribute/variable.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

#include "softmax_regression_step_mlir.h"  // kSoftmaxRegressionStepMlir, made by CMake

namespace fashion_mnist {
namespace {

constexpr int64_t kPixels = kImageRows * kImageCols;

void ReplaceAll(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

// One replica's batch: images [16, 784] and one-hot labels [16, 10].
void FillBatch(const ImageSet& set, const std::vector<int64_t>& order, int64_t first,
               std::vector<float>& x, std::vector<float>& y) {
  x.assign(static_cast<size_t>(kCompiledStepReplicaBatch * kPixels), 0.0f);
  y.assign(static_cast<size_t>(kCompiledStepReplicaBatch * kNumClasses), 0.0f);
  for (int64_t i = 0; i < kCompiledStepReplicaBatch; ++i) {
    const int64_t example = order[static_cast<size_t>(first + i)];
    std::copy_n(set.pixels.begin() + example * kPixels, kPixels, x.begin() + i * kPixels);
    y[static_cast<size_t>(i * kNumClasses + set.labels[static_cast<size_t>(example)])] = 1.0f;
  }
}

}  // namespace

std::string SoftmaxRegressionStep(int num_replicas) {
  std::string text = kSoftmaxRegressionStepMlir;
  std::string group;
  for (int r = 0; r < num_replicas; ++r) group += (r == 0 ? "" : ", ") + std::to_string(r);
  ReplaceAll(text, "dense<[[0]]> : tensor<1x1xi64>",
             "dense<[[" + group + "]]> : tensor<1x" + std::to_string(num_replicas) + "xi64>");
  ReplaceAll(text, "mhlo.num_replicas = 1 : i32",
             "mhlo.num_replicas = " + std::to_string(num_replicas) + " : i32");
  return text;
}

double SoftmaxRegressionAccuracy(const std::vector<float>& w, const std::vector<float>& b,
                                 const ImageSet& test) {
  int64_t correct = 0;
  for (int64_t i = 0; i < test.size(); ++i) {
    const float* x = test.pixels.data() + i * kPixels;
    int best = 0;
    float best_logit = 0;
    for (int c = 0; c < kNumClasses; ++c) {
      float logit = b[static_cast<size_t>(c)];
      for (int64_t k = 0; k < kPixels; ++k)
        logit += x[k] * w[static_cast<size_t>(k * kNumClasses + c)];
      if (c == 0 || logit > best_logit) {
        best = c;
        best_logit = logit;
      }
    }
    correct += best == test.labels[static_cast<size_t>(i)] ? 1 : 0;
  }
  return test.size() == 0 ? 0.0
                          : 100.0 * static_cast<double>(correct) / static_cast<double>(test.size());
}

std::vector<CompiledStepEpoch> TrainSoftmaxRegressionCompiled(
    chorus::TPUStrategy& strategy, const TrainAndTest& data, const CompiledStepOptions& options,
    const std::function<void(const CompiledStepEpoch&)>& on_epoch) {
  const int replicas = strategy.num_replicas_in_sync();
  const int per_dispatch = std::max(1, options.steps_per_execution);
  chorus::ReplicaProgram program;
  program.stablehlo = SoftmaxRegressionStep(replicas);
  program.num_parameters = 2;
  program.steps_per_execution = per_dispatch;
  program.output_dtypes = {CHORUS_F32};
  const chorus::CompiledStep step = strategy.Compile(program);

  chorus::Variable w, b;
  {
    auto scope = strategy.scope();
    w = chorus::Variable::Create({"softmax/kernel"}, {kPixels, kNumClasses},
                                 std::vector<float>(static_cast<size_t>(kPixels * kNumClasses)));
    b = chorus::Variable::Create({"softmax/bias"}, {kNumClasses},
                                 std::vector<float>(static_cast<size_t>(kNumClasses)));
  }
  const int64_t global_batch = kCompiledStepReplicaBatch * replicas;
  int64_t steps_per_epoch = data.train.size() / global_batch;
  if (options.max_steps > 0) steps_per_epoch = std::min(steps_per_epoch, options.max_steps);
  // Whole dispatches only: the program runs steps_per_execution steps each time.
  const int64_t dispatches = steps_per_epoch / per_dispatch;
  if (dispatches == 0) {
    throw chorus::Error(CHORUS_INVALID_ARGUMENT,
                        "the compiled step needs at least " + std::to_string(per_dispatch) +
                            " global batches of " + std::to_string(global_batch) +
                            " per epoch; lower --steps-per-execution or train on more examples");
  }
  std::vector<int64_t> order(static_cast<size_t>(data.train.size()));
  std::mt19937_64 rng(options.seed);
  std::vector<CompiledStepEpoch> epochs;
  std::vector<float> x, y;
  for (int epoch = 1; epoch <= options.epochs; ++epoch) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const auto start = std::chrono::steady_clock::now();
    double loss_sum = 0;
    for (int64_t d = 0; d < dispatches; ++d) {
      std::vector<std::vector<chorus::PerReplica>> inputs(static_cast<size_t>(per_dispatch));
      for (int s = 0; s < per_dispatch; ++s) {
        std::vector<chorus::Tensor> images, labels;
        for (int r = 0; r < replicas; ++r) {
          const int64_t first = ((d * per_dispatch + s) * replicas + r) * kCompiledStepReplicaBatch;
          FillBatch(data.train, order, first, x, y);
          const chorus::Device& device = strategy.devices()[static_cast<size_t>(r)];
          images.push_back(
              chorus::Tensor::FromVector(device, {kCompiledStepReplicaBatch, kPixels}, x));
          labels.push_back(
              chorus::Tensor::FromVector(device, {kCompiledStepReplicaBatch, kNumClasses}, y));
        }
        inputs[static_cast<size_t>(s)] = {chorus::PerReplica(std::move(images)),
                                          chorus::PerReplica(std::move(labels))};
      }
      const std::vector<std::vector<chorus::PerReplica>> losses =
          strategy.run(step, {w, b}, inputs);
      // Every replica holds the global batch's mean loss; replica 0's is read.
      for (const auto& outputs : losses) loss_sum += outputs[0][0].ToVector().at(0);
    }
    CompiledStepEpoch result;
    result.epoch = epoch;
    result.steps = dispatches * per_dispatch;
    result.train_loss = loss_sum / static_cast<double>(result.steps);
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.test_accuracy = SoftmaxRegressionAccuracy(w.components()[0].ToVector(),
                                                     b.components()[0].ToVector(), data.test);
    if (on_epoch) on_epoch(result);
    epochs.push_back(result);
  }
  return epochs;
}

}  // namespace fashion_mnist
