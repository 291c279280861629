#include "parameter_server_training.h"

#include <chorus/base/error.h>
#include <chorus/parameter_server/cluster_coordinator.h>
#include <chorus/parameter_server/functions.h>
#include <chorus/runtime/registry.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "model.h"

namespace fashion_mnist {
namespace {

const char* const kTrainStep = "fashion_mnist_train_step";
const char* const kTrainDataset = "fashion_mnist_train";
const std::vector<std::string> kVariableNames = {"dense/kernel", "dense/bias", "dense_1/kernel",
                                                 "dense_1/bias"};

chorus::Device Host() { return {chorus::Registry::Global().CpuDevices(), 0}; }

ModelConfig ConfigFor(const TrainerOptions& options) {
  ModelConfig config;
  config.seed = options.seed;
  config.l2 = options.l2;
  return config;
}

// The model's arithmetic on a worker (its own variables are plain and unused).
const Model& WorkerModel(const TrainerOptions& options) {
  static std::once_flag once;
  static std::unique_ptr<Model> model;
  std::call_once(once, [&] { model = std::make_unique<Model>(ConfigFor(options)); });
  return *model;
}

HostWeights ToWeights(const std::vector<chorus::Tensor>& values) {
  return HostWeights{values[0].ToVector(), values[1].ToVector(), values[2].ToVector(),
                     values[3].ToVector()};
}

}  // namespace

std::string ParameterServerCluster(const chorus::ParameterServerStrategy& strategy) {
  return std::to_string(strategy.num_workers()) + " workers and " +
         std::to_string(strategy.num_ps()) + " ps tasks (parameter servers)";
}

bool ServeParameterServerTasks(const std::function<ImageSet()>& load_train,
                               const TrainerOptions& options) {
  chorus::RegisterDatasetFunction(
      kTrainDataset, [load_train, options](const chorus::InputContext& input) {
        return load_train()
            .ToDataset()
            .Shard(input.num_input_pipelines(), input.input_pipeline_id())
            .Shuffle(options.seed + static_cast<uint64_t>(input.input_pipeline_id()))
            .Batch(options.global_batch_size, true);
      });
  chorus::RegisterFunction(kTrainStep, [options](chorus::FunctionContext& context,
                                                 const std::vector<chorus::Tensor>&) {
    const Model& model = WorkerModel(options);
    std::vector<chorus::ShardedVariable> variables;
    for (const std::string& name : kVariableNames) variables.push_back(context.variable(name));
    const HostWeights weights = ToWeights(chorus::ReadVariables(variables));
    const chorus::HostBatch batch = context.next_batch();
    const ReplicaStep step = model.LossAndGradients(
        weights, HostExamples{batch.features.data(), batch.labels.data(), batch.size}, batch.size);
    std::vector<std::pair<chorus::Tensor, chorus::ShardedVariable>> gradients;
    for (size_t i = 0; i < variables.size(); ++i) {
      gradients.emplace_back(
          chorus::Tensor::FromVector(Host(), variables[i].shape(), step.gradients[i]),
          variables[i]);
    }
    chorus::ApplyGradients(gradients);
    return std::vector<chorus::Tensor>{chorus::Tensor::FromVector(
        Host(), {3},
        {step.scaled_loss, static_cast<float>(step.correct), static_cast<float>(batch.size)})};
  });
  return chorus::ServeIfServerTask();
}

std::vector<EpochResult> FitWithParameterServers(
    const TrainAndTest& data, const TrainerOptions& options,
    const std::function<void(const EpochResult&)>& on_epoch) {
  chorus::ParameterServerStrategy strategy(
      nullptr, std::make_shared<chorus::partitioners::MinSizePartitioner>(256 << 10, 2));
  std::printf(
      "Strategy: ParameterServerStrategy, %d workers, %d ps tasks, variables split by "
      "MinSizePartitioner(256 KiB, at most 2 shards), Adam on the ps tasks\n",
      strategy.num_workers(), strategy.num_ps());
  strategy.set_optimizer(chorus::ServerOptimizer::Adam(options.learning_rate));
  // The initial weights: the same Glorot draw as the other strategies' model with this seed.
  const Model initial(ConfigFor(options));
  std::vector<chorus::ShardedVariable> variables;
  {
    auto scope = strategy.scope();
    for (size_t i = 0; i < kVariableNames.size(); ++i) {
      variables.push_back(chorus::ShardedVariable::Create(chorus::VariableSpec{kVariableNames[i]},
                                                          initial.variables()[i].value()));
    }
  }
  for (const chorus::ShardedVariable& variable : variables) {
    std::printf("  %s %s: %zu shard(s) on ps", variable.name().c_str(),
                chorus::ShapeString(variable.shape()).c_str(), variable.shards().size());
    for (const chorus::ShardPlacement& shard : variable.shards()) std::printf(" %d", shard.ps);
    std::printf("\n");
  }
  chorus::ShardedCheckpoint checkpoint;
  for (const chorus::ShardedVariable& variable : variables) {
    checkpoint.Track("model/" + variable.name(), variable);
  }
  checkpoint.TrackOptimizer("optimizer");
  // The chief alone writes (no collective): a manager of no strategy.
  std::unique_ptr<chorus::CheckpointManager> checkpoints;
  if (!options.checkpoint_dir.empty()) {
    std::vector<chorus::VariableSignature> signature;
    for (const chorus::ShardedVariable& variable : variables) {
      signature.push_back({variable.name(), variable.dtype(), variable.shape()});
    }
    checkpoints = std::make_unique<chorus::CheckpointManager>(
        options.checkpoint_dir,
        chorus::JobIdentity{options.seed, chorus::ModelSignature(signature),
                            ParameterServerCluster(strategy)},
        nullptr, CheckpointOptions(options));
  }

  const int64_t steps_per_epoch = data.train.size() / options.global_batch_size;
  int64_t steps = 0;
  int first_epoch = 1;
  if (options.resume) {
    // A damaged or missing latest checkpoint falls back to the newest whole one, with a warning.
    const std::string latest = checkpoints ? checkpoints->Latest().path : std::string();
    if (latest.empty()) {
      std::printf("No checkpoint in %s to resume from: starting at step 0\n",
                  options.checkpoint_dir.c_str());
    } else {
      steps = checkpoint.Restore(latest);
      first_epoch = static_cast<int>(steps / std::max<int64_t>(1, steps_per_epoch)) + 1;
      std::printf("Resumed from %s at step %lld: epoch %d\n", latest.c_str(),
                  static_cast<long long>(steps), first_epoch);
    }
    std::fflush(stdout);
  }

  chorus::ClusterCoordinator coordinator(strategy);
  const chorus::PerWorkerDataset dataset = coordinator.create_per_worker_dataset(kTrainDataset);
  std::vector<EpochResult> results;
  for (int epoch = first_epoch; epoch <= options.epochs; ++epoch) {
    std::vector<chorus::RemoteValue> values;
    for (int64_t s = 0; s < steps_per_epoch; ++s) {
      if (options.max_steps > 0 && steps >= options.max_steps) break;
      values.push_back(coordinator.schedule(kTrainStep, dataset.iterator()));
      ++steps;
    }
    coordinator.join();
    EpochResult result;
    result.epoch = epoch;
    result.steps = static_cast<int64_t>(values.size());
    double loss = 0, correct = 0, seen = 0;
    for (const auto& outputs : chorus::ClusterCoordinator::fetch(values)) {
      const std::vector<float> sums = outputs.at(0).ToVector();
      loss += sums[0];
      correct += sums[1];
      seen += sums[2];
    }
    result.train_loss = values.empty() ? 0 : loss / static_cast<double>(values.size());
    result.train_accuracy = seen > 0 ? 100.0 * correct / seen : 0;
    const Model& model = initial;  // its arithmetic, with the ps tasks' weights
    result.test = EvaluateWeights(model, ToWeights(chorus::ReadVariables(variables)), data.test,
                                  options.global_batch_size);
    const bool last =
        epoch == options.epochs || (options.max_steps > 0 && steps >= options.max_steps);
    if (checkpoints != nullptr && (epoch % 2 == 0 || last)) {
      result.checkpoint = checkpoint.Save(*checkpoints, epoch);
    }
    if (on_epoch) on_epoch(result);
    results.push_back(result);
    if (last) break;
  }
  return results;
}

}  // namespace fashion_mnist
