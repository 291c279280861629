// TensorFlow's "Custom training with tf.distribute.Strategy" tutorial in C++: the tutorial's CNN
// (or an MLP) on Fashion-MNIST under OneDevice, Mirrored, CentralStorage, MultiWorkerMirrored or
// parameter-server strategy, trained by chorus::Fit (Keras' model.fit: progress bar, metrics,
// checkpoints, BackupAndRestore) or by the tutorial's custom loop (--loop custom), and finally
// restored into a model with no strategy.
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_resolver.h>
#include <chorus/distribute/multi_worker_mirrored_strategy.h>
#include <chorus/distribute/strategies.h>
#include <chorus/distribute/tpu_strategy.h>
#include <chorus/runtime/registry.h>
#include <chorus/training/callbacks.h>
#include <chorus/training/checkpoint_manager.h>
#include <chorus/training/fit.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiled_step.h"
#include "fashion_mnist_files.h"
#include "fit_models.h"
#include "synthetic_data.h"
#include "trainer.h"
#ifdef CHORUS_FASHION_MNIST_WITH_PARAMETER_SERVER
#include <chorus/parameter_server/cluster_coordinator.h>
#include <chorus/parameter_server/fit.h>
#include <chorus/parameter_server/parameter_server_strategy.h>

#include "parameter_server_training.h"
#include "sidecar_evaluator.h"
#endif

namespace {

using fashion_mnist::TrainAndTest;

const std::vector<std::string> kStrategies = {"one_device",       "mirrored",
                                              "central_storage",  "multi_worker_mirrored",
                                              "parameter_server", "tpu"};

// Where Debian's dataset-fashion-mnist package puts the files.
constexpr const char* kDebianDataDir = "/usr/share/datasets/fashion-mnist";
// --checkpoint-dir's default: a scratch directory every run without --checkpoint-dir shares.
constexpr const char* kDefaultCheckpointDir = "/tmp/chorus_fashion_mnist_ckpt";

struct Flags {
  std::string data_dir;
  bool synthetic = false;
  std::string model = fashion_mnist::ModelNames().front();
  bool model_given = false;  // --model on the command line
  std::string loop = "fit";
  std::string progress = "auto";
  std::string backup_dir;
  std::string strategy = "mirrored";
  int replicas = 0;
  std::string devices = "cpu";
  std::string cross_device_ops;
  std::string
      tpu;  // --strategy tpu: the TPU system; empty: TPUClusterResolver's variables or local
  int64_t global_batch = 0;
  int64_t gradient_shards = 0;
  int epochs = 10;
  int64_t steps = 0;
  uint64_t seed = 1;
  int64_t train_examples = 0;
  int64_t test_examples = 0;
  std::string save_weights;
  std::string checkpoint_dir = kDefaultCheckpointDir;
  bool checkpoint_dir_given = false;  // --checkpoint-dir on the command line
  bool checkpoint_dir_takeover = false;
  bool backup_dir_takeover = false;
  bool resume = false;
  int steps_per_execution = 10;  // --loop compiled
};

[[noreturn]] void Fail(const std::string& message) {
  throw chorus::Error(CHORUS_INVALID_ARGUMENT, message);
}

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

TrainAndTest LoadData(const Flags& flags) {
  if (!flags.synthetic) {
    const std::string dir = flags.data_dir.empty() ? kDebianDataDir : flags.data_dir;
    std::optional<TrainAndTest> data = fashion_mnist::LoadFashionMnist(dir);
    if (!data) {
      Fail("no Fashion-MNIST files in '" + dir + "'" +
           (flags.data_dir.empty()
                ? " (install them: apt-get install -y dataset-fashion-mnist, or give --data-dir)"
                : "") +
           "; --synthetic trains on generated data instead");
    }
    data->train = data->train.Take(flags.train_examples > 0 ? flags.train_examples : -1);
    data->test = data->test.Take(flags.test_examples > 0 ? flags.test_examples : -1);
    return *data;
  }
  if (!flags.data_dir.empty()) Fail("--synthetic and --data-dir exclude each other");
  std::cout << "--synthetic: using generated data, not Fashion-MNIST.\n";
  return fashion_mnist::GenerateSyntheticData(
      flags.seed,
      flags.train_examples > 0 ? flags.train_examples : fashion_mnist::kFashionMnistTrainSize,
      flags.test_examples > 0 ? flags.test_examples : fashion_mnist::kFashionMnistTestSize);
}

// --devices pjrt: the PJRT plugin's devices (the TPU system's); else --replicas virtual cpu
// devices, or the registry's default devices (CHORUS_CPU_DEVICES).
std::vector<chorus::Device> Devices(const Flags& flags) {
  if (flags.devices == "pjrt") {
    if (flags.replicas > 0)
      Fail("--devices pjrt replicates over the PJRT devices; drop --replicas");
    return chorus::InitializeTpuSystem(chorus::TPUClusterResolver("local")).devices;
  }
  if (flags.devices != "cpu") Fail("unknown --devices '" + flags.devices + "'; valid: cpu, pjrt");
  chorus::Registry& registry = chorus::Registry::Global();
  if (flags.replicas <= 0) return registry.DefaultDevices();
  auto cpu = chorus::DeviceEnumerator::Create(registry.FindPlugin(chorus::kBuiltinPluginName),
                                              {{"count", std::to_string(flags.replicas)}});
  std::vector<chorus::Device> devices;
  for (uint32_t i = 0; i < cpu->count(); ++i) devices.push_back({cpu, i});
  return devices;
}

std::unique_ptr<chorus::Strategy> MakeStrategy(const Flags& flags) {
  if (flags.strategy != "mirrored" && flags.strategy != "multi_worker_mirrored" &&
      flags.strategy != "tpu" && !flags.cross_device_ops.empty()) {
    Fail(
        "--cross-device-ops applies to --strategy mirrored, multi_worker_mirrored and tpu only, "
        "not " +
        flags.strategy);
  }
  if (flags.strategy == "one_device") {
    if (flags.replicas > 1) Fail("--strategy one_device has one replica; drop --replicas");
    return std::make_unique<chorus::OneDeviceStrategy>(Devices(flags).front());
  }
  if (flags.strategy == "mirrored") {
    return std::make_unique<chorus::MirroredStrategy>(Devices(flags), flags.cross_device_ops);
  }
  if (flags.strategy == "multi_worker_mirrored") {
    // The cluster comes from TF_CONFIG (chorus-launch sets it), torchrun, Open MPI or Slurm.
    return std::make_unique<chorus::MultiWorkerMirroredStrategy>(
        nullptr, chorus::CommunicationOptions{}, Devices(flags), flags.cross_device_ops);
  }
  if (flags.strategy == "central_storage") {
    return std::make_unique<chorus::CentralStorageStrategy>(Devices(flags));
  }
  if (flags.strategy == "tpu") {
    // The replicas are the TPU system's devices: the PJRT plugin's (CHORUS_PJRT_PLUGIN, ...).
    if (flags.replicas > 0)
      Fail("--strategy tpu replicates over the PJRT devices; drop --replicas");
    // --tpu, else TensorFlow's variables (TPU_WORKER_HOSTNAMES and TPU_WORKER_ID on each host of
    // a slice, TPU_NAME, KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS), else this host alone.
    std::string tpu = flags.tpu;
    if (tpu.empty()) {
      const bool from_variables = std::getenv("TPU_WORKER_HOSTNAMES") != nullptr ||
                                  std::getenv("TPU_NAME") != nullptr ||
                                  std::getenv("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS") != nullptr;
      if (!from_variables) tpu = "local";
    }
    return std::make_unique<chorus::TPUStrategy>(
        tpu.empty() ? chorus::TPUClusterResolver() : chorus::TPUClusterResolver(tpu),
        flags.cross_device_ops);
  }
  Fail("unknown --strategy '" + flags.strategy + "'; valid: " + Join(kStrategies));
}

void PrintStrategy(const chorus::Strategy& strategy) {
  std::string devices;
  for (const chorus::Device& device : strategy.devices()) {
    devices += (devices.empty() ? "" : ", ") + device.name();
  }
  std::cout << "Strategy: " << strategy.name() << ", replicas: " << strategy.num_replicas_in_sync()
            << " (local: " << devices
            << "), cross-device ops: " << strategy.cross_device_ops().name();
  if (const auto* mwms = dynamic_cast<const chorus::MultiWorkerMirroredStrategy*>(&strategy);
      mwms != nullptr && mwms->num_workers() > 1) {
    std::cout << ", worker " << mwms->worker_id() << " of " << mwms->num_workers()
              << ", collective: " << mwms->collective().name;
  }
  std::cout << "\n";
  // What drives the devices, as their plugin says (a PJRT plugin, its process in the job).
  if (!strategy.devices().empty()) {
    const std::string& about = strategy.devices().front().enumerator->description();
    if (!about.empty()) std::cout << "Devices: " << about << "\n";
  }
}

void PrintEpoch(const fashion_mnist::EpochResult& e) {
  std::printf("Epoch %d, Loss: %.4f, Accuracy: %.2f, Test Loss: %.4f, Test Accuracy: %.2f\n",
              e.epoch, e.train_loss, e.train_accuracy, e.test.loss, e.test.accuracy);
  if (!e.checkpoint.empty()) std::printf("Saved checkpoint %s\n", e.checkpoint.c_str());
  std::fflush(stdout);
}

fashion_mnist::TrainerOptions OptionsFrom(const Flags& flags) {
  fashion_mnist::TrainerOptions options;
  options.global_batch_size = flags.global_batch > 0 ? flags.global_batch : 64;
  options.epochs = flags.epochs;
  options.max_steps = flags.steps;
  options.seed = flags.seed;
  options.checkpoint_dir = flags.checkpoint_dir;
  // The default directory is scratch space: a new run takes it over (with a warning), unless it
  // resumes from it.
  options.take_over_checkpoint_dir =
      flags.checkpoint_dir_takeover || (!flags.checkpoint_dir_given && !flags.resume);
  options.resume = flags.resume;
  return options;
}

// The parameter-server chief: the tutorial's loop with the training steps on the workers.
void FitWithParameterServers(const Flags& flags, const TrainAndTest& data) {
#ifdef CHORUS_FASHION_MNIST_WITH_PARAMETER_SERVER
  if (!flags.save_weights.empty() || flags.replicas > 0 || !flags.cross_device_ops.empty() ||
      flags.devices != "cpu") {
    Fail(
        "--save-weights, --replicas, --devices and --cross-device-ops do not apply to --strategy "
        "parameter_server");
  }
  const fashion_mnist::TrainerOptions options = OptionsFrom(flags);
  std::cout << "Global batch: " << options.global_batch_size
            << " (one worker's step), epochs: " << flags.epochs << ", Adam lr "
            << options.learning_rate << ", checkpoints in " << flags.checkpoint_dir << "\n";
  const auto start = std::chrono::steady_clock::now();
  int64_t steps = 0;
  for (const auto& result : fashion_mnist::FitWithParameterServers(data, options, PrintEpoch)) {
    steps += result.steps;
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  std::printf("Trained %lld steps in %.1f s (%.2f ms/step, evaluation included)\n",
              static_cast<long long>(steps), elapsed.count(),
              steps > 0 ? 1000.0 * elapsed.count() / static_cast<double>(steps) : 0.0);
#else
  (void)flags;
  (void)data;
  Fail(
      "this fashion_mnist was built without gRPC, so without --strategy parameter_server; "
      "install libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc and "
      "rebuild");
#endif
}

void RestoreIntoAModelWithNoStrategy(const Flags& flags, const TrainAndTest& data);
void RestoreFitModelWithNoStrategy(const Flags& flags, const TrainAndTest& data,
                                   int64_t batch_size);
fashion_mnist::Evaluation EvaluateFitCheckpoint(const Flags& flags, const std::string& path,
                                                const fashion_mnist::ImageSet& test,
                                                int64_t batch_size);

// TPUStrategy's compiled step: softmax regression as one StableHLO program per dispatch.
void RunCompiledStep(const Flags& flags, const TrainAndTest& data, chorus::TPUStrategy& strategy) {
  if (flags.model_given || flags.global_batch != 0 || !flags.backup_dir.empty() ||
      !flags.save_weights.empty()) {
    Fail(
        "--loop compiled trains the softmax regression of softmax_regression_step.mlir (16 "
        "examples per replica); drop --model, --global-batch, --backup-dir and --save-weights");
  }
  fashion_mnist::CompiledStepOptions options;
  options.epochs = flags.epochs;
  options.steps_per_execution = flags.steps_per_execution;
  options.max_steps = flags.steps;
  options.seed = flags.seed;
  std::printf(
      "Loop: compiled step (softmax regression in StableHLO, SGD lr %.2f), global batch %lld, "
      "%d steps per execution\n",
      fashion_mnist::kCompiledStepLearningRate,
      static_cast<long long>(fashion_mnist::kCompiledStepReplicaBatch *
                             strategy.num_replicas_in_sync()),
      options.steps_per_execution);
  fashion_mnist::TrainSoftmaxRegressionCompiled(
      strategy, data, options, [](const fashion_mnist::CompiledStepEpoch& e) {
        std::printf(
            "Epoch %d, Loss: %.4f, Test Accuracy: %.2f (%lld steps in %.1f s, %.2f ms/step)\n",
            e.epoch, e.train_loss, e.test_accuracy, static_cast<long long>(e.steps), e.seconds,
            e.steps > 0 ? 1000.0 * e.seconds / static_cast<double>(e.steps) : 0.0);
        std::fflush(stdout);
      });
}

// The tutorial's custom training loop (trainer.h): the MLP, Adam, a checkpoint every 2 epochs.
void RunCustomLoop(const Flags& flags, const TrainAndTest& data, chorus::Strategy& strategy) {
  if (flags.model != "mlp") {
    Fail("--loop custom trains the MLP of model.h only; add --model mlp, or use --loop fit");
  }
  if (!flags.backup_dir.empty()) Fail("--backup-dir applies to --loop fit");
  const fashion_mnist::TrainerOptions options = OptionsFrom(flags);
  std::cout << "Loop: the tutorial's custom loop; global batch: " << options.global_batch_size
            << " ("
            << (options.global_batch_size + strategy.num_replicas_in_sync() - 1) /
                   strategy.num_replicas_in_sync()
            << " per replica), epochs: " << flags.epochs << ", Adam lr " << options.learning_rate
            << ", checkpoints in " << flags.checkpoint_dir << "\n";

  fashion_mnist::Trainer trainer(strategy, options);
  const auto start = std::chrono::steady_clock::now();
  trainer.Fit(data.train, data.test, PrintEpoch);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  std::printf("Trained %lld steps in %.1f s (%.2f ms/step, evaluation included)\n",
              static_cast<long long>(trainer.steps()), elapsed.count(),
              trainer.steps() > 0 ? 1000.0 * elapsed.count() / trainer.steps() : 0.0);

  if (!strategy.should_checkpoint()) {
    std::cout << "This worker is not the leader: the leader writes the weights and checkpoints, "
                 "and evaluates the restored model.\n";
    return;
  }
  if (!flags.save_weights.empty()) {
    const size_t bytes = fashion_mnist::WriteWeights(flags.save_weights, trainer.Weights());
    std::cout << "Wrote " << bytes << " bytes of weights to " << flags.save_weights
              << " (raw little-endian f32: kernel1 [784,128], bias1 [128], kernel2 [128,10], "
                 "bias2 [10])\n";
  }
  RestoreIntoAModelWithNoStrategy(flags, data);
}

chorus::ProgressBar::Mode ProgressMode(const std::string& name) {
  if (name == "auto") return chorus::ProgressBar::Mode::kAuto;
  if (name == "bar") return chorus::ProgressBar::Mode::kBar;
  if (name == "lines") return chorus::ProgressBar::Mode::kLines;
  Fail("unknown --progress '" + name + "'; valid: auto, bar, lines, none");
}

// The training steps' time over a fit, for the closing line.
struct TrainingTotals {
  double seconds = 0;
  int64_t steps = 0;
  void Print(int64_t batch_size) const {
    if (steps == 0 || seconds <= 0) return;
    std::printf("Trained %lld steps: %.2f ms/step, %.0f images/s (training steps only)\n",
                static_cast<long long>(steps), 1000.0 * seconds / static_cast<double>(steps),
                static_cast<double>(steps * batch_size) / seconds);
  }
};

// The chief prints the tutorial's line after every epoch (with the epoch's time and training
// images per second).
chorus::EpochEndCallback TutorialLine(int64_t batch_size, TrainingTotals& totals) {
  return chorus::EpochEndCallback([batch_size, &totals](chorus::FitState& state,
                                                        const chorus::EpochLogs& logs) {
    totals.seconds += logs.train_seconds;
    totals.steps += logs.steps;
    if (!state.chief) return;
    std::printf(
        "Epoch %d, Loss: %.4f, Accuracy: %.2f, Test Loss: %.4f, Test Accuracy: %.2f  (%.1f s, "
        "%.0f images/s)\n",
        logs.epoch + 1, logs.loss, 100 * logs.accuracy, logs.val_loss.value_or(0.0),
        100 * logs.val_accuracy.value_or(0.0), logs.seconds,
        logs.train_seconds > 0 ? static_cast<double>(logs.steps * batch_size) / logs.train_seconds
                               : 0.0);
    std::fflush(stdout);
  });
}

// The callbacks both fit loops use: the progress (--progress), a checkpoint per epoch in
// `manager`'s directory, and the tutorial's line.
struct ExampleCallbacks {
  ExampleCallbacks(const Flags& flags, int64_t batch_size, chorus::CheckpointManager& manager)
      : checkpoints(manager), tutorial_line(TutorialLine(batch_size, totals)) {
    if (flags.progress != "none") progress.emplace(ProgressMode(flags.progress));
  }
  void AppendTo(std::vector<chorus::Callback*>& callbacks) {
    if (progress) callbacks.push_back(&*progress);
    callbacks.push_back(&checkpoints);
    callbacks.push_back(&tutorial_line);
  }
  ExampleCallbacks(const ExampleCallbacks&) = delete;  // tutorial_line refers to totals

  TrainingTotals totals;
  std::optional<chorus::ProgressBar> progress;
  chorus::ModelCheckpoint checkpoints;
  chorus::EpochEndCallback tutorial_line;
};

// Keras' model.fit under the strategy: the tutorial's per-epoch line on the chief, a checkpoint
// after every epoch, BackupAndRestore with --backup-dir.
void RunFitLoop(const Flags& flags, const TrainAndTest& data, chorus::Strategy& strategy) {
  const int64_t batch_size =
      flags.global_batch > 0 ? flags.global_batch : 16 * strategy.num_replicas_in_sync();
  std::unique_ptr<fashion_mnist::FitModel> model;
  {
    const auto scope = strategy.scope();
    fashion_mnist::FitModelConfig config;
    config.seed = flags.seed;
    model = fashion_mnist::CreateFitModel(flags.model, config);
  }
  chorus::Adam adam(1e-3f);
  std::cout << "Loop: fit; model: " << flags.model << ", global batch: " << batch_size << " ("
            << (batch_size + strategy.num_replicas_in_sync() - 1) / strategy.num_replicas_in_sync()
            << " per replica), epochs: " << flags.epochs << ", Adam lr 0.001, checkpoints in "
            << flags.checkpoint_dir << "\n";

  std::vector<chorus::Callback*> callbacks;
  std::optional<chorus::BackupAndRestore> backup;
  if (!flags.backup_dir.empty()) {
    chorus::BackupOptions backup_options;
    backup_options.take_over = flags.backup_dir_takeover;
    backup_options.take_over_hint = "--backup-dir-takeover";
    backup.emplace(flags.backup_dir, backup_options);
    callbacks.push_back(&*backup);
  }
  // Every worker makes the manager (the writer claims the directory for this job).
  chorus::CheckpointManager manager(
      flags.checkpoint_dir,
      chorus::JobIdentity::Of(flags.seed, model->trainable_variables(), &strategy), &strategy,
      fashion_mnist::CheckpointOptions(OptionsFrom(flags)));
  ExampleCallbacks example(flags, batch_size, manager);
  example.AppendTo(callbacks);

  const chorus::Dataset train = data.train.ToDataset();
  const chorus::Dataset test = data.test.ToDataset();
  chorus::FitOptions options;
  options.batch_size = batch_size;
  options.epochs = flags.epochs;
  options.seed = flags.seed;
  options.steps_per_epoch = flags.steps;
  options.validation_data = &test;
  options.callbacks = callbacks;
  options.gradient_shards = flags.gradient_shards;
  chorus::Fit(&strategy, *model, adam, train, options);
  example.totals.Print(batch_size);

  if (!strategy.should_checkpoint()) {
    std::cout << "This worker is not the leader: the leader writes the weights and checkpoints, "
                 "and evaluates the restored model.\n";
    return;
  }
  if (!flags.save_weights.empty()) {
    std::vector<float> weights;
    {
      const auto scope = strategy.scope();
      for (const chorus::Variable& variable : model->trainable_variables()) {
        const std::vector<float> values = variable.value().ToVector();
        weights.insert(weights.end(), values.begin(), values.end());
      }
    }
    const size_t bytes = fashion_mnist::WriteFloats(flags.save_weights, weights);
    std::cout << "Wrote " << bytes << " bytes of weights to " << flags.save_weights
              << " (raw little-endian f32, the variables in order)\n";
  }
  RestoreFitModelWithNoStrategy(flags, data, batch_size);
}

#ifdef CHORUS_FASHION_MNIST_WITH_PARAMETER_SERVER
// The name the job's roles register the model under for FitWithParameterServers.
std::string ParameterServerModelName(const Flags& flags) { return "fashion_mnist/" + flags.model; }

int64_t ParameterServerBatch(const Flags& flags) {
  return flags.global_batch > 0 ? flags.global_batch : 64;
}

// Every role of a parameter-server job with --loop fit: the model and each worker's data.
void RegisterParameterServerFitModel(const Flags& flags,
                                     const std::function<TrainAndTest()>& load) {
  if (flags.loop != "fit") return;
  const std::string model = flags.model;
  const uint64_t seed = flags.seed;
  const int64_t batch = ParameterServerBatch(flags);
  chorus::RegisterFitModel(
      ParameterServerModelName(flags),
      [model, seed] {
        fashion_mnist::FitModelConfig config;
        config.seed = seed;
        return std::unique_ptr<chorus::TrainableModel>(
            fashion_mnist::CreateFitModel(model, config));
      },
      [load, seed, batch](const chorus::InputContext& input) {
        return load()
            .train.ToDataset()
            .Shard(input.num_input_pipelines(), input.input_pipeline_id())
            .Shuffle(seed + static_cast<uint64_t>(input.input_pipeline_id()))
            .Batch(batch, true);
      });
}

// The chief with --loop fit: chorus::FitWithParameterServers schedules each step on a worker.
void RunFitWithParameterServers(const Flags& flags, const TrainAndTest& data) {
  if (flags.resume) {
    Fail(
        "--resume applies to --loop custom under parameter servers (its checkpoints hold the ps "
        "tasks' optimizer state; --loop fit saves the weights)");
  }
  if (!flags.backup_dir.empty()) {
    Fail(
        "--backup-dir does not apply to --strategy parameter_server: the optimizer's state lives "
        "on the ps tasks (use --loop custom and --resume)");
  }
  const int64_t batch_size = ParameterServerBatch(flags);
  chorus::ParameterServerStrategy strategy(
      nullptr, std::make_shared<chorus::partitioners::MinSizePartitioner>(256 << 10, 2));
  strategy.set_optimizer(chorus::ServerOptimizer::Adam(1e-3f));
  chorus::ClusterCoordinator coordinator(strategy);
  std::printf(
      "Strategy: ParameterServerStrategy, %d workers, %d ps tasks, variables split by "
      "MinSizePartitioner(256 KiB, at most 2 shards), Adam 0.001 on the ps tasks\n"
      "Loop: fit (FitWithParameterServers); model: %s, batch: %lld per step (one worker's)\n",
      strategy.num_workers(), strategy.num_ps(), flags.model.c_str(),
      static_cast<long long>(batch_size));

  // The chief alone writes: a manager of no strategy, for the model's identity on this cluster.
  fashion_mnist::FitModelConfig config;
  config.seed = flags.seed;
  chorus::CheckpointManager manager(
      flags.checkpoint_dir,
      chorus::JobIdentity{
          flags.seed,
          chorus::ModelSignature(
              fashion_mnist::CreateFitModel(flags.model, config)->trainable_variables()),
          fashion_mnist::ParameterServerCluster(strategy)},
      nullptr, fashion_mnist::CheckpointOptions(OptionsFrom(flags)));
  std::vector<chorus::Callback*> callbacks;
  ExampleCallbacks example(flags, batch_size, manager);
  example.AppendTo(callbacks);

  const chorus::Dataset test = data.test.ToDataset();
  chorus::ParameterServerFitOptions options;
  options.epochs = flags.epochs;
  options.steps_per_epoch = flags.steps > 0 ? flags.steps : data.train.size() / batch_size;
  options.validation_data = &test;
  options.validation_batch_size = batch_size;
  options.callbacks = callbacks;
  chorus::FitWithParameterServers(coordinator, ParameterServerModelName(flags), options);
  example.totals.Print(batch_size);
}
#endif

int Run(const Flags& flags) {
  if (flags.global_batch < 0) Fail("--global-batch must be positive (or 0: 16 per replica)");
  if (flags.epochs <= 0) Fail("--epochs must be positive");
  if (flags.loop != "fit" && flags.loop != "custom" && flags.loop != "compiled") {
    Fail("unknown --loop '" + flags.loop + "'; valid: fit, custom, compiled");
  }
  if (flags.loop == "compiled" && flags.strategy != "tpu") {
    Fail("--loop compiled runs a StableHLO step on the TPU system's devices; add --strategy tpu");
  }
  if (flags.gradient_shards != 0 && (flags.loop != "fit" || flags.strategy == "parameter_server")) {
    Fail(
        "--gradient-shards is an option of chorus::Fit (--loop fit) under the synchronous "
        "strategies; drop it here");
  }
  const TrainAndTest data = LoadData(flags);
  std::cout << "Data: " << data.source << "; using " << data.train.size() << " train and "
            << data.test.size() << " test images\n";
  if (data.train.size() == 0 || data.test.size() == 0) Fail("the train or test set is empty");
  if (flags.resume && flags.strategy != "parameter_server") {
    Fail("--resume applies to --strategy parameter_server only");
  }
  if (flags.strategy == "parameter_server") {
#ifdef CHORUS_FASHION_MNIST_WITH_PARAMETER_SERVER
    if (flags.loop == "fit") {
      RunFitWithParameterServers(flags, data);
      RestoreFitModelWithNoStrategy(flags, data, ParameterServerBatch(flags));
      return 0;
    }
#endif
    if (flags.model_given && flags.model != "mlp") {
      Fail(
          "--strategy parameter_server --loop custom trains the MLP (its workers run model.h's "
          "step); use --model mlp, or --loop fit");
    }
    std::cout << "Model: mlp, the tutorial's custom loop on the parameter-server workers\n";
    FitWithParameterServers(flags, data);
    RestoreIntoAModelWithNoStrategy(flags, data);
    return 0;
  }

  const std::unique_ptr<chorus::Strategy> strategy = MakeStrategy(flags);
  PrintStrategy(*strategy);
  if (flags.loop == "custom") {
    RunCustomLoop(flags, data, *strategy);
  } else if (flags.loop == "compiled") {
    RunCompiledStep(flags, data, dynamic_cast<chorus::TPUStrategy&>(*strategy));
  } else {
    RunFitLoop(flags, data, *strategy);
  }
  return 0;
}

// As the tutorial: a new model, no strategy, restored from the latest checkpoint.
void RestoreIntoAModelWithNoStrategy(const Flags& flags, const TrainAndTest& data) {
  const std::string latest = chorus::LatestCheckpoint(flags.checkpoint_dir);
  if (latest.empty()) Fail("no checkpoint was recorded in '" + flags.checkpoint_dir + "'");
  fashion_mnist::ModelConfig config;
  config.seed = flags.seed + 1;  // different initial weights: the restore must replace them
  const fashion_mnist::Model restored(config);
  chorus::Checkpoint checkpoint;
  fashion_mnist::TrackModel(checkpoint, restored);
  checkpoint.Restore(latest);
  const fashion_mnist::Evaluation e = fashion_mnist::EvaluateWithoutStrategy(
      restored, data.test, flags.global_batch > 0 ? flags.global_batch : 64);
  std::printf("Restored %s into a model with no strategy: Test Loss: %.4f, Test Accuracy: %.2f\n",
              latest.c_str(), e.loss, e.accuracy);
}

fashion_mnist::Evaluation EvaluateFitCheckpoint(const Flags& flags, const std::string& path,
                                                const fashion_mnist::ImageSet& test,
                                                int64_t batch_size) {
  fashion_mnist::FitModelConfig config;
  config.seed = flags.seed + 1;  // different initial weights: the restore must replace them
  const std::unique_ptr<fashion_mnist::FitModel> model =
      fashion_mnist::CreateFitModel(flags.model, config);
  chorus::Checkpoint checkpoint;
  model->Track(checkpoint);
  checkpoint.Restore(path);
  const chorus::Evaluation e = chorus::Evaluate(nullptr, *model, test.ToDataset(), batch_size);
  fashion_mnist::Evaluation out;
  out.loss = e.loss;
  out.accuracy = 100 * e.accuracy;
  out.examples = e.examples;
  return out;
}

void RestoreFitModelWithNoStrategy(const Flags& flags, const TrainAndTest& data,
                                   int64_t batch_size) {
  const std::string latest = chorus::LatestCheckpoint(flags.checkpoint_dir);
  if (latest.empty()) Fail("no checkpoint was recorded in '" + flags.checkpoint_dir + "'");
  const fashion_mnist::Evaluation e = EvaluateFitCheckpoint(flags, latest, data.test, batch_size);
  std::printf("Restored %s into a model with no strategy: Test Loss: %.4f, Test Accuracy: %.2f\n",
              latest.c_str(), e.loss, e.accuracy);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The tutorial's Fashion-MNIST classifier trained under a chorus strategy"};
  Flags flags;
  app.add_option("--data-dir", flags.data_dir,
                 "directory with train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], "
                 "t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz] (default: " +
                     std::string(kDebianDataDir) + ", Debian's dataset-fashion-mnist)");
  app.add_flag("--synthetic", flags.synthetic,
               "train on generated data of Fashion-MNIST's shapes instead (for tests)");
  app.add_option("--model", flags.model,
                 "cnn (the tutorial's, oneDNN), mlp (dense 128, hand-written) or noop (the "
                 "CNN's variables, no arithmetic: what the strategy costs per step)")
      ->capture_default_str();
  app.add_option("--loop", flags.loop,
                 "fit (chorus::Fit, Keras' model.fit), custom (the tutorial's custom loop, "
                 "mlp only) or compiled (--strategy tpu: softmax regression as one StableHLO "
                 "program per dispatch)")
      ->capture_default_str();
  app.add_option("--progress", flags.progress,
                 "auto (a bar on a terminal, lines otherwise), bar, lines or none")
      ->capture_default_str();
  app.add_option("--backup-dir", flags.backup_dir,
                 "BackupAndRestore: back up after every epoch here, and resume from it when a "
                 "restarted job finds a backup. The directory is this job's (its seed, model "
                 "and cluster): another job's is refused (see --backup-dir-takeover)");
  app.add_flag("--backup-dir-takeover", flags.backup_dir_takeover,
               "use --backup-dir even though another job (another seed, model or cluster) owns "
               "it: this job becomes its owner and resumes from the backup there");
  app.add_option("--strategy", flags.strategy,
                 "one_device, mirrored, central_storage, multi_worker_mirrored, "
                 "parameter_server (these two under chorus-launch or TF_CONFIG) or tpu (the "
                 "devices of the PJRT plugin CHORUS_PJRT_PLUGIN names)")
      ->capture_default_str();
  app.add_option("--replicas", flags.replicas,
                 "virtual cpu devices (replicas); 0 = the default devices (CHORUS_CPU_DEVICES)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--devices", flags.devices,
                 "the replicas' devices under one_device, mirrored, central_storage and "
                 "multi_worker_mirrored: cpu (--replicas), or pjrt (the devices of the PJRT "
                 "plugin CHORUS_PJRT_PLUGIN names, as --strategy tpu uses them)")
      ->capture_default_str();
  app.add_option("--tpu", flags.tpu,
                 "--strategy tpu's TPU system: local, or grpc://host:port,... (default: "
                 "TPU_WORKER_HOSTNAMES with TPU_WORKER_ID, TPU_NAME or "
                 "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS when set, else local)");
  app.add_option("--cross-device-ops", flags.cross_device_ops,
                 "MirroredStrategy's cross-device ops (default: CHORUS_CROSS_DEVICE_OPS, else "
                 "the default rule)");
  app.add_option("--global-batch", flags.global_batch,
                 "global batch size; 0: 16 per replica with --loop fit (the tutorial's), 64 "
                 "otherwise")
      ->capture_default_str();
  app.add_option("--gradient-shards", flags.gradient_shards,
                 "--loop fit: compute each global batch's gradient as N shards summed pairwise "
                 "(chorus::FitOptions::gradient_shards), so that OneDevice, Mirrored and "
                 "MultiWorkerMirrored over 2 workers train to the same bits; 0: off")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--epochs", flags.epochs, "epochs")->capture_default_str();
  app.add_option("--steps-per-execution", flags.steps_per_execution,
                 "--loop compiled: training steps per dispatch of the program")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--steps", flags.steps,
                 "--loop fit: steps per epoch; custom and parameter_server: stop after this "
                 "many steps in all; 0 = no limit")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--seed", flags.seed, "seed of the model, the shuffle and synthetic data")
      ->capture_default_str();
  app.add_option("--train-examples", flags.train_examples, "use the first N train images; 0 = all")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--test-examples", flags.test_examples, "use the first N test images; 0 = all")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--save-weights", flags.save_weights,
                 "write the final weights (the model's variables in order) as raw "
                 "little-endian f32 to this file");
  app.add_flag("--resume", flags.resume,
               "--strategy parameter_server: start from the latest whole checkpoint in "
               "--checkpoint-dir, at its step (after a ps failure, restart the job with it); a "
               "damaged or missing latest checkpoint falls back to the newest whole one, with a "
               "warning");
  app.add_option("--checkpoint-dir", flags.checkpoint_dir,
                 "where ckpt-<epoch> files and their index 'checkpoint' go. The directory is "
                 "this job's (its seed, model and cluster): another job's is refused (see "
                 "--checkpoint-dir-takeover), except the default, which a new run without "
                 "--resume takes over")
      ->capture_default_str();
  app.add_flag("--checkpoint-dir-takeover", flags.checkpoint_dir_takeover,
               "use --checkpoint-dir even though another job (another seed, model or cluster) "
               "owns it: this job becomes its owner, overwrites its ckpt-N and resumes from "
               "them");
  CLI11_PARSE(app, argc, argv);
  flags.model_given = app.count("--model") > 0;
  flags.checkpoint_dir_given = app.count("--checkpoint-dir") > 0;
  try {
#ifdef CHORUS_FASHION_MNIST_WITH_PARAMETER_SERVER
    // A parameter-server job's evaluator follows the chief's checkpoints.
    if (flags.strategy == "parameter_server") {
      const auto resolver = chorus::ResolveClusterFromEnvironment();
      if (resolver != nullptr && resolver->task_type() == "evaluator") {
        fashion_mnist::SidecarOptions options;
        options.checkpoint_dir = flags.checkpoint_dir;
        options.batch_size = flags.global_batch > 0 ? flags.global_batch : 64;
        options.final_epoch = flags.epochs;
        if (flags.loop == "fit") {
          options.evaluate = [&flags](const std::string& path,
                                      const fashion_mnist::ImageSet& test) {
            return EvaluateFitCheckpoint(flags, path, test, ParameterServerBatch(flags));
          };
        }
        fashion_mnist::RunSidecarEvaluator(LoadData(flags).test, options);
        return 0;
      }
    }
    // Its worker and ps tasks run this same program too: they serve here.
    if (flags.strategy == "parameter_server") {
      RegisterParameterServerFitModel(flags, [&flags] { return LoadData(flags); });
    }
    if (flags.strategy == "parameter_server" &&
        fashion_mnist::ServeParameterServerTasks([&flags] { return LoadData(flags).train; },
                                                 OptionsFrom(flags))) {
      return 0;
    }
#endif
    return Run(flags);
  } catch (const chorus::Error& e) {
    std::cerr << "fashion_mnist: error (" << chorus::StatusName(e.status()) << "): " << e.what()
              << "\n";
  } catch (const std::exception& e) {
    std::cerr << "fashion_mnist: error: " << e.what() << "\n";
  }
  return 1;
}
