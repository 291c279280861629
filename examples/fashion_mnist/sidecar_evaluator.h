// The evaluator task of a parameter-server job, as tf.keras.utils.SidecarEvaluator: it follows
// the checkpoint directory the chief writes and evaluates every new checkpoint with a model of no
// strategy, so that evaluation costs the training nothing.
#ifndef CHORUS_EXAMPLES_FASHION_MNIST_SIDECAR_EVALUATOR_H_
#define CHORUS_EXAMPLES_FASHION_MNIST_SIDECAR_EVALUATOR_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "image_set.h"
#include "trainer.h"

namespace fashion_mnist {

struct SidecarOptions {
  std::string checkpoint_dir;
  int64_t batch_size = 64;
  // Restores a checkpoint into a model of its own and evaluates it on the test set; unset: the
  // MLP of model.h.
  std::function<Evaluation(const std::string& checkpoint, const ImageSet& test)> evaluate;
  // Stops after evaluating the checkpoint of this epoch (the chief's last), ckpt-<final_epoch>.
  int final_epoch = 1;
  // Stops with an error when no new checkpoint came for this long.
  std::chrono::milliseconds idle_timeout = std::chrono::minutes(10);
  std::chrono::milliseconds poll = std::chrono::milliseconds(200);
};

// Prints "Evaluator: <checkpoint>: Test Loss: ..., Test Accuracy: ..." for each checkpoint that
// becomes the directory's latest whole one (chorus::FindLatestCheckpoint: the index's, or the
// newest whole ckpt-N when the index cannot be followed) after the evaluator started; returns
// how many it evaluated.
// Throws chorus::Error(TIMEOUT) past idle_timeout.
int RunSidecarEvaluator(const ImageSet& test, const SidecarOptions& options);

}  // namespace fashion_mnist

#endif  // CHORUS_EXAMPLES_FASHION_MNIST_SIDECAR_EVALUATOR_H_
