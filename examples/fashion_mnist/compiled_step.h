// TPUStrategy's compiled step: softmax regression on Fashion-MNIST whose whole training step
// (forward, loss, gradients, their all-reduce across replicas, the SGD update) is one StableHLO
// program (softmax_regression_step.mlir), run steps_per_execution steps per dispatch.
#ifndef CHORUS_EXAMPLES_FASHION_MNIST_COMPILED_STEP_H_
#define CHORUS_EXAMPLES_FASHION_MNIST_COMPILED_STEP_H_

#include <chorus/distribute/tpu_strategy.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "image_set.h"

namespace fashion_mnist {

// Each replica's batch in softmax_regression_step.mlir (its shapes fix it).
inline constexpr int64_t kCompiledStepReplicaBatch = 16;
// Its SGD learning rate (a constant in the program).
inline constexpr double kCompiledStepLearningRate = 0.1;

// The step for `num_replicas` replicas: the program text with its all-reduces over replicas
// 0..num_replicas-1.
std::string SoftmaxRegressionStep(int num_replicas);

struct CompiledStepOptions {
  int epochs = 1;
  int steps_per_execution = 10;
  int64_t max_steps = 0;  // per epoch; 0: every full global batch of the train set
  uint64_t seed = 1;      // the shuffle's
};

struct CompiledStepEpoch {
  int epoch = 0;
  int64_t steps = 0;
  double train_loss = 0;     // mean of the steps' losses (each the global batch's mean)
  double test_accuracy = 0;  // percent, of the weights after the epoch
  double seconds = 0;        // the epoch's training time, evaluation excluded
};

// Trains W [784, 10] and b [10] from zeros; calls `on_epoch` after each epoch. Throws
// chorus::Error where the strategy's devices do not run programs.
std::vector<CompiledStepEpoch> TrainSoftmaxRegressionCompiled(
    chorus::TPUStrategy& strategy, const TrainAndTest& data, const CompiledStepOptions& options,
    const std::function<void(const CompiledStepEpoch&)>& on_epoch = {});

// Test accuracy (percent) of softmax regression weights on `test`, computed on the host.
double SoftmaxRegressionAccuracy(const std::vector<float>& w, const std::vector<float>& b,
                                 const ImageSet& test);

}  // namespace fashion_mnist

#endif  // CHORUS_EXAMPLES_FASHION_MNIST_COMPILED_STEP_H_
