#include "fit_models.h"

#include <chorus/base/error.h>

#include <cmath>
#include <map>
#include <mutex>
#include <utility>

#ifdef CHORUS_FASHION_MNIST_WITH_CNN
#include "cnn.h"
#endif

namespace fashion_mnist {
namespace {

// ---- the MLP of model.h

class MlpFitModel : public FitModel {
 public:
  explicit MlpFitModel(const FitModelConfig& config) : model_(MlpConfig(config)) {}

  std::vector<chorus::Variable> trainable_variables() const override { return model_.variables(); }

  chorus::StepOutputs TrainStep(const chorus::Device& device, const chorus::Batch& batch,
                                const chorus::LossScale& scale,
                                std::vector<chorus::Tensor>& gradients) override {
    const chorus::HostBatch host = chorus::CopyToHost(batch);
    const HostWeights weights = model_.ReadWeights();
    const HostExamples examples{host.features.data(), host.labels.data(), host.size};
    const auto global = static_cast<int64_t>(std::llround(1.0 / scale.per_example));
    const ReplicaStep step =
        model_.LossAndGradients(weights, examples, global, scale.regularization);
    gradients.clear();
    const auto& variables = model_.variables();
    for (size_t v = 0; v < variables.size(); ++v) {
      gradients.push_back(
          chorus::Tensor::FromVector(device, variables[v].shape(), step.gradients[v]));
    }
    chorus::StepOutputs out;
    out.per_example_loss = step.per_example_loss;
    out.logits = step.logits;
    out.num_classes = model_.config().classes;
    out.regularization_loss = step.regularization_loss;
    return out;
  }

  chorus::StepOutputs TestStep(const chorus::Device& device, const chorus::Batch& batch) override {
    (void)device;
    const chorus::HostBatch host = chorus::CopyToHost(batch);
    chorus::StepOutputs out;
    out.num_classes = model_.config().classes;
    model_.Predict(model_.ReadWeights(), {host.features.data(), host.labels.data(), host.size},
                   out.per_example_loss, out.logits);
    return out;
  }

 private:
  static ModelConfig MlpConfig(const FitModelConfig& config) {
    ModelConfig c;
    c.seed = config.seed;
    if (config.l2 > 0) c.l2 = config.l2;
    return c;
  }

  Model model_;
};

// ---- the CNN

#ifdef CHORUS_FASHION_MNIST_WITH_CNN
std::vector<float> Read(const chorus::Variable& variable) { return variable.value().ToVector(); }

// One OpenMP thread per replica unless asked otherwise: with 16 images per replica a layer's
// work is too small to share, and libgomp's barriers then cost more than they save (measured
// here: 44 ms a step with 2 threads, 3-4 ms with 1, on 2 cores).
int ThreadsPerReplica(const FitModelConfig& config) {
  return config.threads_per_replica > 0 ? config.threads_per_replica : 1;
}

class CnnFitModel : public FitModel {
 public:
  explicit CnnFitModel(const FitModelConfig& config) : config_(config) {
    cnn_.seed = config.seed;
    if (config.l2 > 0) cnn_.l2 = config.l2;
    const std::vector<std::vector<float>> initial = CnnInitialValues(cnn_);
    const auto& specs = CnnParameters();
    for (size_t p = 0; p < specs.size(); ++p) {
      chorus::VariableSpec spec;
      spec.name = specs[p].name;
      variables_.push_back(chorus::Variable::Create(spec, specs[p].shape, initial[p]));
    }
  }

  std::vector<chorus::Variable> trainable_variables() const override { return variables_; }

  chorus::StepOutputs TrainStep(const chorus::Device& device, const chorus::Batch& batch,
                                const chorus::LossScale& scale,
                                std::vector<chorus::Tensor>& gradients) override {
    const std::vector<std::vector<float>> weights = ReadWeights();
    const chorus::HostBatch host = chorus::CopyToHost(batch);
    std::vector<std::vector<float>> host_gradients;
    const CnnOutputs out = ComputeFor(device).ForwardBackward(
        Pointers(weights), host.features.data(), host.labels.data(), host.size, scale.per_example,
        scale.regularization, host_gradients);
    gradients.clear();
    for (size_t p = 0; p < variables_.size(); ++p) {
      gradients.push_back(
          chorus::Tensor::FromVector(device, variables_[p].shape(), host_gradients[p]));
    }
    return ToStepOutputs(out);
  }

  chorus::StepOutputs TestStep(const chorus::Device& device, const chorus::Batch& batch) override {
    const std::vector<std::vector<float>> weights = ReadWeights();
    const chorus::HostBatch host = chorus::CopyToHost(batch);
    return ToStepOutputs(ComputeFor(device).Forward(Pointers(weights), host.features.data(),
                                                    host.labels.data(), host.size));
  }

 private:
  std::vector<std::vector<float>> ReadWeights() const {
    std::vector<std::vector<float>> weights;
    for (const chorus::Variable& variable : variables_) weights.push_back(Read(variable));
    return weights;
  }

  static std::vector<const float*> Pointers(const std::vector<std::vector<float>>& weights) {
    std::vector<const float*> pointers;
    for (const std::vector<float>& w : weights) pointers.push_back(w.data());
    return pointers;
  }

  static chorus::StepOutputs ToStepOutputs(const CnnOutputs& out) {
    chorus::StepOutputs step;
    step.per_example_loss = out.per_example_loss;
    step.logits = out.logits;
    step.num_classes = 10;
    step.regularization_loss = out.regularization_loss;
    return step;
  }

  // One CnnCompute per replica device: its primitives and buffers stay with that replica's
  // thread of run().
  CnnCompute& ComputeFor(const chorus::Device& device) {
    const std::lock_guard<std::mutex> lock(mutex_);
    auto it = computes_.find(device.index);
    if (it == computes_.end()) {
      it =
          computes_
              .emplace(device.index, std::make_unique<CnnCompute>(cnn_, ThreadsPerReplica(config_)))
              .first;
    }
    return *it->second;
  }

  FitModelConfig config_;
  CnnConfig cnn_;
  std::vector<chorus::Variable> variables_;
  std::mutex mutex_;
  std::map<uint32_t, std::unique_ptr<CnnCompute>> computes_;
};
#endif

// ---- no arithmetic

// The CNN's variables (so the all-reduce and the update move the same bytes), zero gradients
// and zero outputs: a step of it costs what the strategy costs.
class NoOpModel : public FitModel {
 public:
  NoOpModel() {
    // The CNN's shapes, written out so that this model exists without oneDNN too.
    const std::vector<std::pair<std::string, chorus::Shape>> shapes = {
        {"conv2d/kernel", {3, 3, 1, 32}},    {"conv2d/bias", {32}},
        {"conv2d_1/kernel", {3, 3, 32, 64}}, {"conv2d_1/bias", {64}},
        {"dense/kernel", {1600, 64}},        {"dense/bias", {64}},
        {"dense_1/kernel", {64, 10}},        {"dense_1/bias", {10}}};
    for (const auto& [name, shape] : shapes) {
      chorus::VariableSpec spec;
      spec.name = name;
      variables_.push_back(chorus::Variable::Create(
          spec, shape, std::vector<float>(static_cast<size_t>(chorus::NumElements(shape)))));
    }
  }

  std::vector<chorus::Variable> trainable_variables() const override { return variables_; }

  chorus::StepOutputs TrainStep(const chorus::Device& device, const chorus::Batch& batch,
                                const chorus::LossScale& scale,
                                std::vector<chorus::Tensor>& gradients) override {
    (void)scale;
    // The same zero tensors every step, one set per device: the strategy reads the gradients and
    // never writes them, and a real model's cost of writing its gradients is not the strategy's.
    std::vector<chorus::Tensor>* zeros = nullptr;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      zeros = &zero_gradients_[device.index];
    }
    if (zeros->empty()) {
      for (const chorus::Variable& variable : variables_) {
        zeros->emplace_back(device, CHORUS_F32, variable.shape());  // zeroed
      }
    }
    gradients = *zeros;
    return TestStep(device, batch);
  }

  chorus::StepOutputs TestStep(const chorus::Device& device, const chorus::Batch& batch) override {
    (void)device;
    chorus::StepOutputs out;
    out.per_example_loss.assign(static_cast<size_t>(batch.size), 0.0f);
    return out;
  }

 private:
  std::vector<chorus::Variable> variables_;
  std::mutex mutex_;  // replicas' threads look up their zeros at once
  std::map<uint32_t, std::vector<chorus::Tensor>> zero_gradients_;
};

}  // namespace

void FitModel::Track(chorus::Checkpoint& checkpoint) const {
  for (const chorus::Variable& variable : trainable_variables()) {
    checkpoint.Track("model/" + variable.name(), variable);
  }
}

std::vector<std::string> ModelNames() {
#ifdef CHORUS_FASHION_MNIST_WITH_CNN
  return {"cnn", "mlp", "noop"};
#else
  return {"mlp", "noop"};
#endif
}

std::unique_ptr<FitModel> CreateFitModel(const std::string& name, const FitModelConfig& config) {
  if (name == "mlp") return std::make_unique<MlpFitModel>(config);
  if (name == "noop") return std::make_unique<NoOpModel>();
#ifdef CHORUS_FASHION_MNIST_WITH_CNN
  if (name == "cnn") return std::make_unique<CnnFitModel>(config);
#else
  if (name == "cnn") {
    throw chorus::Error(CHORUS_UNAVAILABLE,
                        "this fashion_mnist was built without oneDNN, so without the CNN; "
                        "install libdnnl-dev (apt-get install -y libdnnl-dev) and rebuild, or "
                        "use --model mlp");
  }
#endif
  std::string names;
  for (const std::string& known : ModelNames()) names += (names.empty() ? "" : ", ") + known;
  throw chorus::Error(CHORUS_INVALID_ARGUMENT, "unknown model '" + name + "'; valid: " + names);
}

}  // namespace fashion_mnist
