#include "trainer.h"

#include <chorus/base/error.h>
#include <chorus/distribute/replica_context.h>

#include <bit>
#include <fstream>
#include <string>
#include <vector>

namespace fashion_mnist {
namespace {

[[noreturn]] void Fail(const std::string& message) {
  throw chorus::Error(CHORUS_INVALID_ARGUMENT, message);
}

ModelConfig ConfigFor(const TrainerOptions& options) {
  ModelConfig config;
  config.seed = options.seed;
  config.l2 = options.l2;
  return config;
}

std::unique_ptr<Model> CreateInScope(chorus::Strategy& strategy, const ModelConfig& config) {
  const auto scope = strategy.scope();
  return std::make_unique<Model>(config);
}

HostBatchCopy ReplicaBatch(const chorus::Batch& batch, const Model& model) {
  HostBatchCopy host = ToHost(batch);
  const auto expected = static_cast<size_t>(batch.size * model.config().inputs);
  if (host.features.size() != expected) {
    Fail("a batch of " + std::to_string(batch.size) + " examples has " +
         std::to_string(host.features.size()) + " features; the model takes " +
         std::to_string(model.config().inputs) + " per example");
  }
  return host;
}

// A different, reproducible order in every epoch (tf.data's reshuffle_each_iteration).
uint64_t EpochSeed(uint64_t seed, int epoch) {
  return seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(epoch);
}

Evaluation Finish(double loss_sum, double correct, double count) {
  Evaluation e;
  e.examples = static_cast<int64_t>(count);
  e.loss = count > 0 ? loss_sum / count : 0.0;
  e.accuracy = count > 0 ? 100.0 * correct / count : 0.0;
  return e;
}

}  // namespace

Trainer::Trainer(chorus::Strategy& strategy, const TrainerOptions& options)
    : strategy_(strategy),
      options_(options),
      model_(CreateInScope(strategy, ConfigFor(options))),
      optimizer_(options.learning_rate) {
  if (options.global_batch_size <= 0) {
    Fail("the global batch size must be positive, got " +
         std::to_string(options.global_batch_size));
  }
  TrackModel(checkpoint_, *model_);
  checkpoint_.Track("optimizer", optimizer_);
  if (!options.checkpoint_dir.empty()) {
    checkpoints_ = std::make_unique<chorus::CheckpointManager>(
        options.checkpoint_dir, Identity(), &strategy_, CheckpointOptions(options));
  }
}

chorus::CheckpointManagerOptions CheckpointOptions(const TrainerOptions& options) {
  chorus::CheckpointManagerOptions manager;
  manager.take_over = options.take_over_checkpoint_dir;
  manager.take_over_hint = "--checkpoint-dir-takeover";
  return manager;
}

chorus::JobIdentity Trainer::Identity() const {
  return chorus::JobIdentity::Of(options_.seed, model_->variables(), &strategy_);
}

StepMetrics Trainer::TrainStep(const chorus::DistributedBatch& batch) {
  const int64_t global_batch_size = batch.global_size;
  const chorus::PerReplica sums = strategy_.run(
      [&](chorus::ReplicaContext& context, const chorus::Batch& replica_batch) {
        const HostBatchCopy host = ReplicaBatch(replica_batch, *model_);
        const HostWeights weights = model_->ReadWeights();
        const ReplicaStep step = model_->LossAndGradients(weights, host.view(), global_batch_size);
        optimizer_.apply_gradients(model_->GradientsOn(context.device(), step));
        return chorus::Tensor::FromVector(context.device(), {2},
                                          {step.scaled_loss, static_cast<float>(step.correct)});
      },
      batch);
  const std::vector<float> total = strategy_.reduce(CHORUS_REDUCE_SUM, sums).ToVector();
  ++steps_;
  return StepMetrics{total[0], static_cast<int64_t>(total[1]), global_batch_size};
}

Evaluation Trainer::Evaluate(const ImageSet& test) {
  const chorus::DistributedDataset batches =
      strategy_.experimental_distribute_dataset(test.ToDataset().Batch(options_.global_batch_size));
  double loss = 0, correct = 0, count = 0;
  for (int64_t s = 0; s < batches.num_steps(); ++s) {
    const chorus::PerReplica sums = strategy_.run(
        [&](chorus::ReplicaContext& context, const chorus::Batch& replica_batch) {
          const HostBatchCopy host = ReplicaBatch(replica_batch, *model_);
          const EvalSums e = model_->Evaluate(model_->ReadWeights(), host.view());
          return chorus::Tensor::FromVector(
              context.device(), {3},
              {static_cast<float>(e.loss), static_cast<float>(e.correct),
               static_cast<float>(e.count)});
        },
        batches.Get(s));
    const std::vector<float> total = strategy_.reduce(CHORUS_REDUCE_SUM, sums).ToVector();
    loss += total[0];
    correct += total[1];
    count += total[2];
  }
  return Finish(loss, correct, count);
}

std::vector<EpochResult> Trainer::Fit(const ImageSet& train, const ImageSet& test,
                                      const std::function<void(const EpochResult&)>& on_epoch) {
  const chorus::Dataset examples = train.ToDataset();
  std::vector<EpochResult> results;
  const auto limit_reached = [&] { return options_.max_steps > 0 && steps_ >= options_.max_steps; };
  for (int epoch = 1; epoch <= options_.epochs && !limit_reached(); ++epoch) {
    const chorus::DistributedDataset batches = strategy_.experimental_distribute_dataset(
        examples.Shuffle(EpochSeed(options_.seed, epoch)).Batch(options_.global_batch_size));
    EpochResult result;
    result.epoch = epoch;
    double total_loss = 0;
    int64_t correct = 0, seen = 0;
    for (int64_t s = 0; s < batches.num_steps() && !limit_reached(); ++s) {
      const StepMetrics m = TrainStep(batches.Get(s));
      total_loss += m.loss;
      correct += m.correct;
      seen += m.examples;
      ++result.steps;
    }
    result.train_loss = result.steps > 0 ? total_loss / static_cast<double>(result.steps) : 0;
    result.train_accuracy =
        seen > 0 ? 100.0 * static_cast<double>(correct) / static_cast<double>(seen) : 0;
    result.test = Evaluate(test);
    const bool last = epoch == options_.epochs || limit_reached();
    if (checkpoints_ != nullptr && (epoch % 2 == 0 || last)) {
      const std::string path = SaveCheckpoint(*checkpoints_, epoch);
      if (checkpoints_->writer()) result.checkpoint = path;
    }
    if (on_epoch) on_epoch(result);
    results.push_back(result);
  }
  return results;
}

void Trainer::SaveCheckpoint(const std::string& path) const {
  const auto scope = strategy_.scope();
  checkpoint_.Save(path);
}

std::string Trainer::SaveCheckpoint(chorus::CheckpointManager& manager, int number) const {
  const auto scope = strategy_.scope();
  return manager.Save(checkpoint_, number);
}

void Trainer::RestoreCheckpoint(const std::string& path) const {
  const auto scope = strategy_.scope();
  checkpoint_.Restore(path);
}

HostWeights Trainer::Weights() const {
  const auto scope = strategy_.scope();
  return model_->ReadWeights();
}

void TrackModel(chorus::Checkpoint& checkpoint, const Model& model) {
  for (const chorus::Variable& variable : model.variables()) {
    checkpoint.Track("model/" + variable.name(), variable);
  }
}

Evaluation EvaluateWithoutStrategy(const Model& model, const ImageSet& test, int64_t batch_size) {
  if (chorus::CurrentStrategy() != nullptr) {
    Fail("EvaluateWithoutStrategy was called inside a strategy's scope");
  }
  return EvaluateWeights(model, model.ReadWeights(), test, batch_size);
}

Evaluation EvaluateWeights(const Model& model, const HostWeights& weights, const ImageSet& test,
                           int64_t batch_size) {
  const chorus::Dataset batches = test.ToDataset().Batch(batch_size);
  EvalSums total;
  for (int64_t b = 0; b < batches.num_batches(); ++b) {
    const chorus::HostBatch batch = batches.GetBatch(b);
    const EvalSums e = model.Evaluate(
        weights, HostExamples{batch.features.data(), batch.labels.data(), batch.size});
    total.loss += e.loss;
    total.correct += e.correct;
    total.count += e.count;
  }
  return Finish(total.loss, static_cast<double>(total.correct), static_cast<double>(total.count));
}

std::string SaveNumberedCheckpoint(const Trainer& trainer, const std::string& dir, int number) {
  chorus::CheckpointManager manager(dir, trainer.Identity(), &trainer.strategy());
  const std::string path = trainer.SaveCheckpoint(manager, number);
  return manager.writer() ? path : std::string();
}

size_t WriteFloats(const std::string& path, const std::vector<float>& values) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) Fail("cannot open '" + path + "' for writing");
  for (float value : values) {
    const uint32_t bits = std::bit_cast<uint32_t>(value);
    unsigned char le[4];
    for (int i = 0; i < 4; ++i) le[i] = static_cast<unsigned char>(bits >> (8 * i));
    out.write(reinterpret_cast<const char*>(le), 4);
  }
  out.flush();
  if (!out) Fail("cannot write '" + path + "'");
  return values.size() * 4;
}

size_t WriteWeights(const std::string& path, const HostWeights& weights) {
  std::vector<float> values;
  for (const std::vector<float>* part :
       {&weights.kernel1, &weights.bias1, &weights.kernel2, &weights.bias2}) {
    values.insert(values.end(), part->begin(), part->end());
  }
  return WriteFloats(path, values);
}

}  // namespace fashion_mnist
