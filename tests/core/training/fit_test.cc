// The fit loop (chorus/training/fit.h), its metrics and callbacks, with ranks as replica threads:
// the metrics equal a hand count, every strategy trains like one device, steps_per_execution
// trains the same bits and calls back per execution, a model built outside scope() is refused,
// ModelCheckpoint and BackupAndRestore save and resume.
#include <chorus/chorus.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cpu_devices_for_tests.h"
#include "linear_softmax_model.h"

namespace chorus {
namespace {

using test::CpuDevices;
using test::ExpectMessage;
using testing::LinearSoftmaxModel;
using testing::SeparableData;

constexpr int64_t kInputs = 5, kClasses = 3;

class TempDir {
 public:
  TempDir()
      : path_(std::filesystem::temp_directory_path() /
              ("chorus_fit_test_" + std::to_string(getpid()) + "_" + std::to_string(next_++))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  static inline int next_ = 0;
  std::filesystem::path path_;
};

// The hand count: loss and accuracy of fixed weights over `data` in batches of `batch`.
struct HandCount {
  double mean_step_loss = 0;  // mean over batches of (sum of losses / batch size + reg)
  double mean_example_loss = 0;
  double accuracy = 0;
};

HandCount Count(const LinearSoftmaxModel& model, const Dataset& data, int64_t batch) {
  const std::vector<float> w = model.kernel().value().ToVector();
  const std::vector<float> b = model.bias().value().ToVector();
  const Dataset batches = data.Batch(batch);
  HandCount count;
  double example_loss = 0, correct = 0;
  for (int64_t s = 0; s < batches.num_batches(); ++s) {
    const HostBatch host = batches.GetBatch(s);
    const StepOutputs out = model.Forward(w, b, host);
    double sum = 0;
    for (int64_t i = 0; i < host.size; ++i) {
      sum += out.per_example_loss[static_cast<size_t>(i)];
      const float* row = out.logits.data() + i * kClasses;
      const auto best = std::max_element(row, row + kClasses) - row;
      correct += best == host.labels[static_cast<size_t>(i)];
    }
    example_loss += sum;
    count.mean_step_loss += sum / static_cast<double>(host.size) + out.regularization_loss;
  }
  count.mean_step_loss /= static_cast<double>(batches.num_batches());
  count.mean_example_loss = example_loss / static_cast<double>(data.num_examples());
  count.accuracy = correct / static_cast<double>(data.num_examples());
  return count;
}

// SGD with a learning rate of 0 leaves the weights as they are: the epoch's metrics then
// describe fixed weights that a hand count can check.
TEST(Fit, MetricsEqualAHandCountUnderEveryReplicaCount) {
  const Dataset data = SeparableData(23, kInputs, kClasses, 7);  // 23: uneven last batch
  for (int replicas : {1, 2, 3, 4}) {
    SCOPED_TRACE("replicas " + std::to_string(replicas));
    MirroredStrategy strategy(CpuDevices(static_cast<uint32_t>(replicas)),
                              "reduction_to_one_device");
    std::unique_ptr<LinearSoftmaxModel> model;
    {
      const auto scope = strategy.scope();
      model = std::make_unique<LinearSoftmaxModel>(kInputs, kClasses, 1e-2f);
    }
    SGD frozen(0.0f);
    FitOptions options;
    options.batch_size = 8;
    options.shuffle = false;
    options.validation_data = &data;
    const History history = Fit(&strategy, *model, frozen, data, options);
    ASSERT_EQ(history.epochs.size(), 1u);
    const EpochLogs& logs = history.epochs[0];
    const HandCount hand = Count(*model, data, 8);
    EXPECT_EQ(logs.steps, 3);
    EXPECT_NEAR(logs.loss, hand.mean_step_loss, 1e-5);
    EXPECT_DOUBLE_EQ(logs.accuracy, hand.accuracy);
    ASSERT_TRUE(logs.val_loss.has_value());
    EXPECT_NEAR(*logs.val_loss, hand.mean_example_loss, 1e-5);
    EXPECT_DOUBLE_EQ(*logs.val_accuracy, hand.accuracy);
    const Evaluation e = Evaluate(&strategy, *model, data, 8);
    EXPECT_EQ(e.examples, 23);
    EXPECT_NEAR(e.loss, hand.mean_example_loss, 1e-5);
    EXPECT_DOUBLE_EQ(e.accuracy, hand.accuracy);
  }
}

TEST(Fit, EveryStrategyTrainsAsOneDevice) {
  const Dataset data = SeparableData(96, kInputs, kClasses, 3);
  FitOptions options;
  options.batch_size = 16;
  options.epochs = 8;
  options.seed = 5;
  std::vector<float> reference;
  const auto train = [&](Strategy* strategy) {
    std::unique_ptr<LinearSoftmaxModel> model;
    {
      const auto scope = strategy != nullptr ? strategy->scope() : nullptr;
      model = std::make_unique<LinearSoftmaxModel>(kInputs, kClasses, 1e-3f);
    }
    Adam adam(0.1f);
    const History history = Fit(strategy, *model, adam, data, options);
    EXPECT_LT(history.epochs.back().loss, 0.85 * history.epochs.front().loss);
    const auto scope = strategy != nullptr ? strategy->scope() : nullptr;
    return model->kernel().value().ToVector();
  };
  reference = train(nullptr);
  OneDeviceStrategy one(CpuDevices(1)[0]);
  MirroredStrategy mirrored(CpuDevices(4), "reduction_to_one_device");
  CentralStorageStrategy central(CpuDevices(2));
  for (Strategy* strategy : std::vector<Strategy*>{&one, &mirrored, &central}) {
    SCOPED_TRACE(strategy->name());
    const std::vector<float> kernel = train(strategy);
    ASSERT_EQ(kernel.size(), reference.size());
    for (size_t i = 0; i < kernel.size(); ++i) EXPECT_NEAR(kernel[i], reference[i], 1e-4) << i;
  }
}

// FitOptions::gradient_shards: every strategy computes the same shards' gradients and sums them
// in the same pairwise order, so they train to the same bits. 88 examples in batches of 16: the
// last batch of 8 leaves shards (and Mirrored(4)'s replicas) 2 and 3 empty. Without shards the
// same runs part in the last bits (the model sums a replica's examples in double, then rounds).
TEST(Fit, GradientShardsTrainEveryStrategyToTheSameBits) {
  const Dataset data = SeparableData(88, kInputs, kClasses, 3);
  const auto train = [&](Strategy* strategy, int64_t shards) {
    std::unique_ptr<LinearSoftmaxModel> model;
    {
      const auto scope = strategy != nullptr ? strategy->scope() : nullptr;
      model = std::make_unique<LinearSoftmaxModel>(kInputs, kClasses, 1e-2f);
    }
    Adam adam(0.1f);
    FitOptions options;
    options.batch_size = 16;
    options.epochs = 6;
    options.seed = 5;
    options.gradient_shards = shards;
    const History history = Fit(strategy, *model, adam, data, options);
    EXPECT_LT(history.epochs.back().loss, 0.85 * history.epochs.front().loss);
    const auto scope = strategy != nullptr ? strategy->scope() : nullptr;
    std::vector<float> weights = model->kernel().value().ToVector();
    const std::vector<float> bias = model->bias().value().ToVector();
    weights.insert(weights.end(), bias.begin(), bias.end());
    return weights;
  };
  OneDeviceStrategy one(CpuDevices(1)[0]);
  MirroredStrategy two(CpuDevices(2), "reduction_to_one_device");
  MirroredStrategy four(CpuDevices(4), "reduction_to_one_device");
  const std::vector<float> reference = train(nullptr, 4);
  for (Strategy* strategy : std::vector<Strategy*>{&one, &two, &four}) {
    SCOPED_TRACE(strategy->name() + " of " + std::to_string(strategy->num_replicas_in_sync()));
    EXPECT_EQ(train(strategy, 4), reference);  // bit for bit
  }
  // The test's power: the same strategies without shards do not agree to the bit.
  EXPECT_NE(train(&one, 0), train(&four, 0));
}

TEST(Fit, GradientShardsMustSplitTheBatchOverTheReplicas) {
  const Dataset data = SeparableData(16, kInputs, kClasses, 1);
  MirroredStrategy strategy(CpuDevices(4), "reduction_to_one_device");
  std::unique_ptr<LinearSoftmaxModel> model;
  {
    const auto scope = strategy.scope();
    model = std::make_unique<LinearSoftmaxModel>(kInputs, kClasses, 0.0f);
  }
  SGD sgd(0.1f);
  FitOptions options;
  options.batch_size = 8;
  options.gradient_shards = 2;
  ExpectMessage([&] { Fit(&strategy, *model, sgd, data, options); },
                "gradient_shards 2 is not a multiple of the 4 replicas in sync");
  options.gradient_shards = 3;
  ExpectMessage([&] { Fit(&strategy, *model, sgd, data, options); },
                "gradient_shards 3 does not divide batch_size 8");
  options.gradient_shards = -1;
  ExpectMessage([&] { Fit(&strategy, *model, sgd, data, options); },
                "gradient_shards must be 0 (off) or positive, got -1");
}

// FitOptions::steps_per_execution: the same training, step for step, in executions of N steps;
// the callbacks see the ends of the executions. 40 examples in batches of 4: 10 steps, not a
// multiple of 4, so the last execution has 2.
TEST(Fit, StepsPerExecutionTrainsTheSameBitsAndCallsBackPerExecution) {
  const Dataset data = SeparableData(40, kInputs, kClasses, 6);
  // What the callbacks saw: "batch <step>" per on_train_batch_end, "epoch <steps>" per epoch.
  struct Recorder : Callback {
    std::vector<std::string> calls;
    void on_train_batch_end(FitState&, int64_t step, double, double) override {
      calls.push_back("batch " + std::to_string(step));
    }
    void on_epoch_end(FitState&, const EpochLogs& logs) override {
      calls.push_back("epoch " + std::to_string(logs.steps));
    }
  };
  struct Run {
    std::vector<float> weights;
    std::vector<std::string> calls;
    History history;
  };
  const auto train = [&](int steps_per_execution, int64_t log_every_steps,
                         int64_t steps_per_epoch = 0, InputOptions input = {}) {
    MirroredStrategy strategy(CpuDevices(2), "reduction_to_one_device");
    std::unique_ptr<LinearSoftmaxModel> model;
    {
      const auto scope = strategy.scope();
      model = std::make_unique<LinearSoftmaxModel>(kInputs, kClasses, 1e-2f);
    }
    Adam adam(0.1f);
    Recorder recorder;
    FitOptions options;
    options.batch_size = 4;
    options.epochs = 2;
    options.seed = 3;
    options.steps_per_execution = steps_per_execution;
    options.log_every_steps = log_every_steps;
    options.steps_per_epoch = steps_per_epoch;
    options.input_options = input;
    options.validation_data = &data;
    options.callbacks = {&recorder};
    Run run;
    run.history = Fit(&strategy, *model, adam, data, options);
    const auto scope = strategy.scope();
    run.weights = model->kernel().value().ToVector();
    const std::vector<float> bias = model->bias().value().ToVector();
    run.weights.insert(run.weights.end(), bias.begin(), bias.end());
    run.calls = std::move(recorder.calls);
    return run;
  };
  using Calls = std::vector<std::string>;
  const Run one = train(1, 1);
  EXPECT_EQ(one.calls,
            (Calls{"batch 1", "batch 2", "batch 3",  "batch 4", "batch 5", "batch 6", "batch 7",
                   "batch 8", "batch 9", "epoch 10", "batch 1", "batch 2", "batch 3", "batch 4",
                   "batch 5", "batch 6", "batch 7",  "batch 8", "batch 9", "epoch 10"}));
  const Run four = train(4, 1);
  // ceil(10 / 4) = 3 executions an epoch: the first two end at steps 4 and 8, the last (2 steps)
  // at the epoch's end, whose figures go to on_epoch_end as with 1 step per execution.
  EXPECT_EQ(four.calls,
            (Calls{"batch 4", "batch 8", "epoch 10", "batch 4", "batch 8", "epoch 10"}));
  EXPECT_EQ(four.weights, one.weights);  // bit for bit
  ASSERT_EQ(four.history.epochs.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(four.history.epochs[e].steps, 10);
    EXPECT_EQ(four.history.epochs[e].loss, one.history.epochs[e].loss);
    EXPECT_EQ(four.history.epochs[e].accuracy, one.history.epochs[e].accuracy);
    ASSERT_TRUE(four.history.epochs[e].val_loss.has_value());
    EXPECT_EQ(*four.history.epochs[e].val_loss, *one.history.epochs[e].val_loss);
  }
  // log_every_steps reads at the end of the executions a multiple of it falls in: 3 in [0, 4),
  // 6 in [4, 8), 9 in the epoch's last; 5 in [4, 8) alone.
  EXPECT_EQ(train(4, 3).calls,
            (Calls{"batch 4", "batch 8", "epoch 10", "batch 4", "batch 8", "epoch 10"}));
  EXPECT_EQ(train(4, 5).calls, (Calls{"batch 8", "epoch 10", "batch 8", "epoch 10"}));
  // steps_per_epoch 7: executions [0, 4) and [4, 7).
  const Run seven = train(4, 1, 7);
  EXPECT_EQ(seven.calls, (Calls{"batch 4", "epoch 7", "batch 4", "epoch 7"}));
  EXPECT_EQ(seven.weights, train(1, 1, 7).weights);
  // Batches kept in host memory and a deeper buffer: the same training too.
  InputOptions host;
  host.experimental_fetch_to_device = false;
  host.experimental_per_replica_buffer_size = 3;
  EXPECT_EQ(train(4, 1, 0, host).weights, one.weights);
}

TEST(Fit, AModelBuiltOutsideTheScopeIsRefused) {
  const Dataset data = SeparableData(16, kInputs, kClasses, 1);
  MirroredStrategy strategy(CpuDevices(2), "reduction_to_one_device");
  LinearSoftmaxModel outside(kInputs, kClasses, 0.0f);
  SGD sgd(0.1f);
  FitOptions options;
  options.batch_size = 8;
  ExpectMessage([&] { Fit(&strategy, outside, sgd, data, options); },
                "variable 'linear/kernel' of the model was created outside every strategy's "
                "scope, but the model is trained under this MirroredStrategy; create the model");
  ExpectMessage([&] { Evaluate(&strategy, outside, data, 8); }, "inside strategy.scope()");
  // And the other way round: a model of a strategy trained with none.
  std::unique_ptr<LinearSoftmaxModel> inside;
  {
    const auto scope = strategy.scope();
    inside = std::make_unique<LinearSoftmaxModel>(kInputs, kClasses, 0.0f);
  }
  ExpectMessage([&] { Fit(nullptr, *inside, sgd, data, options); },
                "created in the scope of another MirroredStrategy, but the model is trained "
                "under no strategy");
}

TEST(Fit, BadOptionsAndDataAreRefused) {
  LinearSoftmaxModel model(kInputs, kClasses, 0.0f);
  SGD sgd(0.1f);
  const Dataset data = SeparableData(16, kInputs, kClasses, 1);
  FitOptions options;
  options.batch_size = 0;
  ExpectMessage([&] { Fit(nullptr, model, sgd, data, options); }, "batch_size must be positive");
  options.batch_size = 4;
  ExpectMessage([&] { Fit(nullptr, model, sgd, data.Batch(4), options); },
                "is already batched; pass the unbatched examples");
  ExpectMessage([&] { Fit(nullptr, model, sgd, data.Take(0), options); }, "has no examples");
  options.initial_epoch = 3;
  ExpectMessage([&] { Fit(nullptr, model, sgd, data, options); },
                "need 0 <= initial_epoch <= epochs");
  options.initial_epoch = 0;
  for (int steps : {0, -2}) {
    options.steps_per_execution = steps;
    test::ExpectError([&] { Fit(nullptr, model, sgd, data, options); }, CHORUS_INVALID_ARGUMENT,
                      {"steps_per_execution must be at least 1, got " + std::to_string(steps)});
  }
  options.steps_per_execution = 1;
  options.input_options.experimental_per_replica_buffer_size = 0;
  test::ExpectError([&] { Fit(nullptr, model, sgd, data, options); }, CHORUS_INVALID_ARGUMENT,
                    {"input_options.experimental_per_replica_buffer_size must be at least 1"});
}

TEST(Metrics, MeanAndAccuracyAggregateEveryReplica) {
  MirroredStrategy strategy(CpuDevices(3), "reduction_to_one_device");
  const auto scope = strategy.scope();
  Mean mean("m");
  SparseCategoricalAccuracy accuracy;
  strategy.run([&](ReplicaContext& context) {
    const auto r = static_cast<float>(context.replica_id_in_sync_group());
    const std::vector<float> values = {r, 2 * r};
    mean.update_state(values, std::vector<float>{1.0f, 3.0f});
    // Replica r: labels {0, 1}; logits pick class 0 for both, with a tie on the second.
    const std::vector<int32_t> labels = {0, 1};
    const std::vector<float> logits = {1, 0, 0.5f, 0.5f};
    accuracy.update_state(labels, logits, 2);
  });
  // sum over r of (r + 6r) = 7 * 3 = 21, weights 4 per replica.
  EXPECT_DOUBLE_EQ(mean.result(), 21.0 / 12.0);
  EXPECT_DOUBLE_EQ(accuracy.result(), 0.5);  // a tie goes to the lowest class, as argmax
  mean.reset_state();
  EXPECT_DOUBLE_EQ(mean.result(), 0.0);
  ExpectMessage(
      [&] {
        mean.update_state(std::vector<float>{1, 2}, std::vector<float>{1});
      },
      "2 values but 1 sample weights");
  ExpectMessage(
      [&] {
        accuracy.update_state(std::vector<int32_t>{0}, std::vector<float>{1, 2, 3}, 2);
      },
      "1 labels of 2 classes need 2 logits, got 3");
}

TEST(Callbacks, ProgressLinesAndModelCheckpointsRestoreWithoutAStrategy) {
  TempDir dir;
  const Dataset data = SeparableData(40, kInputs, kClasses, 2);
  MirroredStrategy strategy(CpuDevices(2), "reduction_to_one_device");
  std::unique_ptr<LinearSoftmaxModel> model;
  {
    const auto scope = strategy.scope();
    model = std::make_unique<LinearSoftmaxModel>(kInputs, kClasses, 0.0f);
  }
  std::FILE* log = std::tmpfile();
  ASSERT_NE(log, nullptr);
  ProgressBar progress(ProgressBar::Mode::kLines, log);
  ModelCheckpoint checkpoints((dir.path() / "ckpt-{epoch}").string());
  Adam adam(0.05f);
  FitOptions options;
  options.batch_size = 8;
  options.epochs = 2;
  options.callbacks = {&progress, &checkpoints};
  Fit(&strategy, *model, adam, data, options);
  std::rewind(log);
  std::string text;
  for (int c; (c = std::fgetc(log)) != EOF;) text += static_cast<char>(c);
  std::fclose(log);
  EXPECT_TRUE(test::HasText(text, "Epoch 1/2\n5/5 - "));
  EXPECT_TRUE(test::HasText(text, "Epoch 2/2\n5/5 - "));
  EXPECT_TRUE(test::HasText(text, " - loss: "));
  EXPECT_TRUE(test::HasText(text, " - accuracy: "));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "ckpt-1"));
  ASSERT_EQ(checkpoints.last_saved(), (dir.path() / "ckpt-2").string());

  LinearSoftmaxModel plain(kInputs, kClasses, 0.0f, /*seed=*/99);
  Checkpoint restore;
  restore.Track("model/linear/kernel", plain.kernel()).Track("model/linear/bias", plain.bias());
  restore.Restore(checkpoints.last_saved());
  std::vector<float> trained;
  {
    const auto scope = strategy.scope();
    trained = model->kernel().value().ToVector();
  }
  EXPECT_EQ(plain.kernel().value().ToVector(), trained);
}

// A job stopped in its third epoch resumes there, and ends with the weights of a run that never
// stopped (the shuffle of each epoch depends on the epoch only).
TEST(Callbacks, BackupAndRestoreResumesAtTheEpochAfterTheLastBackup) {
  TempDir dir;
  const Dataset data = SeparableData(48, kInputs, kClasses, 4);
  FitOptions options;
  options.batch_size = 8;
  options.epochs = 4;
  const auto make = [](MirroredStrategy& strategy) {
    const auto scope = strategy.scope();
    return std::make_unique<LinearSoftmaxModel>(kInputs, kClasses, 1e-3f);
  };

  MirroredStrategy reference_strategy(CpuDevices(2), "reduction_to_one_device");
  auto reference = make(reference_strategy);
  Adam reference_adam(0.05f);
  Fit(&reference_strategy, *reference, reference_adam, data, options);

  struct StopAtEpoch : Callback {
    int epoch;
    explicit StopAtEpoch(int e) : epoch(e) {}
    void on_epoch_begin(FitState& state) override {
      if (state.epoch == epoch) throw Error(CHORUS_ABORTED, "stopped for the test");
    }
  };
  {
    MirroredStrategy strategy(CpuDevices(2), "reduction_to_one_device");
    auto model = make(strategy);
    Adam adam(0.05f);
    BackupAndRestore backup(dir.path().string());
    StopAtEpoch stop(2);
    options.callbacks = {&backup, &stop};
    ExpectMessage([&] { Fit(&strategy, *model, adam, data, options); }, "stopped for the test");
    EXPECT_EQ(backup.restored_epoch(), -1);
    EXPECT_TRUE(std::filesystem::exists(dir.path() / "backup-2"));
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "backup-1")) << "only the newest is kept";
  }
  MirroredStrategy strategy(CpuDevices(2), "reduction_to_one_device");
  auto model = make(strategy);
  Adam adam(0.05f);
  BackupAndRestore backup(dir.path().string());
  options.callbacks = {&backup};
  const History history = Fit(&strategy, *model, adam, data, options);
  EXPECT_EQ(backup.restored_epoch(), 2);
  ASSERT_EQ(history.epochs.size(), 2u);
  EXPECT_EQ(history.epochs.front().epoch, 2);
  EXPECT_EQ(adam.iterations(), 4 * 6);
  // A finished fit removes the backup, its index and its owner record.
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "backup-4"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "checkpoint"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "owner"));
  std::vector<float> resumed, uninterrupted;
  {
    const auto scope = strategy.scope();
    resumed = model->kernel().value().ToVector();
  }
  {
    const auto scope = reference_strategy.scope();
    uninterrupted = reference->kernel().value().ToVector();
  }
  ASSERT_EQ(resumed.size(), uninterrupted.size());
  for (size_t i = 0; i < resumed.size(); ++i) EXPECT_FLOAT_EQ(resumed[i], uninterrupted[i]) << i;
}

// Two jobs that share a backup directory: the second (another seed) is refused instead of
// resuming from the first one's weights, unless it takes the directory over; a backup of more
// epochs than the fit has ("resuming at epoch 38 of 30") is refused too.
TEST(Callbacks, BackupAndRestoreRefusesAnotherJobsBackup) {
  TempDir dir;
  const Dataset data = SeparableData(48, kInputs, kClasses, 4);
  struct StopAtEpoch : Callback {
    void on_epoch_begin(FitState& state) override {
      if (state.epoch == 2) throw Error(CHORUS_ABORTED, "stopped for the test");
    }
  };
  const auto fit = [&](uint64_t seed, int epochs, BackupOptions backup_options, bool stop) {
    MirroredStrategy strategy(CpuDevices(2), "reduction_to_one_device");
    std::unique_ptr<LinearSoftmaxModel> model;
    {
      const auto scope = strategy.scope();
      model = std::make_unique<LinearSoftmaxModel>(kInputs, kClasses, 1e-3f);
    }
    Adam adam(0.05f);
    BackupAndRestore backup(dir.path().string(), backup_options);
    StopAtEpoch stop_at;
    FitOptions options;
    options.batch_size = 8;
    options.epochs = epochs;
    options.seed = seed;
    options.callbacks = {&backup};
    if (stop) options.callbacks.push_back(&stop_at);
    Fit(&strategy, *model, adam, data, options);
    return backup.restored_epoch();
  };
  ExpectMessage([&] { fit(1, 4, {}, true); }, "stopped for the test");
  ASSERT_TRUE(std::filesystem::exists(dir.path() / "backup-2"));

  ExpectMessage([&] { fit(2, 4, {}, false); },
                "the backup directory '" + dir.path().string() +
                    "' is not this job's: it belongs to another job (seed 1, ");
  ExpectMessage(
      [&] {
        fit(2, 4, {false, "--backup-dir-takeover"}, false);
      },
      "take this one over with --backup-dir-takeover");
  ExpectMessage([&] { fit(1, 1, {}, false); },
                "BackupAndRestore: the backup '" + (dir.path() / "backup-2").string() +
                    "' was made after epoch 2, but this fit has 1 epochs: it is not this job's "
                    "backup");
  EXPECT_EQ(fit(2, 4, {true, ""}, false), 2) << "taken over: it resumes from the backup";
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "owner")) << "a finished fit frees it";
}

}  // namespace
}  // namespace chorus
