// Every worker and ps task of the parameter-server tests: the functions the tests schedule,
// registered by name, then the server. (The chief is the test process itself, but for the chief
// that exits mid-training.)
#include <chorus/parameter_server/cluster_coordinator.h>
#include <chorus/parameter_server/functions.h>
#include <chorus/runtime/registry.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "fit_model.h"
#include "regression_problem.h"

namespace {

using chorus::FunctionContext;
using chorus::Tensor;

chorus::Device Host() { return {chorus::Registry::Global().CpuDevices(), 0}; }

// One SGD step of the regression on the worker's next batch; returns the batch's loss before it.
std::vector<Tensor> RegressionStep(FunctionContext& context, const std::vector<Tensor>& args) {
  const chorus::HostBatch batch = context.next_batch();
  const chorus::ShardedVariable w_variable = context.variable("w");
  const std::vector<float> w = w_variable.read().ToVector();
  const size_t features = static_cast<size_t>(chorus::test::kFeatures);
  const size_t stride = features + 1;
  std::vector<float> gradient(features, 0.0f);
  double loss = 0;
  for (int64_t n = 0; n < batch.size; ++n) {
    const float* row = batch.features.data() + static_cast<size_t>(n) * stride;
    float error = -row[features];
    for (size_t i = 0; i < features; ++i) error += row[i] * w[i];
    loss += 0.5 * error * error;
    for (size_t i = 0; i < features; ++i)
      gradient[i] += error * row[i] / static_cast<float>(batch.size);
  }
  chorus::ApplyGradients(
      {{Tensor::FromVector(Host(), {chorus::test::kFeatures}, gradient), w_variable}});
  if (!args.empty()) {  // a pause, in ms, so that a test can kill a task mid-training
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(args[0].ToVector()[0])));
  }
  return {Tensor::FromVector(Host(), {1},
                             {static_cast<float>(loss / static_cast<double>(batch.size))})};
}

void RegisterTestFunctions() {
  chorus::RegisterFunction(
      "empty", [](FunctionContext&, const std::vector<Tensor>&) { return std::vector<Tensor>{}; });
  chorus::RegisterFunction(
      "add_one", [](FunctionContext& context, const std::vector<Tensor>& args) {
        std::vector<float> values = args.at(0).ToVector();
        for (float& v : values) v += 1.0f;
        return std::vector<Tensor>{
            Tensor::FromVector(Host(), args[0].shape(), values),
            Tensor::FromVector(Host(), {1}, {static_cast<float>(context.worker_index())})};
      });
  chorus::RegisterFunction("throw",
                           [](FunctionContext&, const std::vector<Tensor>&) -> std::vector<Tensor> {
                             throw std::runtime_error("deliberate failure in 'throw'");
                           });
  chorus::RegisterFunction("sleep", [](FunctionContext&, const std::vector<Tensor>& args) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(static_cast<int>(args.at(0).ToVector().at(0))));
    return std::vector<Tensor>{};
  });
  chorus::RegisterFunction("regression_step", RegressionStep);
  chorus::RegisterDatasetFunction("regression", [](const chorus::InputContext& input) {
    return chorus::test::RegressionDataset()
        .Shard(input.num_input_pipelines(), input.input_pipeline_id())
        .Shuffle(static_cast<uint64_t>(input.input_pipeline_id()) + 1)
        .Batch(chorus::test::kBatch, true);
  });
}

// As the chief (CHORUS_PS_TEST_CHIEF=exit_while_functions_run): trains, reading the variables
// as it goes, while another thread calls exit() as a SIGTERM handler that exits would.
[[noreturn]] void ExitWhileFunctionsRun() {
  chorus::ParameterServerStrategy strategy;
  strategy.set_optimizer(chorus::ServerOptimizer::SGD(0.01f));
  chorus::CoordinatorOptions options;
  options.functions_per_worker = 4;  // more results arriving while the process exits
  chorus::ClusterCoordinator coordinator(strategy, options);
  chorus::ShardedVariable w;
  {
    auto scope = strategy.scope();
    w = chorus::ShardedVariable::Create(chorus::VariableSpec{"w"},
                                        Tensor(Host(), CHORUS_F32, {chorus::test::kFeatures}));
  }
  const chorus::PerWorkerDataset dataset = coordinator.create_per_worker_dataset("regression");
  std::thread exiting([&coordinator] {
    while (coordinator.completed() < 50) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::exit(3);
  });
  // Made before: this program's Host() asks the registry, which exit() destroys.
  const Tensor args = Tensor::FromVector(Host(), {4}, {1.0f, 2.0f, 3.0f, 4.0f});
  try {
    while (true) {
      coordinator.schedule("regression_step", dataset.iterator());
      coordinator.schedule("add_one", {args});
      w.read();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ps_test_task: the chief's loop failed while exiting: %s\n", e.what());
    std::_Exit(4);
  }
}

}  // namespace

int main() {
  try {
    RegisterTestFunctions();
    chorus::test::RegisterFitModelForTests();
    if (chorus::ServeIfServerTask()) return 0;
    const char* chief = std::getenv("CHORUS_PS_TEST_CHIEF");
    if (chief != nullptr && std::string(chief) == "exit_while_functions_run") {
      ExitWhileFunctionsRun();
    }
    std::fprintf(stderr, "ps_test_task: TF_CONFIG does not make this a worker or ps task\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ps_test_task: %s\n", e.what());
    return 1;
  }
}
