#include <chorus/base/error.h>
#include <chorus/distribute/strategy.h>
#include <chorus/parameter_server/fit.h>
#include <chorus/training/metrics.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ps_internal.h"

namespace chorus {
namespace {

[[noreturn]] void Fail(const std::string& message) {
  throw Error(CHORUS_INVALID_ARGUMENT, "FitWithParameterServers: " + message);
}

std::string StepFunction(const std::string& model) { return "chorus.fit/" + model + "/step"; }
std::string DataFunction(const std::string& model) { return "chorus.fit/" + model + "/data"; }

// A registered model: its factory, and this process's copy (a worker's, built on first use).
struct RegisteredModel {
  ModelFactory factory;
  std::mutex mutex;
  std::unique_ptr<TrainableModel> model;
};

std::mutex g_models_mutex;
std::map<std::string, std::shared_ptr<RegisteredModel>>& Models() {
  // Never destroyed: a worker's step may still look its model up while the process exits.
  static auto* models = new std::map<std::string, std::shared_ptr<RegisteredModel>>();
  return *models;
}

std::shared_ptr<RegisteredModel> FindModel(const std::string& name) {
  const std::lock_guard<std::mutex> lock(g_models_mutex);
  const auto it = Models().find(name);
  if (it != Models().end()) return it->second;
  std::string known;
  for (const auto& [registered, entry] : Models())
    known += (known.empty() ? "" : ", ") + registered;
  throw Error(CHORUS_NOT_FOUND,
              "FitWithParameterServers: no model '" + name +
                  "' is registered (registered: " + (known.empty() ? "none" : known) +
                  "); call RegisterFitModel in every role at start-up");
}

Batch ToBatch(const HostBatch& host, const Device& device) {
  Batch batch;
  batch.size = host.size;
  batch.features = Tensor::FromVector(device, host.feature_shape, host.features);
  batch.labels = Tensor::Uninitialized(device, CHORUS_I32, {host.size});
  if (host.size > 0) batch.labels.CopyFromHost(host.labels.data());
  return batch;
}

// A worker's step: the ps tasks' weights into this process's model, its TrainStep on the next
// batch, the gradients to the ps tasks. Returns [loss, correct, examples].
std::vector<Tensor> RunStep(RegisteredModel& entry, FunctionContext& context) {
  const std::lock_guard<std::mutex> lock(entry.mutex);
  if (!entry.model) entry.model = entry.factory();
  TrainableModel& model = *entry.model;
  const std::vector<Variable> locals = model.trainable_variables();
  std::vector<ShardedVariable> remote;
  for (const Variable& local : locals) remote.push_back(context.variable(local.name()));
  const std::vector<Tensor> values = ReadVariables(remote);
  for (size_t i = 0; i < locals.size(); ++i) locals[i].assign(values[i]);

  const HostBatch host = context.next_batch();
  const double examples = static_cast<double>(host.size);
  const LossScale scale{examples > 0 ? 1.0 / examples : 0.0, 1.0};
  std::vector<Tensor> gradients;
  const StepOutputs out = model.TrainStep(
      ps_internal::HostDevice(), ToBatch(host, ps_internal::HostDevice()), scale, gradients);
  if (gradients.size() != locals.size()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "the model's TrainStep gave " +
                                             std::to_string(gradients.size()) + " gradients for " +
                                             std::to_string(locals.size()) + " variables");
  }
  std::vector<std::pair<Tensor, ShardedVariable>> pairs;
  for (size_t i = 0; i < locals.size(); ++i) pairs.emplace_back(gradients[i], remote[i]);
  ApplyGradients(pairs);

  double loss = out.regularization_loss;
  for (float l : out.per_example_loss) loss += scale.per_example * l;
  return {Tensor::FromVector(
      ps_internal::HostDevice(), {3},
      {static_cast<float>(loss),
       static_cast<float>(
           out.logits.empty() ? 0 : CountCorrect(host.labels, out.logits, out.num_classes)),
       static_cast<float>(examples)})};
}

// The model's variables on the ps tasks: those of these names the strategy has, else new ones.
std::vector<ShardedVariable> RemoteVariables(ParameterServerStrategy& strategy,
                                             const std::vector<Variable>& locals) {
  std::map<std::string, ShardedVariable> existing;
  for (const ShardedVariable& variable : strategy.variables()) existing[variable.name()] = variable;
  const auto scope = strategy.scope();
  std::vector<ShardedVariable> remote;
  for (const Variable& local : locals) {
    if (local.strategy() != nullptr) {
      Fail("the factory's model has variable '" + local.name() + "' in the scope of " +
           local.strategy()->name() + "; build the model with plain variables (no scope)");
    }
    const auto it = existing.find(local.name());
    if (it == existing.end()) {
      VariableSpec spec;
      spec.name = local.name();
      remote.push_back(ShardedVariable::Create(spec, local.value()));
    } else if (it->second.shape() != local.shape()) {
      Fail("the ps tasks hold variable '" + local.name() + "' of shape " +
           ShapeString(it->second.shape()) + " but the model's is " + ShapeString(local.shape()));
    } else {
      remote.push_back(it->second);
    }
  }
  return remote;
}

}  // namespace

void RegisterFitModel(const std::string& name, ModelFactory factory, DatasetFunction train_data) {
  if (!factory) throw Error(CHORUS_INVALID_ARGUMENT, "RegisterFitModel: the factory is empty");
  auto entry = std::make_shared<RegisteredModel>();
  entry->factory = std::move(factory);
  {
    const std::lock_guard<std::mutex> lock(g_models_mutex);
    if (!Models().emplace(name, entry).second) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "RegisterFitModel: model '" + name + "' is registered twice");
    }
  }
  RegisterDatasetFunction(DataFunction(name), std::move(train_data));
  RegisterFunction(StepFunction(name),
                   [entry](FunctionContext& context, const std::vector<Tensor>&) {
                     return RunStep(*entry, context);
                   });
}

History FitWithParameterServers(ClusterCoordinator& coordinator, const std::string& name,
                                const ParameterServerFitOptions& options,
                                std::unique_ptr<TrainableModel>* trained_model) {
  if (options.steps_per_epoch <= 0) {
    Fail("steps_per_epoch must be positive (the chief does not see the workers' data), got " +
         std::to_string(options.steps_per_epoch));
  }
  if (options.epochs < 0) Fail("epochs must not be negative");
  if (options.validation_data != nullptr && options.validation_batch_size <= 0) {
    Fail("validation_batch_size must be positive");
  }
  for (const Callback* callback : options.callbacks) {
    if (callback == nullptr) Fail("a callback is NULL");
  }
  const std::shared_ptr<RegisteredModel> entry = FindModel(name);
  std::unique_ptr<TrainableModel> model = entry->factory();
  const std::vector<Variable> locals = model->trainable_variables();
  if (locals.empty()) Fail("model '" + name + "' has no trainable variables");
  const std::vector<ShardedVariable> remote = RemoteVariables(coordinator.strategy(), locals);
  const PerWorkerDataset data = coordinator.create_per_worker_dataset(DataFunction(name));

  // What the callbacks see: no chorus::Strategy, the chief's copy of the model, no optimizer
  // here (it runs on the ps tasks).
  FitOptions fit_options;
  fit_options.epochs = options.epochs;
  fit_options.steps_per_epoch = options.steps_per_epoch;
  fit_options.callbacks = options.callbacks;
  FitState state;
  state.model = model.get();
  state.options = &fit_options;
  state.steps_per_epoch = options.steps_per_epoch;
  for (Callback* callback : options.callbacks) callback->on_train_begin(state);

  History history;
  for (int epoch = state.initial_epoch; epoch < options.epochs && !state.stop_training; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    state.epoch = epoch;
    for (Callback* callback : options.callbacks) callback->on_epoch_begin(state);
    std::vector<RemoteValue> steps;
    steps.reserve(static_cast<size_t>(options.steps_per_epoch));
    for (int64_t s = 0; s < options.steps_per_epoch; ++s) {
      steps.push_back(coordinator.schedule(StepFunction(name), data.iterator()));
    }
    coordinator.join();
    double loss = 0, correct = 0, examples = 0;
    for (const std::vector<Tensor>& outputs : ClusterCoordinator::fetch(steps)) {
      const std::vector<float> sums = outputs.at(0).ToVector();
      loss += sums.at(0);
      correct += sums.at(1);
      examples += sums.at(2);
    }
    EpochLogs logs;
    logs.epoch = epoch;
    logs.steps = options.steps_per_epoch;
    logs.loss = loss / static_cast<double>(options.steps_per_epoch);
    logs.accuracy = examples > 0 ? correct / examples : 0;
    logs.train_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::vector<Tensor> values = ReadVariables(remote);
    for (size_t i = 0; i < locals.size(); ++i) locals[i].assign(values[i]);
    if (options.validation_data != nullptr) {
      const Evaluation e =
          Evaluate(nullptr, *model, *options.validation_data, options.validation_batch_size);
      logs.val_loss = e.loss;
      logs.val_accuracy = e.accuracy;
    }
    logs.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (Callback* callback : options.callbacks) callback->on_epoch_end(state, logs);
    history.epochs.push_back(logs);
  }
  for (Callback* callback : options.callbacks) callback->on_train_end(state, history);
  if (trained_model != nullptr) *trained_model = std::move(model);
  return history;
}

}  // namespace chorus
