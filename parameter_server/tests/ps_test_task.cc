// Every worker and ps task of the parameter-server tests: the functions the tests schedule,
// registered by name, then the server. (The chief is the test process itself.)
#include <chorus/parameter_server/functions.h>
#include <chorus/runtime/registry.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
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

}  // namespace

int main() {
  try {
    RegisterTestFunctions();
    chorus::test::RegisterFitModelForTests();
    if (chorus::ServeIfServerTask()) return 0;
    std::fprintf(stderr, "ps_test_task: TF_CONFIG does not make this a worker or ps task\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ps_test_task: %s\n", e.what());
    return 1;
  }
}
