#include <chorus/base/error.h>
#include <chorus/distribute/replica_context.h>
#include <chorus/distribute/strategy.h>
#include <chorus/training/callbacks.h>
#include <chorus/training/fit.h>
#include <chorus/training/metrics.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/host_all_reduce.h"
#include "training/optimizer_host_view.h"

namespace chorus {
namespace {

[[noreturn]] void Fail(const std::string& message) {
  throw Error(CHORUS_INVALID_ARGUMENT, message);
}

void CheckOptions(const FitOptions& options) {
  if (options.batch_size <= 0) {
    Fail("fit: batch_size must be positive, got " + std::to_string(options.batch_size));
  }
  if (options.epochs < 0 || options.initial_epoch < 0 || options.initial_epoch > options.epochs) {
    Fail("fit: need 0 <= initial_epoch <= epochs, got initial_epoch " +
         std::to_string(options.initial_epoch) + " and epochs " + std::to_string(options.epochs));
  }
  if (options.steps_per_epoch < 0) {
    Fail("fit: steps_per_epoch must be 0 (the whole data set) or positive, got " +
         std::to_string(options.steps_per_epoch));
  }
  if (options.log_every_steps <= 0) {
    Fail("fit: log_every_steps must be positive, got " + std::to_string(options.log_every_steps));
  }
  if (options.steps_per_execution < 1) {
    Fail("fit: steps_per_execution must be at least 1, got " +
         std::to_string(options.steps_per_execution));
  }
  if (options.input_options.experimental_per_replica_buffer_size < 1) {
    Fail("fit: input_options.experimental_per_replica_buffer_size must be at least 1, got " +
         std::to_string(options.input_options.experimental_per_replica_buffer_size));
  }
  if (options.gradient_shards < 0) {
    Fail("fit: gradient_shards must be 0 (off) or positive, got " +
         std::to_string(options.gradient_shards));
  }
  if (options.gradient_shards > 0 && options.batch_size % options.gradient_shards != 0) {
    Fail("fit: gradient_shards " + std::to_string(options.gradient_shards) +
         " does not divide batch_size " + std::to_string(options.batch_size) +
         "; the shards must be of one size, as the replicas' slices of a batch are");
  }
  for (const Callback* callback : options.callbacks) {
    if (callback == nullptr) Fail("fit: a callback is NULL");
  }
}

void CheckData(const Dataset& data, const char* what) {
  if (data.batch_size() != 0) {
    Fail(std::string("fit: ") + what +
         " is already batched; pass the unbatched examples: fit batches them by "
         "FitOptions::batch_size (the global batch) and splits each batch over the replicas");
  }
  if (data.num_examples() == 0) Fail(std::string("fit: ") + what + " has no examples");
}

// Keras refuses a model whose variables were created under another strategy (or none) than the
// one it trains under: their copies would not be where the replicas run.
std::vector<Variable> CheckVariables(const Strategy* strategy, const TrainableModel& model) {
  std::vector<Variable> variables = model.trainable_variables();
  if (variables.empty()) Fail("fit: the model has no trainable variables");
  for (const Variable& variable : variables) {
    if (!variable.defined()) Fail("fit: the model gave an undefined variable");
    if (variable.strategy() == strategy) continue;
    const std::string created = variable.strategy() != nullptr
                                    ? "in the scope of another " + variable.strategy()->name()
                                    : "outside every strategy's scope";
    const std::string trained = strategy != nullptr ? "this " + strategy->name() : "no strategy";
    Fail("fit: variable '" + variable.name() + "' of the model was created " + created +
         ", but the model is trained under " + trained +
         "; create the model (and so its variables) inside strategy.scope() of the strategy "
         "you train it with");
  }
  return variables;
}

// The device the model's single copies live on, when there is no strategy.
Device PlainDevice(const std::vector<Variable>& variables) {
  return variables.front().components().front().device();
}

DistributedDataset Distribute(Strategy* strategy, const Dataset& batches,
                              const std::vector<Variable>& variables, const InputOptions& options) {
  if (strategy != nullptr) return strategy->experimental_distribute_dataset(batches, options);
  return DistributedDataset::FromGlobalBatches(batches, {PlainDevice(variables)}, 0, 0, options);
}

// The training steps' input options: the next execution's steps are prepared while one runs.
InputOptions TrainInputOptions(const FitOptions& options) {
  InputOptions input = options.input_options;
  input.experimental_per_replica_buffer_size =
      std::max(input.experimental_per_replica_buffer_size, options.steps_per_execution);
  return input;
}

// The iterator's next step, which the caller knows is there.
DistributedBatch NextStep(DistributedIterator& steps) {
  std::optional<DistributedBatch> batch = steps.GetNext();
  if (!batch) {
    throw Error(CHORUS_INTERNAL, "fit: the distributed dataset ended after " +
                                     std::to_string(steps.steps_taken()) + " steps");
  }
  return std::move(*batch);
}

// A different, reproducible order in every epoch (tf.data's reshuffle_each_iteration).
uint64_t EpochSeed(uint64_t seed, int epoch) {
  return seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(epoch);
}

void CheckOutputs(const StepOutputs& out, const Batch& batch, const char* step) {
  if (out.per_example_loss.size() != static_cast<size_t>(batch.size)) {
    Fail(std::string("fit: the model's ") + step + " gave " +
         std::to_string(out.per_example_loss.size()) + " per-example losses for a batch of " +
         std::to_string(batch.size));
  }
  if (!out.logits.empty() &&
      out.logits.size() != static_cast<size_t>(batch.size * out.num_classes)) {
    Fail(std::string("fit: the model's ") + step + " gave " + std::to_string(out.logits.size()) +
         " logits for " + std::to_string(batch.size) + " examples of " +
         std::to_string(out.num_classes) + " classes");
  }
}

double Sum(const std::vector<float>& values) {
  double sum = 0;
  for (float v : values) sum += v;
  return sum;
}

struct StepMetrics {
  Mean& loss;
  SparseCategoricalAccuracy& accuracy;
};

// FitOptions::gradient_shards as one replica applies it.
struct Sharding {
  int64_t per_replica = 1;  // shards of each replica's batch
  int64_t examples = 0;     // examples of a full shard
  int64_t total = 1;        // shards of a global batch (regularisation is scaled by 1 / total)
};

Sharding ShardingFor(const FitOptions& options, const Strategy* strategy) {
  Sharding sharding;
  if (options.gradient_shards <= 0) return sharding;
  const int replicas = strategy != nullptr ? strategy->num_replicas_in_sync() : 1;
  if (options.gradient_shards % replicas != 0) {
    Fail("fit: gradient_shards " + std::to_string(options.gradient_shards) +
         " is not a multiple of the " + std::to_string(replicas) +
         " replicas in sync; each replica takes gradient_shards / replicas shards of the batch");
  }
  sharding.per_replica = options.gradient_shards / replicas;
  sharding.examples = options.batch_size / options.gradient_shards;
  sharding.total = options.gradient_shards;
  return sharding;
}

// Examples [begin, end) of `batch`, without a copy.
Batch Slice(const Batch& batch, int64_t begin, int64_t end) {
  Batch slice;
  Shape shape = batch.features.shape();
  const int64_t example_elements = batch.size > 0 ? batch.features.num_elements() / batch.size : 0;
  shape[0] = end - begin;
  slice.features = batch.features.View(begin * example_elements, shape);
  slice.labels = batch.labels.View(begin, {end - begin});
  slice.size = end - begin;
  return slice;
}

// The shards' gradients, variable by variable, summed pairwise in shard order by the same code
// as the core's reduction of replicas (so that the two levels nest into one tree).
std::vector<Tensor> SumShards(const std::vector<std::vector<Tensor>>& shards) {
  std::vector<Tensor> sums;
  // Host views of the tensors (copies where a device's memory is not the host's), kept alive
  // until the sums are committed.
  std::vector<std::unique_ptr<internal::HostFloats>> inputs, outputs;
  std::vector<internal::HostReduce> reduces;
  for (size_t v = 0; v < shards.front().size(); ++v) {
    const Tensor& first = shards.front()[v];
    sums.push_back(Tensor::Uninitialized(first.device(), first.dtype(), first.shape()));
    internal::HostReduce reduce;
    for (const std::vector<Tensor>& shard : shards) {
      if (shard[v].shape() != first.shape()) {
        Fail("fit: the model's TrainStep gave gradients of different shapes for variable " +
             std::to_string(v) + " in two shards of a batch");
      }
      inputs.push_back(std::make_unique<internal::HostFloats>(shard[v]));
      reduce.inputs.push_back(inputs.back()->data());
    }
    outputs.push_back(std::make_unique<internal::HostFloats>(sums.back()));
    reduce.outputs.push_back(outputs.back()->data());
    reduce.count = static_cast<size_t>(first.num_elements());
    reduces.push_back(std::move(reduce));
  }
  // One thread: the replicas run their steps at once already.
  internal::HostAllReduce(reduces, 1);
  for (const auto& output : outputs) output->Commit();
  return sums;
}

// The model's step on the replica's batch, or on its shards one by one, their gradients summed.
StepOutputs ShardedTrainStep(TrainableModel& model, const Device& device, const Batch& batch,
                             const LossScale& scale, const Sharding& sharding,
                             std::vector<Tensor>& gradients, size_t num_variables) {
  auto check_gradients = [&](const std::vector<Tensor>& g) {
    if (g.size() != num_variables) {
      Fail("fit: the model's TrainStep gave " + std::to_string(g.size()) + " gradients for " +
           std::to_string(num_variables) + " trainable variables");
    }
  };
  // One shard per replica is the replica's whole slice, its regularisation scale 1 / replicas.
  if (sharding.per_replica <= 1) {
    StepOutputs out = model.TrainStep(device, batch, scale, gradients);
    CheckOutputs(out, batch, "TrainStep");
    check_gradients(gradients);
    return out;
  }
  const LossScale shard_scale{scale.per_example, 1.0 / static_cast<double>(sharding.total)};
  std::vector<std::vector<Tensor>> shard_gradients(static_cast<size_t>(sharding.per_replica));
  StepOutputs out;
  for (int64_t j = 0; j < sharding.per_replica; ++j) {
    const int64_t begin = std::min(j * sharding.examples, batch.size);
    const int64_t end = std::min(begin + sharding.examples, batch.size);
    const Batch shard = Slice(batch, begin, end);
    const StepOutputs part =
        model.TrainStep(device, shard, shard_scale, shard_gradients[static_cast<size_t>(j)]);
    CheckOutputs(part, shard, "TrainStep");
    check_gradients(shard_gradients[static_cast<size_t>(j)]);
    out.per_example_loss.insert(out.per_example_loss.end(), part.per_example_loss.begin(),
                                part.per_example_loss.end());
    out.logits.insert(out.logits.end(), part.logits.begin(), part.logits.end());
    out.num_classes = part.num_classes;
    out.regularization_loss = part.regularization_loss;  // the same weights in every shard
  }
  CheckOutputs(out, batch, "TrainStep");
  gradients = SumShards(shard_gradients);
  return out;
}

// One replica's (or the only) training step; `context` is nullptr without a strategy.
void ReplicaTrainStep(ReplicaContext* context, const Device& device, const Batch& batch,
                      int64_t global_size, const Sharding& sharding, TrainableModel& model,
                      Optimizer& optimizer, const std::vector<Variable>& variables,
                      const StepMetrics& metrics) {
  const int replicas = context != nullptr ? context->num_replicas_in_sync() : 1;
  const LossScale scale{1.0 / static_cast<double>(global_size), 1.0 / replicas};
  std::vector<Tensor> gradients;
  const StepOutputs out =
      ShardedTrainStep(model, device, batch, scale, sharding, gradients, variables.size());
  GradientsAndVariables pairs;
  pairs.reserve(variables.size());
  for (size_t i = 0; i < variables.size(); ++i) pairs.emplace_back(gradients[i], variables[i]);
  optimizer.apply_gradients(pairs);

  // The step's loss is the sum of the replicas' scaled losses; one replica counts the step.
  const double scaled = scale.per_example * Sum(out.per_example_loss) +
                        scale.regularization * static_cast<double>(out.regularization_loss);
  const bool counts_step = context == nullptr || context->replica_id_in_sync_group() == 0;
  metrics.loss.update_totals(scaled, counts_step ? 1.0 : 0.0);
  if (!out.logits.empty()) {
    metrics.accuracy.update_state(CopyLabelsToHost(batch), out.logits, out.num_classes);
  }
}

void ReplicaTestStep(const Device& device, const Batch& batch, TrainableModel& model,
                     const StepMetrics& metrics) {
  const StepOutputs out = model.TestStep(device, batch);
  CheckOutputs(out, batch, "TestStep");
  metrics.loss.update_state(out.per_example_loss);
  if (!out.logits.empty()) {
    metrics.accuracy.update_state(CopyLabelsToHost(batch), out.logits, out.num_classes);
  }
}

Evaluation RunEvaluation(Strategy* strategy, TrainableModel& model, const Dataset& data,
                         int64_t batch_size, const std::vector<Variable>& variables,
                         const InputOptions& input_options, const StepMetrics& metrics) {
  metrics.loss.reset_state();
  metrics.accuracy.reset_state();
  DistributedIterator steps =
      Distribute(strategy, data.Batch(batch_size), variables, input_options).MakeIterator();
  while (const std::optional<DistributedBatch> next = steps.GetNext()) {
    const DistributedBatch& batch = *next;
    if (strategy != nullptr) {
      strategy->run([&](ReplicaContext& context,
                        const Batch& b) { ReplicaTestStep(context.device(), b, model, metrics); },
                    batch);
    } else {
      ReplicaTestStep(PlainDevice(variables), batch.replicas.front(), model, metrics);
    }
  }
  Evaluation e;
  const auto [loss_total, examples] = metrics.loss.totals();
  e.loss = examples > 0 ? loss_total / examples : 0;
  e.examples = static_cast<int64_t>(examples);
  e.accuracy = metrics.accuracy.result();
  return e;
}

std::shared_ptr<void> ScopeOf(Strategy* strategy) {
  return strategy != nullptr ? strategy->scope() : nullptr;
}

}  // namespace

History Fit(Strategy* strategy, TrainableModel& model, Optimizer& optimizer, const Dataset& train,
            const FitOptions& options) {
  if (CurrentReplicaContext() != nullptr) {
    Fail("fit is called inside a replica function; call it in cross-replica context");
  }
  CheckOptions(options);
  CheckData(train, "the training data");
  if (options.validation_data != nullptr) CheckData(*options.validation_data, "validation_data");
  const std::vector<Variable> variables = CheckVariables(strategy, model);
  const Sharding sharding = ShardingFor(options, strategy);
  const auto scope = ScopeOf(strategy);

  Mean loss("loss");
  SparseCategoricalAccuracy accuracy("accuracy");
  Mean val_loss("val_loss");
  SparseCategoricalAccuracy val_accuracy("val_accuracy");
  const StepMetrics train_metrics{loss, accuracy};
  const StepMetrics val_metrics{val_loss, val_accuracy};
  optimizer.build(variables);

  const int64_t batches = (train.num_examples() + options.batch_size - 1) / options.batch_size;
  const InputOptions train_input = TrainInputOptions(options);
  FitState state;
  state.strategy = strategy;
  state.model = &model;
  state.optimizer = &optimizer;
  state.options = &options;
  state.steps_per_epoch =
      options.steps_per_epoch > 0 ? std::min(options.steps_per_epoch, batches) : batches;
  state.initial_epoch = options.initial_epoch;
  state.chief = strategy == nullptr || strategy->should_checkpoint();
  for (Callback* callback : options.callbacks) callback->on_train_begin(state);

  History history;
  for (int epoch = state.initial_epoch; epoch < options.epochs && !state.stop_training; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    state.epoch = epoch;
    loss.reset_state();
    accuracy.reset_state();
    for (Callback* callback : options.callbacks) callback->on_epoch_begin(state);
    const Dataset order = options.shuffle ? train.Shuffle(EpochSeed(options.seed, epoch)) : train;
    // Only the epoch's steps are prepared (Take counts batches once batched).
    DistributedIterator steps =
        Distribute(strategy, order.Batch(options.batch_size).Take(state.steps_per_epoch), variables,
                   train_input)
            .MakeIterator();
    EpochLogs logs;
    logs.epoch = epoch;
    // Executions of steps_per_execution steps [begin, end); the callbacks see their ends only.
    for (int64_t begin = 0; begin < state.steps_per_epoch; begin += options.steps_per_execution) {
      const int64_t end = std::min(begin + options.steps_per_execution, state.steps_per_epoch);
      for (int64_t s = begin; s < end; ++s) {
        const DistributedBatch batch = NextStep(steps);
        if (strategy != nullptr) {
          strategy->run(
              [&](ReplicaContext& context, const Batch& b) {
                ReplicaTrainStep(&context, context.device(), b, batch.global_size, sharding, model,
                                 optimizer, variables, train_metrics);
              },
              batch);
        } else {
          ReplicaTrainStep(nullptr, PlainDevice(variables), batch.replicas.front(),
                           batch.global_size, sharding, model, optimizer, variables, train_metrics);
        }
        ++logs.steps;
      }
      // Every worker reads at the same steps: with several workers a read is a collective. An
      // execution reads when a multiple of log_every_steps falls in it (its end, with 1 step).
      const bool log_point = end / options.log_every_steps > begin / options.log_every_steps;
      if (log_point && end < state.steps_per_epoch) {
        const double step_loss = loss.result(), step_accuracy = accuracy.result();
        for (Callback* callback : options.callbacks) {
          callback->on_train_batch_end(state, end, step_loss, step_accuracy);
        }
      }
    }
    logs.loss = loss.result();
    logs.accuracy = accuracy.result();
    logs.train_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (options.validation_data != nullptr) {
      const Evaluation e =
          RunEvaluation(strategy, model, *options.validation_data, options.batch_size, variables,
                        options.input_options, val_metrics);
      logs.val_loss = e.loss;
      logs.val_accuracy = e.accuracy;
    }
    logs.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (Callback* callback : options.callbacks) callback->on_epoch_end(state, logs);
    history.epochs.push_back(logs);
  }
  for (Callback* callback : options.callbacks) callback->on_train_end(state, history);
  return history;
}

Evaluation Evaluate(Strategy* strategy, TrainableModel& model, const Dataset& data,
                    int64_t batch_size) {
  if (CurrentReplicaContext() != nullptr) {
    Fail("evaluate is called inside a replica function; call it in cross-replica context");
  }
  if (batch_size <= 0) Fail("evaluate: batch_size must be positive");
  CheckData(data, "the evaluation data");
  const std::vector<Variable> variables = CheckVariables(strategy, model);
  const auto scope = ScopeOf(strategy);
  Mean loss("loss");
  SparseCategoricalAccuracy accuracy("accuracy");
  return RunEvaluation(strategy, model, data, batch_size, variables, InputOptions{},
                       StepMetrics{loss, accuracy});
}

}  // namespace chorus
