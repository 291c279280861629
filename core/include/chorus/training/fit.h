// A training loop like Keras' Model.fit and Model.evaluate, for any model that gives its
// variables and a loss-and-gradients step, under any chorus::Strategy (OneDevice, Mirrored,
// CentralStorage, MultiWorkerMirrored) or none. Per step it distributes the global batch,
// runs the model's step on every replica, lets the optimizer all-reduce the gradients and apply
// them, and updates the metrics (SyncOnRead variables: no communication until they are read).
// Callbacks (callbacks.h) print progress, save checkpoints, and back up and restore a job.
#ifndef CHORUS_FIT_H_
#define CHORUS_FIT_H_

#include <chorus/distribute/dataset.h>
#include <chorus/distribute/variable.h>
#include <chorus/runtime/tensor.h>
#include <chorus/training/optimizer.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chorus {

class Strategy;
class Callback;

// What a model computed on one replica's batch.
struct StepOutputs {
  std::vector<float> per_example_loss;  // one per example of the replica's batch
  std::vector<float> logits;            // examples x num_classes (for accuracy); may be empty
  int64_t num_classes = 0;
  float regularization_loss = 0;  // unscaled, e.g. l2 * sum of squared kernels
};

// How a replica's loss is scaled so that the replicas' gradients sum to the global batch's
// (tf.nn.compute_average_loss and tf.nn.scale_regularization_loss).
struct LossScale {
  double per_example = 1;     // 1 / global batch size
  double regularization = 1;  // 1 / num_replicas_in_sync
};

// A model fit() trains. Its variables must be created in the strategy's scope (fit refuses
// others, as Keras does); its steps run on the replicas' threads, concurrently.
class TrainableModel {
 public:
  virtual ~TrainableModel() = default;
  // The trainable variables, in the order of TrainStep's gradients.
  virtual std::vector<Variable> trainable_variables() const = 0;
  // Forward and backward pass on `batch`, on the replica's `device` (the variables' value() is
  // this replica's copy). Fills `gradients` (one per variable, on `device`) with the gradients of
  //   scale.per_example * sum(per_example_loss) + scale.regularization * regularization_loss.
  // The batch may be empty (a short final batch leaves the last replicas none).
  virtual StepOutputs TrainStep(const Device& device, const Batch& batch, const LossScale& scale,
                                std::vector<Tensor>& gradients) = 0;
  // Forward pass only.
  virtual StepOutputs TestStep(const Device& device, const Batch& batch) = 0;
};

// Metrics of an epoch (Keras' logs): the mean of the steps' losses (each the step's loss over
// the global batch, regularisation included), accuracy in [0, 1], and the validation figures
// (mean cross-entropy per example, without regularisation, as the tutorial's Test Loss).
struct EpochLogs {
  int epoch = 0;  // from 0, as Keras passes it to on_epoch_end
  int64_t steps = 0;
  double loss = 0;
  double accuracy = 0;
  std::optional<double> val_loss;
  std::optional<double> val_accuracy;
  double train_seconds = 0;  // the training steps alone
  double seconds = 0;        // training and validation
};

struct FitOptions {
  int64_t batch_size = 32;  // the global batch, split over the replicas
  int epochs = 1;
  int initial_epoch = 0;  // the epoch to start at (from 0); BackupAndRestore may move it
  bool shuffle = true;    // a new, seeded order every epoch
  uint64_t seed = 1;
  int64_t steps_per_epoch = 0;  // 0: the whole data set
  // Metrics are read (a collective with several workers) every this many steps for the
  // progress callbacks, and at the end of each epoch. With steps_per_execution N the reads come
  // at the end of the executions in which a multiple of log_every_steps falls.
  int64_t log_every_steps = 50;
  // Keras' compile(steps_per_execution=N): the steps of an epoch run in executions of N steps
  // (the epoch's last execution has what is left when N does not divide its steps). Callbacks
  // see executions only: on_train_batch_end comes after an execution, with the epoch's step count
  // at its end (the progress advances by N) and the figures after its last step, never inside
  // one. The training itself is the same as with 1, step for step, to the bit. The input
  // pipeline prepares up to max(N, input_options' buffer size) steps ahead, so the next
  // execution's batches are ready when it starts. At least 1.
  int steps_per_execution = 1;
  // How the training and validation batches reach the replicas (experimental_distribute_dataset's
  // InputOptions); they are prepared on a background thread, a buffer of steps ahead.
  InputOptions input_options;
  const Dataset* validation_data = nullptr;  // unbatched; evaluated after each epoch
  std::vector<Callback*> callbacks;
  // Gradients that do not depend on the strategy. 0 (the default): each replica's step runs on
  // its whole slice of the global batch. N > 0: every global batch is cut into N shards of
  // batch_size / N examples, as a strategy of N replicas would cut it (a short final batch leaves
  // the last shards short or empty); each replica runs the model's step on its N / replicas
  // shards one by one (loss scaled by 1 / global batch, regularisation by 1 / N) and sums their
  // gradients pairwise in shard order, the order in which the core's reduction_to_one_device
  // (Mirrored's default) sums replicas on host memory. So with N and the replica counts powers
  // of two, OneDevice, Mirrored and MultiWorkerMirrored over 2 workers compute the same sums of
  // the same shards and train to the same bits (README, "The same bits under every strategy"). N
  // must be a multiple of the replicas in sync and divide batch_size; a model then sees batches of
  // batch_size / N examples.
  int64_t gradient_shards = 0;
};

struct History {
  std::vector<EpochLogs> epochs;
};

// Where fit is, for callbacks.
struct FitState {
  Strategy* strategy = nullptr;  // nullptr: no strategy
  TrainableModel* model = nullptr;
  Optimizer* optimizer = nullptr;
  const FitOptions* options = nullptr;
  int64_t steps_per_epoch = 0;
  int epoch = 0;               // the current epoch, from 0
  int initial_epoch = 0;       // a callback's on_train_begin may raise it (BackupAndRestore)
  bool chief = true;           // this worker writes files and prints progress
  bool stop_training = false;  // a callback may set it (EarlyStopping-like)
};

// Trains `model` on `train` (unbatched examples; batched by options.batch_size) for
// options.epochs epochs. `strategy` may be nullptr (no strategy). Throws Error when a variable
// of the model was created outside the strategy's scope, when the data set is empty, or when
// the options are out of range.
History Fit(Strategy* strategy, TrainableModel& model, Optimizer& optimizer, const Dataset& train,
            const FitOptions& options);

struct Evaluation {
  double loss = 0;      // mean per-example loss (no regularisation)
  double accuracy = 0;  // in [0, 1]
  int64_t examples = 0;
};
// Evaluates `model` on `data` (unbatched) in global batches of `batch_size`.
Evaluation Evaluate(Strategy* strategy, TrainableModel& model, const Dataset& data,
                    int64_t batch_size);

}  // namespace chorus

#endif  // CHORUS_FIT_H_
