// The tutorial's custom training loop under any chorus::Strategy: a distributed train step
// (per-replica loss scaled by the global batch, gradients all-reduced by Adam's
// apply_gradients), a distributed test step, per-epoch metrics and checkpoints.
#ifndef CHORUS_EXAMPLES_FASHION_MNIST_TRAINER_H_
#define CHORUS_EXAMPLES_FASHION_MNIST_TRAINER_H_

#include <chorus/distribute/dataset.h>
#include <chorus/distribute/strategy.h>
#include <chorus/training/checkpoint.h>
#include <chorus/training/checkpoint_manager.h>
#include <chorus/training/optimizer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "image_set.h"
#include "model.h"

namespace fashion_mnist {

struct TrainerOptions {
  int64_t global_batch_size = 64;
  int epochs = 10;
  int64_t max_steps = 0;  // stop after this many training steps in all; 0 = no limit
  uint64_t seed = 1;      // model initialisation and the shuffle of every epoch
  float learning_rate = 1e-3f;
  float l2 = 1e-4f;
  // Where Fit saves ckpt-<epoch> every 2 epochs and after the last one (a
  // chorus::CheckpointManager for the job's identity, see CheckpointOptions); empty = no
  // checkpoints.
  std::string checkpoint_dir;
  // Use checkpoint_dir even when another job owns it (--checkpoint-dir-takeover).
  bool take_over_checkpoint_dir = false;
  // Parameter servers: start from the latest checkpoint in checkpoint_dir, at its step (the
  // recovery from a ps failure: restart the ps tasks and the chief with it).
  bool resume = false;
};

// The CheckpointManager options of options.checkpoint_dir: take_over as asked, the flag's name in
// the refusal.
chorus::CheckpointManagerOptions CheckpointOptions(const TrainerOptions& options);

// The sums of one training step over every replica.
struct StepMetrics {
  float loss = 0;  // the sum of the replicas' scaled losses: the step's mean loss
  int64_t correct = 0;
  int64_t examples = 0;
};

struct Evaluation {
  double loss = 0;      // mean cross-entropy per example
  double accuracy = 0;  // percent
  int64_t examples = 0;
};

struct EpochResult {
  int epoch = 0;  // from 1
  double train_loss = 0;
  double train_accuracy = 0;  // percent
  Evaluation test;
  int64_t steps = 0;       // training steps in this epoch
  std::string checkpoint;  // the checkpoint saved after it, if any
};

class Trainer {
 public:
  // Creates the model (and, on first use, the optimizer's slots) in `strategy`'s scope.
  Trainer(chorus::Strategy& strategy, const TrainerOptions& options);

  // One distributed training step.
  StepMetrics TrainStep(const chorus::DistributedBatch& batch);
  // The distributed test step over every batch of `dataset` (batched by the global batch size).
  Evaluation Evaluate(const ImageSet& test);
  // Trains options.epochs epochs over `train` (reshuffled each epoch), evaluating on `test` after
  // each; stops early at options.max_steps. Calls on_epoch after every epoch.
  std::vector<EpochResult> Fit(const ImageSet& train, const ImageSet& test,
                               const std::function<void(const EpochResult&)>& on_epoch = {});

  void SaveCheckpoint(const std::string& path) const;
  // Saves through `manager` (of this trainer's strategy) as <prefix>-<number>; returns its path.
  std::string SaveCheckpoint(chorus::CheckpointManager& manager, int number) const;
  void RestoreCheckpoint(const std::string& path) const;
  // This job as its checkpoint directory knows it: the seed, the model's variables, the cluster.
  chorus::JobIdentity Identity() const;
  // The trainable weights read in cross-replica context, in the model's order.
  HostWeights Weights() const;

  chorus::Strategy& strategy() const { return strategy_; }
  const Model& model() const { return *model_; }
  chorus::Adam& optimizer() { return optimizer_; }
  int64_t steps() const { return steps_; }

 private:
  chorus::Strategy& strategy_;
  TrainerOptions options_;
  std::unique_ptr<Model> model_;
  chorus::Adam optimizer_;
  chorus::Checkpoint checkpoint_;
  std::unique_ptr<chorus::CheckpointManager> checkpoints_;  // of options.checkpoint_dir
  int64_t steps_ = 0;
};

// Tracks `model`'s variables under the keys Trainer's checkpoints use.
void TrackModel(chorus::Checkpoint& checkpoint, const Model& model);
// Evaluates `model` on `test` with no strategy (batches of batch_size).
Evaluation EvaluateWithoutStrategy(const Model& model, const ImageSet& test, int64_t batch_size);

// Evaluates `model`'s arithmetic with these weights on `test` (batches of batch_size).
Evaluation EvaluateWeights(const Model& model, const HostWeights& weights, const ImageSet& test,
                           int64_t batch_size);

// Saves `trainer`'s checkpoint as dir/ckpt-<number> through a chorus::CheckpointManager of the
// trainer's identity (the index records it as the latest: chorus::LatestCheckpoint finds it);
// returns the path (empty on a multi-worker worker that takes part in the save but does not write
// files).
std::string SaveNumberedCheckpoint(const Trainer& trainer, const std::string& dir, int number);

// Writes `values` as raw little-endian f32; returns the bytes written.
size_t WriteFloats(const std::string& path, const std::vector<float>& values);
// Writes the weights as raw little-endian f32 (kernel1, bias1, kernel2, bias2); returns bytes.
size_t WriteWeights(const std::string& path, const HostWeights& weights);

}  // namespace fashion_mnist

#endif  // CHORUS_EXAMPLES_FASHION_MNIST_TRAINER_H_
