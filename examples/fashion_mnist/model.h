// The tutorial's classifier as an MLP: flatten 28x28 → dense 128 (ReLU) → dense 10 (logits),
// softmax cross-entropy, L2 regularisation of the kernels. Forward and backward passes are
// written by hand on host f32, with sums accumulated in double so that the result depends as
// little as possible on how a batch is split across replicas.
#ifndef CHORUS_EXAMPLES_FASHION_MNIST_MODEL_H_
#define CHORUS_EXAMPLES_FASHION_MNIST_MODEL_H_

#include <chorus/distribute/dataset.h>
#include <chorus/distribute/variable.h>
#include <chorus/training/optimizer.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fashion_mnist {

struct ModelConfig {
  int64_t inputs = 28 * 28;
  int64_t hidden = 128;
  int64_t classes = 10;
  float l2 = 1e-4f;   // Keras l2(): l2 * sum(kernel^2), for both kernels
  uint64_t seed = 1;  // Glorot-uniform initialisation of the kernels
};

// The weights as host values, in the model's order.
struct HostWeights {
  std::vector<float> kernel1;  // [inputs, hidden]
  std::vector<float> bias1;    // [hidden]
  std::vector<float> kernel2;  // [hidden, classes]
  std::vector<float> bias2;    // [classes]
};

// A batch in host memory: n examples of `inputs` features, n labels.
struct HostExamples {
  const float* features = nullptr;
  const int32_t* labels = nullptr;
  int64_t size = 0;
};

// One replica's part of a training step.
struct ReplicaStep {
  // ComputeAverageLoss(per-example loss, global batch) + ScaleRegularizationLoss(l2 loss):
  // summed over the replicas this is the step's loss.
  float scaled_loss = 0;
  int64_t correct = 0;
  // d scaled_loss / d weight, one per variable in variables() order.
  std::vector<std::vector<float>> gradients;
  std::vector<float> per_example_loss;  // cross-entropy of each example
  std::vector<float> logits;            // [examples, classes]
  float regularization_loss = 0;        // l2 * sum of the squared kernels (unscaled)
};

// Sums over a batch, for evaluation.
struct EvalSums {
  double loss = 0;  // sum of per-example cross-entropy (no regularisation)
  int64_t correct = 0;
  int64_t count = 0;
};

class Model {
 public:
  // Creates the variables in the current strategy's scope; outside every scope they are plain.
  // Names: dense/kernel, dense/bias, dense_1/kernel, dense_1/bias (Keras's).
  explicit Model(const ModelConfig& config = {});

  const ModelConfig& config() const { return config_; }
  // kernel1, bias1, kernel2, bias2.
  const std::vector<chorus::Variable>& variables() const { return variables_; }
  // Every variable read with value() in the current context, copied to the host.
  HostWeights ReadWeights() const;

  // Forward and backward pass on `batch`, with the loss scaled for a global batch of
  // `global_batch_size` examples (call it in the replica function, or with no strategy) and the
  // regularisation's gradient by `regularization_scale` (unset: 1 / the replicas in sync, as
  // tf.nn.scale_regularization_loss).
  ReplicaStep LossAndGradients(const HostWeights& weights, const HostExamples& batch,
                               int64_t global_batch_size,
                               std::optional<double> regularization_scale = std::nullopt) const;
  // The gradients as tensors on `device`, paired with the variables, for apply_gradients.
  chorus::GradientsAndVariables GradientsOn(const chorus::Device& device,
                                            const ReplicaStep& step) const;
  // Cross-entropy sum and correct predictions on `batch`.
  EvalSums Evaluate(const HostWeights& weights, const HostExamples& batch) const;
  // Each example's cross-entropy and logits ([examples, classes]).
  void Predict(const HostWeights& weights, const HostExamples& batch,
               std::vector<float>& per_example_loss, std::vector<float>& logits) const;

 private:
  ModelConfig config_;
  std::vector<chorus::Variable> variables_;
};

// A replica's batch in host memory (copied when its device's memory is not host memory).
struct HostBatchCopy {
  std::vector<float> features;
  std::vector<int32_t> labels;
  HostExamples view() const {
    return {features.data(), labels.data(), static_cast<int64_t>(labels.size())};
  }
};
HostBatchCopy ToHost(const chorus::Batch& batch);

}  // namespace fashion_mnist

#endif  // CHORUS_EXAMPLES_FASHION_MNIST_MODEL_H_
