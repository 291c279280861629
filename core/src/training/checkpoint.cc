// Checkpoint: one value per tracked variable (the primary copy, or an ON_READ variable's
// aggregate), an optimizer's slots and iteration count, in the file format of
// checkpoint_format.h. Restore validates every key, dtype and shape before it assigns anything.
#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <chorus/distribute/replica_context.h>
#include <chorus/distribute/strategy.h>
#include <chorus/training/checkpoint.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "training/checkpoint_format.h"
#include "training/writer_outcome.h"

namespace chorus {
namespace {

using internal::CheckpointEntry;
using EntryIndex = std::map<std::string, const CheckpointEntry*>;

void RequireNoReplicaContext(const char* what) {
  if (CurrentReplicaContext() != nullptr) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                std::string("Checkpoint::") + what +
                    " must be called in cross-replica context or with no strategy, not inside "
                    "Strategy::run");
  }
}

// With no strategy current, a distributed variable is read and written in cross-replica context
// of its own strategy.
std::shared_ptr<void> EnterStrategyOf(const Variable& variable) {
  if (CurrentStrategy() != nullptr || variable.strategy() == nullptr) return nullptr;
  return variable.strategy()->scope();
}

CheckpointEntry EntryOf(const std::string& key, const Variable& variable) {
  const auto scope = EnterStrategyOf(variable);
  const Tensor value = variable.value();
  return CheckpointEntry{key, value.dtype(), value.shape(), internal::TensorBytes(value)};
}

CheckpointEntry IterationsEntry(const std::string& key, int64_t iterations) {
  std::vector<uint8_t> data;
  for (size_t i = 0; i < sizeof(int64_t); ++i) {
    data.push_back(static_cast<uint8_t>(static_cast<uint64_t>(iterations) >> (8 * i)));
  }
  return CheckpointEntry{key, CHORUS_I64, {}, std::move(data)};
}

int64_t IterationsValue(const CheckpointEntry& entry) {
  uint64_t bits = 0;
  for (size_t i = 0; i < sizeof(int64_t); ++i) bits |= uint64_t{entry.data.at(i)} << (8 * i);
  return static_cast<int64_t>(bits);
}

std::string IterationsKey(const std::string& optimizer_key) {
  return optimizer_key + "/iterations";
}

std::string SlotKey(const std::string& optimizer_key, const std::string& slot_key) {
  return optimizer_key + "/" + slot_key;
}

void Assign(const Variable& variable, const CheckpointEntry& entry) {
  const Tensor value(variable.components().front().device(), entry.dtype, entry.shape);
  internal::AssignBytes(value, entry.data);
  const auto scope = EnterStrategyOf(variable);
  variable.assign(value);
}

void AssignZeros(const Variable& variable) {
  const Tensor zeros(variable.components().front().device(), variable.dtype(), variable.shape());
  const auto scope = EnterStrategyOf(variable);
  variable.assign(zeros);
}

// ---- restore: lookup and validation ---------------------------------------------------------

EntryIndex IndexEntries(const std::vector<CheckpointEntry>& entries, const std::string& path) {
  EntryIndex index;
  for (const CheckpointEntry& entry : entries) {
    if (!index.emplace(entry.key, &entry).second) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "checkpoint '" + path + "': malformed: key '" + entry.key + "' appears twice");
    }
  }
  return index;
}

std::string SomeKeys(const EntryIndex& index) {
  constexpr size_t kShown = 10;
  std::string keys;
  size_t shown = 0;
  for (const auto& [key, entry] : index) {
    if (shown == kShown) break;
    keys += (shown++ ? ", '" : "'") + key + "'";
  }
  if (index.empty()) return "it has no keys";
  if (index.size() > kShown) keys += ", ... (" + std::to_string(index.size()) + " in all)";
  return "it has " + keys;
}

const CheckpointEntry& Find(const EntryIndex& index, const std::string& key,
                            const std::string& path) {
  const auto it = index.find(key);
  if (it == index.end()) {
    throw Error(CHORUS_NOT_FOUND,
                "checkpoint '" + path + "' has no key '" + key + "'; " + SomeKeys(index));
  }
  return *it->second;
}

const CheckpointEntry* FindOptional(const EntryIndex& index, const std::string& key) {
  const auto it = index.find(key);
  return it == index.end() ? nullptr : it->second;
}

void CheckMatches(const CheckpointEntry& entry, chorus_dtype dtype, const Shape& shape,
                  const std::string& path) {
  if (entry.dtype == dtype && entry.shape == shape) return;
  throw Error(CHORUS_INVALID_ARGUMENT, "checkpoint '" + path + "': key '" + entry.key + "' holds " +
                                           DtypeName(entry.dtype) + ShapeString(entry.shape) +
                                           " but the variable it restores is " + DtypeName(dtype) +
                                           ShapeString(shape));
}

// One planned write: a variable and its value, or zeros when `entry` is null.
struct Assignment {
  Variable variable;
  const CheckpointEntry* entry;
};

struct OptimizerPlan {
  Optimizer* optimizer;
  int64_t iterations;
  std::vector<Variable> needs_slots;  // tracked variables whose slots the file holds
  std::vector<std::pair<std::string, const CheckpointEntry*>> slot_values;  // by slot key
};

}  // namespace

// ---- tracking ----------------------------------------------------------------------------------

Checkpoint& Checkpoint::Track(const std::string& key, const Variable& variable) {
  if (key.empty()) throw Error(CHORUS_INVALID_ARGUMENT, "Checkpoint::Track: empty key");
  if (!variable.defined()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "Checkpoint::Track: variable '" + key + "' is undefined");
  }
  for (const auto& tracked : variables_) {
    if (tracked.first == key) {
      throw Error(CHORUS_INVALID_ARGUMENT, "Checkpoint::Track: key '" + key + "' is tracked twice");
    }
  }
  variables_.emplace_back(key, variable);
  return *this;
}

Checkpoint& Checkpoint::Track(const std::string& key, Optimizer& optimizer) {
  if (key.empty()) throw Error(CHORUS_INVALID_ARGUMENT, "Checkpoint::Track: empty key");
  for (const auto& tracked : optimizers_) {
    if (tracked.first == key) {
      throw Error(CHORUS_INVALID_ARGUMENT, "Checkpoint::Track: key '" + key + "' is tracked twice");
    }
  }
  optimizers_.emplace_back(key, &optimizer);
  return *this;
}

// ---- save --------------------------------------------------------------------------------------

std::vector<uint8_t> Checkpoint::Encode(Strategy*& strategy) const {
  std::vector<CheckpointEntry> entries;
  for (const auto& [key, variable] : variables_) entries.push_back(EntryOf(key, variable));
  for (const auto& [key, optimizer] : optimizers_) {
    entries.push_back(IterationsEntry(IterationsKey(key), optimizer->iterations()));
    for (const auto& [slot_key, slot] : optimizer->slots()) {
      entries.push_back(EntryOf(SlotKey(key, slot_key), slot));
    }
  }
  std::set<std::string> keys;
  for (const CheckpointEntry& entry : entries) {
    if (!keys.insert(entry.key).second) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "Checkpoint::Save: key '" + entry.key +
                      "' would be written twice (a variable's key equals an optimizer's)");
    }
  }
  strategy = CurrentStrategy();
  if (strategy == nullptr && !variables_.empty()) strategy = variables_.front().second.strategy();
  return internal::EncodeCheckpoint(entries);
}

void Checkpoint::Save(const std::string& path) const {
  RequireNoReplicaContext("Save");
  // Multi-worker: every worker reads its values (SyncOnRead reads are collectives); the writer
  // alone writes the file, and every worker learns whether it could.
  Strategy* strategy = nullptr;
  const std::vector<uint8_t> bytes = Encode(strategy);
  internal::RunOnWriter(strategy, "save checkpoint '" + path + "'", [&] {
    internal::WriteFileAtomically(path, bytes);
    return std::string();
  });
}

// ---- restore -----------------------------------------------------------------------------------

namespace {

OptimizerPlan PlanOptimizer(const std::string& key, Optimizer& optimizer,
                            const std::vector<std::pair<std::string, Variable>>& variables,
                            const EntryIndex& index, const std::string& path) {
  OptimizerPlan plan{&optimizer, 0, {}, {}};
  // The key in a named string: g++ 13 takes a reference returned beside a temporary argument for
  // one into it (-Wdangling-reference), though Find returns an entry of `index`.
  const std::string iterations_key = IterationsKey(key);
  const CheckpointEntry& iterations = Find(index, iterations_key, path);
  CheckMatches(iterations, CHORUS_I64, {}, path);
  plan.iterations = IterationsValue(iterations);
  std::set<std::string> planned;
  for (const auto& [slot_key, slot] : optimizer.slots()) {
    const CheckpointEntry* entry = FindOptional(index, SlotKey(key, slot_key));
    if (entry != nullptr) CheckMatches(*entry, slot.dtype(), slot.shape(), path);
    plan.slot_values.emplace_back(slot_key, entry);
    planned.insert(slot_key);
  }
  for (const auto& [variable_key, variable] : variables) {
    if (!variable.trainable()) continue;
    bool in_file = false;
    for (const std::string& slot_name : optimizer.slot_names()) {
      const std::string slot_key = variable.name() + "/" + slot_name;
      const CheckpointEntry* entry = FindOptional(index, SlotKey(key, slot_key));
      if (entry == nullptr || planned.count(slot_key) != 0) continue;
      CheckMatches(*entry, variable.dtype(), variable.shape(), path);
      plan.slot_values.emplace_back(slot_key, entry);
      planned.insert(slot_key);
      in_file = true;
    }
    if (in_file) plan.needs_slots.push_back(variable);
  }
  return plan;
}

void ApplyOptimizerPlan(const OptimizerPlan& plan) {
  plan.optimizer->build(plan.needs_slots);
  const auto& slots = plan.optimizer->slots();
  for (const auto& [slot_key, entry] : plan.slot_values) {
    if (entry != nullptr) {
      Assign(slots.at(slot_key), *entry);
    } else {
      AssignZeros(slots.at(slot_key));  // saved before this slot existed
    }
  }
  // Slots created just now for keys the file lacks are already zero.
  plan.optimizer->set_iterations(plan.iterations);
}

}  // namespace

void Checkpoint::Restore(const std::string& path) const {
  RequireNoReplicaContext("Restore");
  const std::vector<CheckpointEntry> entries =
      internal::DecodeCheckpoint(internal::ReadWholeFile(path), path);
  const EntryIndex index = IndexEntries(entries, path);
  std::vector<Assignment> assignments;
  for (const auto& [key, variable] : variables_) {
    const CheckpointEntry& entry = Find(index, key, path);
    CheckMatches(entry, variable.dtype(), variable.shape(), path);
    assignments.push_back({variable, &entry});
  }
  std::vector<OptimizerPlan> plans;
  for (const auto& [key, optimizer] : optimizers_) {
    plans.push_back(PlanOptimizer(key, *optimizer, variables_, index, path));
  }
  for (const Assignment& assignment : assignments) Assign(assignment.variable, *assignment.entry);
  for (const OptimizerPlan& plan : plans) ApplyOptimizerPlan(plan);
}

}  // namespace chorus
