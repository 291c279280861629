// TensorFlow's "Custom training with tf.distribute.Strategy" tutorial in C++: a Fashion-MNIST
// classifier trained with a custom loop under OneDevice, Mirrored or CentralStorage strategy,
// checkpointed every 2 epochs, and finally restored into a model with no strategy.
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_resolver.h>
#include <chorus/distribute/multi_worker_mirrored_strategy.h>
#include <chorus/distribute/strategies.h>
#include <chorus/runtime/registry.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fashion_mnist_files.h"
#include "synthetic_data.h"
#include "trainer.h"
#ifdef CHORUS_FASHION_MNIST_WITH_PARAMETER_SERVER
#include "parameter_server_training.h"
#include "sidecar_evaluator.h"
#endif

namespace {

using fashion_mnist::TrainAndTest;

const std::vector<std::string> kStrategies = {"one_device", "mirrored", "central_storage",
                                              "multi_worker_mirrored", "parameter_server"};

struct Flags {
  std::string data_dir;
  std::string strategy = "mirrored";
  int replicas = 0;
  std::string cross_device_ops;
  int64_t global_batch = 64;
  int epochs = 10;
  int64_t steps = 0;
  uint64_t seed = 1;
  int64_t train_examples = 0;
  int64_t test_examples = 0;
  std::string save_weights;
  std::string checkpoint_dir = "/tmp/chorus_fashion_mnist_ckpt";
  bool resume = false;
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
  std::optional<TrainAndTest> data;
  if (!flags.data_dir.empty()) data = fashion_mnist::LoadFashionMnist(flags.data_dir);
  if (data) {
    data->train = data->train.Take(flags.train_examples > 0 ? flags.train_examples : -1);
    data->test = data->test.Take(flags.test_examples > 0 ? flags.test_examples : -1);
    return *data;
  }
  if (flags.data_dir.empty()) {
    std::cout << "No --data-dir given: using SYNTHETIC data, not Fashion-MNIST.\n";
  } else {
    std::cout << "No Fashion-MNIST files in '" << flags.data_dir
              << "': using SYNTHETIC data, not Fashion-MNIST.\n";
  }
  return fashion_mnist::GenerateSyntheticData(
      flags.seed,
      flags.train_examples > 0 ? flags.train_examples : fashion_mnist::kFashionMnistTrainSize,
      flags.test_examples > 0 ? flags.test_examples : fashion_mnist::kFashionMnistTestSize);
}

// --replicas virtual cpu devices, or the registry's default devices (CHORUS_CPU_DEVICES).
std::vector<chorus::Device> Devices(int replicas) {
  chorus::Registry& registry = chorus::Registry::Global();
  if (replicas <= 0) return registry.DefaultDevices();
  auto cpu = chorus::DeviceEnumerator::Create(registry.FindPlugin(chorus::kBuiltinPluginName),
                                              {{"count", std::to_string(replicas)}});
  std::vector<chorus::Device> devices;
  for (uint32_t i = 0; i < cpu->count(); ++i) devices.push_back({cpu, i});
  return devices;
}

std::unique_ptr<chorus::Strategy> MakeStrategy(const Flags& flags) {
  if (flags.strategy != "mirrored" && flags.strategy != "multi_worker_mirrored" &&
      !flags.cross_device_ops.empty()) {
    Fail("--cross-device-ops applies to --strategy mirrored and multi_worker_mirrored only, not " +
         flags.strategy);
  }
  if (flags.strategy == "one_device") {
    if (flags.replicas > 1) Fail("--strategy one_device has one replica; drop --replicas");
    return std::make_unique<chorus::OneDeviceStrategy>(Devices(flags.replicas).front());
  }
  if (flags.strategy == "mirrored") {
    return std::make_unique<chorus::MirroredStrategy>(Devices(flags.replicas),
                                                      flags.cross_device_ops);
  }
  if (flags.strategy == "multi_worker_mirrored") {
    // The cluster comes from TF_CONFIG (chorus-launch sets it), torchrun, Open MPI or Slurm.
    return std::make_unique<chorus::MultiWorkerMirroredStrategy>(
        nullptr, chorus::CommunicationOptions{}, Devices(flags.replicas), flags.cross_device_ops);
  }
  if (flags.strategy == "central_storage") {
    return std::make_unique<chorus::CentralStorageStrategy>(Devices(flags.replicas));
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
}

void PrintEpoch(const fashion_mnist::EpochResult& e) {
  std::printf("Epoch %d, Loss: %.4f, Accuracy: %.2f, Test Loss: %.4f, Test Accuracy: %.2f\n",
              e.epoch, e.train_loss, e.train_accuracy, e.test.loss, e.test.accuracy);
  if (!e.checkpoint.empty()) std::printf("Saved checkpoint %s\n", e.checkpoint.c_str());
  std::fflush(stdout);
}

fashion_mnist::TrainerOptions OptionsFrom(const Flags& flags) {
  fashion_mnist::TrainerOptions options;
  options.global_batch_size = flags.global_batch;
  options.epochs = flags.epochs;
  options.max_steps = flags.steps;
  options.seed = flags.seed;
  options.checkpoint_dir = flags.checkpoint_dir;
  options.resume = flags.resume;
  return options;
}

// The parameter-server chief: the tutorial's loop with the training steps on the workers.
void FitWithParameterServers(const Flags& flags, const TrainAndTest& data) {
#ifdef CHORUS_FASHION_MNIST_WITH_PARAMETER_SERVER
  if (!flags.save_weights.empty() || flags.replicas > 0 || !flags.cross_device_ops.empty()) {
    Fail(
        "--save-weights, --replicas and --cross-device-ops do not apply to --strategy "
        "parameter_server");
  }
  const fashion_mnist::TrainerOptions options = OptionsFrom(flags);
  std::cout << "Global batch: " << flags.global_batch
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

int Run(const Flags& flags) {
  if (flags.global_batch <= 0) Fail("--global-batch must be positive");
  if (flags.epochs <= 0) Fail("--epochs must be positive");
  const TrainAndTest data = LoadData(flags);
  std::cout << "Data: " << data.source << "; using " << data.train.size() << " train and "
            << data.test.size() << " test images\n";
  if (data.train.size() == 0 || data.test.size() == 0) Fail("the train or test set is empty");
  if (flags.resume && flags.strategy != "parameter_server") {
    Fail("--resume applies to --strategy parameter_server only");
  }
  if (flags.strategy == "parameter_server") {
    FitWithParameterServers(flags, data);
    RestoreIntoAModelWithNoStrategy(flags, data);
    return 0;
  }

  const std::unique_ptr<chorus::Strategy> strategy = MakeStrategy(flags);
  PrintStrategy(*strategy);
  const fashion_mnist::TrainerOptions options = OptionsFrom(flags);
  std::cout << "Global batch: " << flags.global_batch << " ("
            << (flags.global_batch + strategy->num_replicas_in_sync() - 1) /
                   strategy->num_replicas_in_sync()
            << " per replica), epochs: " << flags.epochs << ", Adam lr " << options.learning_rate
            << ", checkpoints in " << flags.checkpoint_dir << "\n";

  fashion_mnist::Trainer trainer(*strategy, options);
  const auto start = std::chrono::steady_clock::now();
  trainer.Fit(data.train, data.test, PrintEpoch);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  std::printf("Trained %lld steps in %.1f s (%.2f ms/step, evaluation included)\n",
              static_cast<long long>(trainer.steps()), elapsed.count(),
              trainer.steps() > 0 ? 1000.0 * elapsed.count() / trainer.steps() : 0.0);

  if (!strategy->should_checkpoint()) {
    std::cout << "This worker is not the leader: the leader writes the weights and checkpoints, "
                 "and evaluates the restored model.\n";
    return 0;
  }
  if (!flags.save_weights.empty()) {
    const size_t bytes = fashion_mnist::WriteWeights(flags.save_weights, trainer.Weights());
    std::cout << "Wrote " << bytes << " bytes of weights to " << flags.save_weights
              << " (raw little-endian f32: kernel1 [784,128], bias1 [128], kernel2 [128,10], "
                 "bias2 [10])\n";
  }

  RestoreIntoAModelWithNoStrategy(flags, data);
  return 0;
}

// As the tutorial: a new model, no strategy, restored from the latest checkpoint.
void RestoreIntoAModelWithNoStrategy(const Flags& flags, const TrainAndTest& data) {
  const std::string latest = fashion_mnist::LatestCheckpoint(flags.checkpoint_dir);
  if (latest.empty()) Fail("no checkpoint was recorded in '" + flags.checkpoint_dir + "'");
  fashion_mnist::ModelConfig config;
  config.seed = flags.seed + 1;  // different initial weights: the restore must replace them
  const fashion_mnist::Model restored(config);
  chorus::Checkpoint checkpoint;
  fashion_mnist::TrackModel(checkpoint, restored);
  checkpoint.Restore(latest);
  const fashion_mnist::Evaluation e =
      fashion_mnist::EvaluateWithoutStrategy(restored, data.test, flags.global_batch);
  std::printf("Restored %s into a model with no strategy: Test Loss: %.4f, Test Accuracy: %.2f\n",
              latest.c_str(), e.loss, e.accuracy);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Custom training with a chorus strategy on Fashion-MNIST (or synthetic data)"};
  Flags flags;
  app.add_option("--data-dir", flags.data_dir,
                 "directory with train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], "
                 "t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz]; synthetic data "
                 "when absent");
  app.add_option("--strategy", flags.strategy,
                 "one_device, mirrored, central_storage, multi_worker_mirrored or "
                 "parameter_server (the last two under chorus-launch or TF_CONFIG)")
      ->capture_default_str();
  app.add_option("--replicas", flags.replicas,
                 "virtual cpu devices (replicas); 0 = the default devices (CHORUS_CPU_DEVICES)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--cross-device-ops", flags.cross_device_ops,
                 "MirroredStrategy's cross-device ops (default: CHORUS_CROSS_DEVICE_OPS, else "
                 "the default rule)");
  app.add_option("--global-batch", flags.global_batch, "global batch size")->capture_default_str();
  app.add_option("--epochs", flags.epochs, "epochs")->capture_default_str();
  app.add_option("--steps", flags.steps, "stop after this many training steps; 0 = no limit")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--seed", flags.seed, "seed of the model, the shuffle and synthetic data")
      ->capture_default_str();
  app.add_option("--train-examples", flags.train_examples, "use the first N train images; 0 = all")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--test-examples", flags.test_examples, "use the first N test images; 0 = all")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--save-weights", flags.save_weights,
                 "write the final weights (kernel1, bias1, kernel2, bias2) as raw little-endian "
                 "f32 to this file");
  app.add_flag("--resume", flags.resume,
               "--strategy parameter_server: start from the latest checkpoint in "
               "--checkpoint-dir, at its step (after a ps failure, restart the job with it)");
  app.add_option("--checkpoint-dir", flags.checkpoint_dir, "where ckpt-<epoch> files go")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
#ifdef CHORUS_FASHION_MNIST_WITH_PARAMETER_SERVER
    // A parameter-server job's evaluator follows the chief's checkpoints.
    if (flags.strategy == "parameter_server") {
      const auto resolver = chorus::ResolveClusterFromEnvironment();
      if (resolver != nullptr && resolver->task_type() == "evaluator") {
        fashion_mnist::SidecarOptions options;
        options.checkpoint_dir = flags.checkpoint_dir;
        options.batch_size = flags.global_batch;
        options.final_epoch = flags.epochs;
        fashion_mnist::RunSidecarEvaluator(LoadData(flags).test, options);
        return 0;
      }
    }
    // Its worker and ps tasks run this same program too: they serve here.
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
