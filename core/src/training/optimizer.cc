// Optimizer::apply_gradients with tf.distribute's semantics. In a replica context the gradients
// are summed across replicas in one fused batch reduce, then one merge_call creates missing slots
// and updates every copy of every variable through strategy.extended().update(). Without a
// replica context the gradients are final and every copy gets the same update.
#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <chorus/distribute/strategy.h>
#include <chorus/training/optimizer.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace chorus {
namespace {

using ReducedGradients = std::vector<std::pair<std::vector<Tensor>, Variable>>;

[[noreturn]] void Invalid(const std::string& message) {
  throw Error(CHORUS_INVALID_ARGUMENT, "apply_gradients: " + message);
}

void CheckPair(const Tensor& gradient, const Variable& variable) {
  if (!variable.defined()) Invalid("a variable is undefined");
  const std::string name = "'" + variable.name() + "'";
  if (!gradient.defined()) Invalid("the gradient of variable " + name + " is undefined");
  if (!variable.trainable()) Invalid("variable " + name + " is not trainable");
  if (gradient.shape() != variable.shape()) {
    Invalid("the gradient of variable " + name + " has shape " + ShapeString(gradient.shape()) +
            " but the variable has shape " + ShapeString(variable.shape()));
  }
  if (gradient.dtype() != variable.dtype()) {
    Invalid("the gradient of variable " + name + " is " + DtypeName(gradient.dtype()) +
            " but the variable is " + DtypeName(variable.dtype()));
  }
  if (variable.dtype() != CHORUS_F32) {
    Invalid("variable " + name + " is " + DtypeName(variable.dtype()) +
            "; the optimizers update f32 variables");
  }
}

// The variable must belong to `strategy` (the running one); with no strategy, any variable.
void CheckPlacement(const Variable& variable, const Strategy* strategy) {
  if (strategy == nullptr || variable.strategy() == strategy) return;
  Invalid("variable '" + variable.name() + "' was created outside the scope of " +
          strategy->name() + "; create it inside strategy.scope()");
}

// Slots are keyed by variable name, so two variables of one name would share them.
void CheckUniqueNames(const GradientsAndVariables& grads_and_vars) {
  std::set<std::string> names;
  for (const auto& [gradient, variable] : grads_and_vars) {
    if (!names.insert(variable.name()).second) {
      Invalid("variable name '" + variable.name() +
              "' appears twice; each variable needs a unique name (slots are keyed by it)");
    }
  }
}

void Validate(const GradientsAndVariables& grads_and_vars, const Strategy* strategy) {
  if (grads_and_vars.empty()) Invalid("no gradients provided for any variable");
  for (const auto& [gradient, variable] : grads_and_vars) {
    CheckPair(gradient, variable);
    CheckPlacement(variable, strategy);
  }
  CheckUniqueNames(grads_and_vars);
}

// The gradient for copy `index` of a variable: the replica's own reduced gradient when the
// variable has one copy per replica, else the first one, moved to the copy's device.
Tensor GradientForCopy(const std::vector<Tensor>& gradients, const Tensor& copy, size_t index) {
  const Tensor& gradient = gradients.size() > 1 ? gradients.at(index) : gradients.front();
  if (gradient.device() == copy.device()) return gradient;
  return gradient.CopyTo(copy.device());
}

std::vector<Tensor> SlotCopies(const std::vector<Variable>& slots, size_t index) {
  std::vector<Tensor> copies;
  copies.reserve(slots.size());
  for (const Variable& slot : slots) copies.push_back(slot.components().at(index));
  return copies;
}

// The variable's slots in `names` order, each with as many copies as the variable.
std::vector<Variable> SlotsOf(const std::map<std::string, Variable>& all,
                              const std::vector<std::string>& names, const Variable& variable) {
  std::vector<Variable> slots;
  for (const std::string& name : names) {
    const Variable& slot = all.at(variable.name() + "/" + name);
    if (slot.components().size() != variable.components().size()) {
      throw Error(CHORUS_INTERNAL, "slot '" + slot.name() + "' has " +
                                       std::to_string(slot.components().size()) +
                                       " copies but its variable has " +
                                       std::to_string(variable.components().size()));
    }
    slots.push_back(slot);
  }
  return slots;
}

// Calls fn on every copy: through the variable's strategy, or directly for a plain variable.
void ForEachCopy(const Variable& variable, const std::function<void(const Tensor&, size_t)>& fn) {
  if (variable.strategy() != nullptr) {
    variable.strategy()->extended().update(variable, fn);
    return;
  }
  const auto& components = variable.components();
  for (size_t i = 0; i < components.size(); ++i) fn(components[i], i);
}

// Transposes per-replica lists of reduced gradients into per-variable lists.
ReducedGradients ByVariable(const std::vector<std::vector<Tensor>>& per_replica,
                            const GradientsAndVariables& grads_and_vars) {
  ReducedGradients out;
  out.reserve(grads_and_vars.size());
  for (size_t v = 0; v < grads_and_vars.size(); ++v) {
    std::vector<Tensor> gradients;
    gradients.reserve(per_replica.size());
    for (const auto& replica : per_replica) gradients.push_back(replica.at(v));
    out.emplace_back(std::move(gradients), grads_and_vars[v].second);
  }
  return out;
}

}  // namespace

void Optimizer::apply_gradients(const GradientsAndVariables& grads_and_vars,
                                const CommunicationOptions& options) {
  ReplicaContext* context = CurrentReplicaContext();
  Validate(grads_and_vars, context != nullptr ? &context->strategy() : CurrentStrategy());
  if (context == nullptr) {
    ReducedGradients final_gradients;
    for (const auto& [gradient, variable] : grads_and_vars) {
      final_gradients.emplace_back(std::vector<Tensor>{gradient}, variable);
    }
    ApplyReduced(final_gradients);
    return;
  }
  std::vector<Tensor> gradients;
  gradients.reserve(grads_and_vars.size());
  for (const auto& pair : grads_and_vars) gradients.push_back(pair.first);
  const std::vector<Tensor> reduced = context->all_reduce(CHORUS_REDUCE_SUM, gradients, options);
  if (UpdatesInReplicas(grads_and_vars, *context)) {
    // Every replica holds the same reduced gradients: each updates its own copies, in parallel,
    // to the same values the merge_call below would write; one merge_call then counts the step
    // (every replica has read iterations_ before anyone writes it).
    const int64_t step = iterations_ + 1;
    const auto me = static_cast<size_t>(context->local_replica_id());
    for (size_t v = 0; v < grads_and_vars.size(); ++v) {
      const Variable& variable = grads_and_vars[v].second;
      const std::vector<Variable> slots = SlotsOf(slots_, slot_names(), variable);
      UpdateComponent(variable.components()[me], reduced[v], SlotCopies(slots, me), step);
    }
    context->merge_call<bool, bool>(
        [&](Strategy&, const std::vector<bool>&) {
          iterations_ = step;
          return true;
        },
        true);
    return;
  }
  using Lists = std::vector<Tensor>;
  context->merge_call<bool, Lists>(
      [&](Strategy&, const std::vector<Lists>& per_replica) {
        ApplyReduced(ByVariable(per_replica, grads_and_vars));
        return true;
      },
      reduced);
}

bool Optimizer::UpdatesInReplicas(const GradientsAndVariables& grads_and_vars,
                                  const ReplicaContext& context) const {
  const std::vector<Device>& devices = context.strategy().devices();
  const auto me = static_cast<size_t>(context.local_replica_id());
  for (const auto& [gradient, variable] : grads_and_vars) {
    // One copy per local replica, this replica's on its device (mirrored), and slots made
    // (creating them needs cross-replica context).
    const std::vector<Tensor>& copies = variable.components();
    if (copies.size() != devices.size() || !(copies[me].device() == devices[me]) ||
        !(gradient.device() == devices[me])) {
      return false;
    }
    for (const std::string& name : slot_names()) {
      if (slots_.count(variable.name() + "/" + name) == 0) return false;
    }
  }
  return true;
}

void Optimizer::build(const std::vector<Variable>& variables) {
  if (CurrentReplicaContext() != nullptr) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "Optimizer::build must be called in cross-replica context, not inside run()");
  }
  for (const Variable& variable : variables) CreateSlots(variable);
}

void Optimizer::CreateSlots(const Variable& variable) {
  for (const std::string& slot_name : slot_names()) {
    const std::string key = variable.name() + "/" + slot_name;
    if (slots_.count(key) != 0) continue;
    VariableSpec spec;
    spec.name = key;
    spec.trainable = false;
    spec.synchronization = VariableSynchronization::kOnWrite;
    spec.aggregation = VariableAggregation::kNone;
    const Tensor zeros(variable.components().front().device(), variable.dtype(), variable.shape());
    slots_.emplace(key, Variable::CreateColocated(variable, spec, zeros));
  }
}

void Optimizer::ApplyReduced(
    const std::vector<std::pair<std::vector<Tensor>, Variable>>& gradients) {
  for (const auto& [reduced, variable] : gradients) CreateSlots(variable);
  const int64_t step = iterations_ + 1;
  for (const auto& [reduced_tensors, variable] : gradients) {
    const std::vector<Variable> slots = SlotsOf(slots_, slot_names(), variable);
    const std::vector<Tensor>& reduced = reduced_tensors;  // a lambda may not capture a binding
    ForEachCopy(variable, [&](const Tensor& copy, size_t index) {
      UpdateComponent(copy, GradientForCopy(reduced, copy, index), SlotCopies(slots, index), step);
    });
  }
  iterations_ = step;
}

}  // namespace chorus
