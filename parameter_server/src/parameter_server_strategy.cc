// ParameterServerStrategy: the coordinator's view of the ps tasks, its variables and their
// placement; ShardedVariable's reads and writes; ShardedCheckpoint.
#include <chorus/base/dtype.h>
#include <chorus/distribute/replica_context.h>
#include <chorus/parameter_server/parameter_server_strategy.h>
#include <chorus/training/checkpoint.h>

#include <map>
#include <random>

#include "ps_internal.h"

namespace chorus {
namespace {

using ps_internal::HostDevice;
using ps_internal::JobAddresses;
using ps_internal::Layout;
using ps_internal::PsClient;
using ps_internal::VariableInfo;

thread_local ParameterServerStrategy* current_strategy = nullptr;

[[noreturn]] void Invalid(const std::string& message) {
  throw Error(CHORUS_INVALID_ARGUMENT, "ParameterServerStrategy: " + message);
}

std::unique_ptr<ClusterResolver> ResolverOrEnvironment(std::unique_ptr<ClusterResolver> given) {
  if (given != nullptr) return given;
  std::unique_ptr<ClusterResolver> resolver = ResolveClusterFromEnvironment();
  if (resolver == nullptr) {
    Invalid(
        "no cluster: set TF_CONFIG with a \"chief\" (this program), \"worker\" and \"ps\" jobs, "
        "or start the job with chorus-launch --ps N --workers M -- program");
  }
  return resolver;
}

// The cluster must have ps and workers (ValidateParameterServerCluster), a chief, and this
// process must be it.
void CheckCluster(const ClusterResolver& resolver) {
  ValidateParameterServerCluster(resolver);
  if (JobAddresses(resolver, "chief").empty()) {
    Invalid(
        "the cluster has no \"chief\", the coordinator that runs the training program; "
        "add \"chief\": [\"host:port\"] to TF_CONFIG's cluster and run the program there");
  }
  const std::string& role = resolver.task_type();
  if (role == "ps" || role == "worker") {
    Invalid("this process is " + role + " " + std::to_string(resolver.task_id()) +
            ", but the training program runs on the chief only; a " + role +
            " task serves: call ServeIfServerTask() first in main() and return when it returns "
            "true");
  }
  if (role != "chief") {
    Invalid("this process is " + role + " " + std::to_string(resolver.task_id()) +
            ", but the strategy is created by the chief (the coordinator)");
  }
}

std::string NameOf(const ShardedVariable& variable) { return "variable '" + variable.name() + "'"; }

void CheckValue(const ShardedVariable& variable, const Tensor& value, const char* what) {
  if (value.dtype() != variable.dtype() || value.shape() != variable.shape()) {
    throw Error(CHORUS_INVALID_ARGUMENT, std::string(what) + " of " + NameOf(variable) + ": a " +
                                             DtypeName(value.dtype()) + ShapeString(value.shape()) +
                                             " value for a " + DtypeName(variable.dtype()) +
                                             ShapeString(variable.shape()) +
                                             " variable; give one of the variable's "
                                             "dtype and shape");
  }
}

}  // namespace

ServerOptimizer ServerOptimizer::SGD(float learning_rate, float momentum, bool nesterov) {
  ServerOptimizer optimizer;
  optimizer.kind = "sgd";
  optimizer.learning_rate = learning_rate;
  optimizer.momentum = momentum;
  optimizer.nesterov = nesterov;
  return optimizer;
}

ServerOptimizer ServerOptimizer::Adam(float learning_rate, float beta_1, float beta_2,
                                      float epsilon) {
  ServerOptimizer optimizer;
  optimizer.kind = "adam";
  optimizer.learning_rate = learning_rate;
  optimizer.beta_1 = beta_1;
  optimizer.beta_2 = beta_2;
  optimizer.epsilon = epsilon;
  return optimizer;
}

// ---- ShardedVariable -------------------------------------------------------------------------

ShardedVariable::ShardedVariable(std::shared_ptr<const VariableInfo> info,
                                 std::shared_ptr<PsClient> client)
    : info_(std::move(info)), client_(std::move(client)) {}

const VariableInfo& ShardedVariable::info() const {
  if (info_ == nullptr) throw Error(CHORUS_INVALID_ARGUMENT, "an undefined ShardedVariable");
  return *info_;
}
PsClient& ShardedVariable::client() const {
  info();
  return *client_;
}
const std::string& ShardedVariable::name() const { return info().name; }
const Shape& ShardedVariable::shape() const { return info().shape; }
chorus_dtype ShardedVariable::dtype() const { return info().dtype; }
bool ShardedVariable::trainable() const { return info().trainable; }
const std::vector<ShardPlacement>& ShardedVariable::shards() const { return info().shards; }

ShardedVariable ShardedVariable::Create(const VariableSpec& spec, const Tensor& initial) {
  if (current_strategy == nullptr) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "ShardedVariable::Create('" + spec.name +
                    "') outside a ParameterServerStrategy's scope(); create it inside "
                    "`auto scope = strategy.scope();` or with strategy.CreateVariable");
  }
  return current_strategy->CreateVariable(spec, initial);
}

Tensor ShardedVariable::read() const { return ReadVariables({*this}).front(); }

void ShardedVariable::read_into(const Tensor& out) const {
  CheckValue(*this, out, "read_into");
  if (!out.host_accessible()) {
    out.Assign(read());
    return;
  }
  client().ReadInto(shards(), ps_internal::ShardSpans(info(), out.raw()));
}

namespace {

// `value` in host memory (itself when it is there already).
Tensor OnHost(const Tensor& value) {
  return value.host_accessible() ? value : value.CopyTo(HostDevice());
}

void Write(const ShardedVariable& variable, const Tensor& value,
           ps_internal::rpc::UpdateRequest::Kind kind, const char* what) {
  CheckValue(variable, value, what);
  const Tensor host = OnHost(value);
  variable.client().UpdateFrom(
      kind, variable.dtype(), variable.shards(),
      ps_internal::ShardSpans(variable.info(), static_cast<const void*>(host.raw())));
}

}  // namespace

void ShardedVariable::assign(const Tensor& value) const {
  Write(*this, value, ps_internal::rpc::UpdateRequest::ASSIGN, "assign");
}

void ShardedVariable::assign_add(const Tensor& delta) const {
  Write(*this, delta, ps_internal::rpc::UpdateRequest::ASSIGN_ADD, "assign_add");
}

void ShardedVariable::assign_sub(const Tensor& delta) const {
  Write(*this, delta, ps_internal::rpc::UpdateRequest::ASSIGN_SUB, "assign_sub");
}

std::vector<Tensor> ReadVariables(const std::vector<ShardedVariable>& variables) {
  if (variables.empty()) return {};
  // Each whole value is allocated once and every shard is read into its rows.
  std::vector<Tensor> values;
  std::vector<ShardPlacement> shards;
  std::vector<ps_internal::MutableBytes> destinations;
  for (const ShardedVariable& variable : variables) {
    values.emplace_back(HostDevice(), variable.dtype(), variable.shape());
    const auto spans = ps_internal::ShardSpans(variable.info(), values.back().raw());
    shards.insert(shards.end(), variable.shards().begin(), variable.shards().end());
    destinations.insert(destinations.end(), spans.begin(), spans.end());
  }
  variables.front().client().ReadInto(shards, destinations);
  return values;
}

void ApplyGradients(const std::vector<std::pair<Tensor, ShardedVariable>>& grads_and_vars) {
  if (grads_and_vars.empty()) return;
  std::vector<ShardPlacement> shards;
  std::vector<ps_internal::ConstBytes> sources;
  std::vector<Tensor> on_host;  // keeps copies of device gradients alive for the call
  for (const auto& [gradient, variable] : grads_and_vars) {
    CheckValue(variable, gradient, "ApplyGradients");
    if (!variable.trainable()) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "ApplyGradients: " + NameOf(variable) + " is not trainable");
    }
    if (variable.dtype() != CHORUS_F32) {
      throw Error(CHORUS_UNSUPPORTED,
                  "ApplyGradients: " + NameOf(variable) + " is not f32; the ps optimizers are f32");
    }
    on_host.push_back(OnHost(gradient));
    const auto spans =
        ps_internal::ShardSpans(variable.info(), static_cast<const void*>(on_host.back().raw()));
    shards.insert(shards.end(), variable.shards().begin(), variable.shards().end());
    sources.insert(sources.end(), spans.begin(), spans.end());
  }
  grads_and_vars.front().second.client().UpdateFrom(ps_internal::rpc::UpdateRequest::APPLY_GRADIENT,
                                                    CHORUS_F32, shards, sources);
}

// ---- ParameterServerStrategy -----------------------------------------------------------------

struct ParameterServerStrategy::State {
  mutable std::mutex mutex;
  std::vector<std::shared_ptr<const VariableInfo>> variables;
  std::shared_ptr<const Layout> layout = std::make_shared<Layout>();
  uint64_t next_shard_id = 0;
  int64_t next_ps = 0;  // round-robin over the ps tasks, shard by shard
};

ParameterServerStrategy::ParameterServerStrategy(
    std::unique_ptr<ClusterResolver> resolver,
    std::shared_ptr<const partitioners::Partitioner> variable_partitioner,
    ParameterServerOptions options)
    : resolver_(ResolverOrEnvironment(std::move(resolver))),
      partitioner_(std::move(variable_partitioner)),
      options_(options),
      state_(std::make_unique<State>()) {
  CheckCluster(*resolver_);
  if (options_.rpc_timeout.count() <= 0) options_.rpc_timeout = ps_internal::DefaultTimeout();
  if (options_.connect_timeout.count() <= 0) options_.connect_timeout = options_.rpc_timeout;
  // Shard ids are random per strategy so that a second coordinator's never meet the first's.
  std::random_device random;
  state_->next_shard_id = ((uint64_t{random()} << 32) | random()) & ~uint64_t{0xffffff};
  // So is the layout's version: a worker that served another strategy's functions before holds
  // a layout of another version, never one that looks current.
  auto layout = std::make_shared<Layout>();
  layout->version = ((uint64_t{random()} << 32) | random()) | 1;
  state_->layout = std::move(layout);
  client_ = std::make_shared<PsClient>(JobAddresses(*resolver_, "ps"), options_.rpc_timeout);
  client_->WaitForAll(options_.connect_timeout);
}

ParameterServerStrategy::~ParameterServerStrategy() = default;

int ParameterServerStrategy::num_ps() const { return client_->num_ps(); }
int ParameterServerStrategy::num_workers() const {
  return static_cast<int>(JobAddresses(*resolver_, "worker").size());
}

std::shared_ptr<void> ParameterServerStrategy::scope() {
  ParameterServerStrategy* previous = current_strategy;
  current_strategy = this;
  return std::shared_ptr<void>(nullptr, [previous](void*) { current_strategy = previous; });
}

ShardedVariable ParameterServerStrategy::CreateVariable(const VariableSpec& spec,
                                                        const Tensor& initial) {
  if (!initial.defined()) Invalid("variable '" + spec.name + "' has no initial value");
  if (spec.name.empty()) Invalid("a variable needs a name (workers' functions find it by name)");
  auto info = std::make_shared<VariableInfo>();
  info->name = spec.name;
  info->dtype = initial.dtype();
  info->shape = initial.shape();
  info->trainable = spec.trainable;
  const int shards = partitioner_ == nullptr || info->shape.empty()
                         ? 1
                         : partitioner_->NumShards(info->shape, info->dtype);
  {
    std::lock_guard lock(state_->mutex);
    for (const auto& existing : state_->variables) {
      if (existing->name == spec.name) {
        Invalid("a variable named '" + spec.name + "' exists already; give each a new name");
      }
    }
    const std::vector<int64_t> rows = info->shape.empty()
                                          ? std::vector<int64_t>{1}
                                          : partitioners::ShardRows(info->shape.front(), shards);
    int64_t first_row = 0;
    for (int64_t count : rows) {
      ShardPlacement placement;
      placement.id = state_->next_shard_id++;
      placement.ps = static_cast<int>(state_->next_ps++ % num_ps());
      placement.first_row = first_row;
      placement.shape = info->shape;
      if (!placement.shape.empty()) placement.shape.front() = count;
      first_row += count;
      info->shards.push_back(std::move(placement));
    }
  }
  client_->CreateShards(*info, initial);
  std::lock_guard lock(state_->mutex);
  state_->variables.push_back(info);
  auto layout = std::make_shared<Layout>(*state_->layout);
  layout->version += 1;
  layout->variables = state_->variables;
  state_->layout = std::move(layout);
  return ShardedVariable(info, client_);
}

void ParameterServerStrategy::set_optimizer(const ServerOptimizer& optimizer) {
  ps_internal::rpc::OptimizerConfig config;
  config.set_kind(optimizer.kind);
  config.set_learning_rate(optimizer.learning_rate);
  config.set_momentum(optimizer.momentum);
  config.set_nesterov(optimizer.nesterov);
  config.set_beta_1(optimizer.beta_1);
  config.set_beta_2(optimizer.beta_2);
  config.set_epsilon(optimizer.epsilon);
  client_->SetOptimizer(config);
}

std::vector<ShardedVariable> ParameterServerStrategy::variables() const {
  std::lock_guard lock(state_->mutex);
  std::vector<ShardedVariable> out;
  for (const auto& info : state_->variables) out.emplace_back(info, client_);
  return out;
}

std::shared_ptr<const Layout> ParameterServerStrategy::layout() const {
  std::lock_guard lock(state_->mutex);
  return state_->layout;
}

// ---- ShardedCheckpoint -----------------------------------------------------------------------

namespace {

// A plain (no strategy) variable holding `value`, for chorus::Checkpoint.
Variable PlainVariable(const std::string& name, const Tensor& value) {
  return Variable::Create(VariableSpec{name, false}, value);
}

// The slots of `variable`'s shards concatenated per slot name, and the largest step.
struct WholeSlots {
  std::vector<std::string> names;
  std::vector<Tensor> values;
  int64_t step = 0;
};

WholeSlots ReadWholeSlots(const ShardedVariable& variable) {
  const std::vector<ps_internal::rpc::SlotState> states =
      variable.client().ReadSlots(variable.shards());
  WholeSlots whole;
  for (const auto& state : states) whole.step = std::max(whole.step, state.step());
  whole.names.assign(states.front().slot_names().begin(), states.front().slot_names().end());
  for (size_t s = 0; s < whole.names.size(); ++s) {
    std::vector<Tensor> parts;
    for (const auto& state : states) {
      parts.push_back(ps_internal::FromProto(state.slots(static_cast<int>(s)), "a slot"));
    }
    whole.values.push_back(ps_internal::ConcatRows(variable.info(), parts));
  }
  return whole;
}

// The slot names the ps optimizer keeps (empty before set_optimizer).
std::vector<std::string> SlotNamesOf(const ShardedVariable& variable) {
  return ReadWholeSlots(variable).names;
}

}  // namespace

ShardedCheckpoint& ShardedCheckpoint::Track(const std::string& key,
                                            const ShardedVariable& variable) {
  for (const auto& [existing, unused] : variables_) {
    if (existing == key) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "ShardedCheckpoint: key '" + key + "' is tracked already; use another key");
    }
  }
  variables_.emplace_back(key, variable);
  return *this;
}

ShardedCheckpoint& ShardedCheckpoint::TrackOptimizer(const std::string& key) {
  optimizer_key_ = key;
  return *this;
}

ShardedCheckpoint::Snapshot ShardedCheckpoint::Read() const {
  std::vector<ShardedVariable> variables;
  for (const auto& [key, variable] : variables_) variables.push_back(variable);
  const std::vector<Tensor> values = ReadVariables(variables);
  Snapshot snapshot;
  Checkpoint& checkpoint = snapshot.checkpoint;
  std::vector<Variable>& plain = snapshot.values;
  for (size_t i = 0; i < variables_.size(); ++i) {
    plain.push_back(PlainVariable(variables_[i].first, values[i]));
    checkpoint.Track(variables_[i].first, plain.back());
  }
  if (!optimizer_key_.empty()) {
    int64_t iterations = 0;
    for (const auto& [key, variable] : variables_) {
      if (!variable.trainable()) continue;
      const WholeSlots slots = ReadWholeSlots(variable);
      iterations = std::max(iterations, slots.step);
      for (size_t s = 0; s < slots.names.size(); ++s) {
        const std::string slot_key = optimizer_key_ + "/" + variable.name() + "/" + slots.names[s];
        plain.push_back(PlainVariable(slot_key, slots.values[s]));
        checkpoint.Track(slot_key, plain.back());
      }
    }
    Tensor step(HostDevice(), CHORUS_I64, {});
    *step.data<int64_t>() = iterations;
    plain.push_back(PlainVariable(optimizer_key_ + "/iterations", step));
    checkpoint.Track(optimizer_key_ + "/iterations", plain.back());
  }
  return snapshot;
}

void ShardedCheckpoint::Save(const std::string& path) const { Read().checkpoint.Save(path); }

std::string ShardedCheckpoint::Save(CheckpointManager& manager, int64_t number) const {
  return manager.Save(Read().checkpoint, number);
}

int64_t ShardedCheckpoint::Restore(const std::string& path) const {
  // Whole values first, every key checked by chorus::Checkpoint before anything is assigned.
  Checkpoint checkpoint;
  std::vector<Variable> plain;
  for (const auto& [key, variable] : variables_) {
    plain.push_back(PlainVariable(key, Tensor(HostDevice(), variable.dtype(), variable.shape())));
    checkpoint.Track(key, plain.back());
  }
  checkpoint.Restore(path);
  for (size_t i = 0; i < variables_.size(); ++i) {
    variables_[i].second.assign(plain[i].value());
  }
  if (optimizer_key_.empty()) return 0;

  // Optional entries: the step and the slots (a file saved without an optimizer has none).
  const auto restore_optional = [&path](const std::string& key, const Tensor& initial,
                                        Tensor* out) {
    Variable holder = PlainVariable(key, initial);
    Checkpoint one;
    one.Track(key, holder);
    try {
      one.Restore(path);
    } catch (const Error& e) {
      if (e.status() == CHORUS_NOT_FOUND) return false;
      throw;
    }
    *out = holder.value();
    return true;
  };
  Tensor step_value;
  int64_t iterations = 0;
  if (restore_optional(optimizer_key_ + "/iterations", Tensor(HostDevice(), CHORUS_I64, {}),
                       &step_value)) {
    iterations = *step_value.data<int64_t>();
  }
  for (const auto& [key, variable] : variables_) {
    if (!variable.trainable()) continue;
    const std::vector<std::string> names = SlotNamesOf(variable);
    std::vector<ps_internal::rpc::SlotState> states(variable.shards().size());
    for (size_t k = 0; k < states.size(); ++k) {
      states[k].set_id(variable.shards()[k].id);
      states[k].set_step(iterations);
    }
    bool complete = true;
    for (const std::string& name : names) {
      Tensor whole;
      if (!restore_optional(optimizer_key_ + "/" + variable.name() + "/" + name,
                            Tensor(HostDevice(), CHORUS_F32, variable.shape()), &whole)) {
        complete = false;
        break;
      }
      const std::vector<Tensor> parts = ps_internal::SplitRows(whole, variable.shards());
      for (size_t k = 0; k < states.size(); ++k) {
        states[k].add_slot_names(name);
        ps_internal::ToProto(parts[k], states[k].add_slots());
      }
    }
    if (!complete) {
      for (auto& state : states) {  // the step alone: slots start from zero
        state.clear_slot_names();
        state.clear_slots();
      }
    }
    variable.client().WriteSlots(variable.shards(), states);
  }
  return iterations;
}

}  // namespace chorus
