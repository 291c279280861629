// The example's models as chorus::TrainableModel, for chorus::Fit: the tutorial's CNN (oneDNN),
// the MLP of model.h, and a no-op model with the CNN's variables that computes nothing (to
// measure what a strategy itself costs per step).
#ifndef CHORUS_EXAMPLES_FASHION_MNIST_FIT_MODELS_H_
#define CHORUS_EXAMPLES_FASHION_MNIST_FIT_MODELS_H_

#include <chorus/training/checkpoint.h>
#include <chorus/training/fit.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model.h"

namespace fashion_mnist {

// "cnn" (when built with oneDNN), "mlp", "noop".
std::vector<std::string> ModelNames();

struct FitModelConfig {
  uint64_t seed = 1;
  float l2 = 0;  // 0: the model's default (CNN 1e-5, MLP 1e-4)
  // OpenMP threads of one replica's oneDNN calls; 0: one.
  int threads_per_replica = 0;
};

// A model whose variables are created, in the current strategy's scope, by its constructor.
class FitModel : public chorus::TrainableModel {
 public:
  // Tracks the variables under "model/<name>", the keys chorus::ModelCheckpoint writes.
  void Track(chorus::Checkpoint& checkpoint) const;
};

// Creates model `name` in the current scope; an error listing the names for an unknown one.
std::unique_ptr<FitModel> CreateFitModel(const std::string& name, const FitModelConfig& config);

}  // namespace fashion_mnist

#endif  // CHORUS_EXAMPLES_FASHION_MNIST_FIT_MODELS_H_
