// VariableStore: a ps task's shards and its optimizer.
#include "variable_store.h"

#include <chorus/base/error.h>
#include <chorus/plugin.h>
#include <chorus/runtime/tensor.h>

#include <cmath>
#include <cstring>

namespace chorus::ps_internal {
namespace {

std::string Describe(const std::string& name, uint64_t id) {
  return "shard '" + name + "' (id " + std::to_string(id) + ")";
}

size_t ExpectedBytes(int32_t dtype, const std::vector<int64_t>& shape) {
  return static_cast<size_t>(NumElements(shape)) *
         chorus_dtype_size(static_cast<chorus_dtype>(dtype));
}

std::vector<std::string> SlotNames(const rpc::OptimizerConfig& config) {
  if (config.kind() == "adam") return {"m", "v"};
  if (config.momentum() > 0.0f) return {"momentum"};
  return {};
}

}  // namespace

void VariableStore::SetOptimizer(const rpc::OptimizerConfig& config) {
  if (config.kind() != "sgd" && config.kind() != "adam") {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "unknown optimizer '" + config.kind() + "'; use ServerOptimizer::SGD or ::Adam");
  }
  std::unique_lock lock(mutex_);
  optimizer_ = config;
  has_optimizer_ = true;
}

void VariableStore::Create(uint64_t id, const std::string& name, const rpc::TensorData& initial) {
  auto shard = std::make_unique<Shard>();
  shard->name = name;
  shard->dtype = initial.dtype();
  shard->shape.assign(initial.shape().begin(), initial.shape().end());
  if (initial.data().size() != ExpectedBytes(initial.dtype(), shard->shape)) {
    throw Error(CHORUS_INVALID_ARGUMENT, Describe(name, id) + ": initial value of " +
                                             std::to_string(initial.data().size()) +
                                             " bytes does not match its shape");
  }
  shard->bytes = std::make_shared<std::string>(initial.data());
  std::unique_lock lock(mutex_);
  if (!shards_.emplace(id, std::move(shard)).second) {
    throw Error(CHORUS_INVALID_ARGUMENT, Describe(name, id) + " exists already on this ps");
  }
}

VariableStore::Shard& VariableStore::Find(uint64_t id) const {
  std::shared_lock lock(mutex_);
  const auto it = shards_.find(id);
  if (it == shards_.end()) {
    throw Error(CHORUS_NOT_FOUND, "no shard with id " + std::to_string(id) +
                                      " on this ps; was it restarted? restart the chief too, "
                                      "from the last checkpoint");
  }
  return *it->second;
}

void VariableStore::Read(uint64_t id, rpc::TensorData* out) const {
  Shard& shard = Find(id);
  std::lock_guard lock(shard.mutex);
  out->set_dtype(shard.dtype);
  out->mutable_shape()->Assign(shard.shape.begin(), shard.shape.end());
  *out->mutable_data() = *shard.bytes;
}

std::shared_ptr<const std::string> VariableStore::Snapshot(uint64_t id,
                                                           rpc::TensorData* dtype_and_shape) const {
  Shard& shard = Find(id);
  std::lock_guard lock(shard.mutex);
  dtype_and_shape->set_dtype(shard.dtype);
  dtype_and_shape->mutable_shape()->Assign(shard.shape.begin(), shard.shape.end());
  return shard.bytes;
}

std::shared_ptr<std::string> VariableStore::Update(rpc::UpdateRequest::Kind kind, uint64_t id,
                                                   rpc::TensorData& value) {
  Shard& shard = Find(id);
  const size_t size = ExpectedBytes(shard.dtype, shard.shape);
  if (value.data().size() != size || value.dtype() != shard.dtype) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                Describe(shard.name, id) + " holds " + std::to_string(size) + " bytes of dtype " +
                    std::to_string(shard.dtype) + ", the update has " +
                    std::to_string(value.data().size()) + " of dtype " +
                    std::to_string(value.dtype()) + "; give a value of the variable's shape");
  }
  if (kind != rpc::UpdateRequest::ASSIGN && shard.dtype != CHORUS_F32) {
    throw Error(CHORUS_UNSUPPORTED, Describe(shard.name, id) +
                                        ": only f32 variables take additions and optimizer "
                                        "updates on a ps");
  }
  if (kind == rpc::UpdateRequest::ASSIGN) {
    auto bytes = std::make_shared<std::string>(std::move(*value.mutable_data()));
    {
      std::lock_guard lock(shard.mutex);
      std::swap(shard.bytes, bytes);
    }
    return bytes.use_count() == 1 ? bytes : nullptr;
  }
  std::lock_guard lock(shard.mutex);
  // A reader still streams the current buffer: write a copy (copy on write).
  if (shard.bytes.use_count() > 1) shard.bytes = std::make_shared<std::string>(*shard.bytes);
  const size_t count = shard.bytes->size() / sizeof(float);
  auto* w = reinterpret_cast<float*>(shard.bytes->data());
  const auto* d = reinterpret_cast<const float*>(value.data().data());
  if (kind == rpc::UpdateRequest::ASSIGN_ADD) {
    for (size_t i = 0; i < count; ++i) w[i] += d[i];
  } else if (kind == rpc::UpdateRequest::ASSIGN_SUB) {
    for (size_t i = 0; i < count; ++i) w[i] -= d[i];
  } else {
    ApplyGradient(shard, d, count);
  }
  return nullptr;
}

// Called with shard.mutex held.
void VariableStore::ApplyGradient(Shard& shard, const float* g, size_t count) {
  rpc::OptimizerConfig config;
  {
    std::shared_lock lock(mutex_);
    if (!has_optimizer_) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "no optimizer on this ps; call ParameterServerStrategy::set_optimizer before "
                  "ApplyGradients");
    }
    config = optimizer_;
  }
  const size_t slot_count = SlotNames(config).size();
  if (shard.slots.size() != slot_count) {
    shard.slots.assign(slot_count, std::vector<float>(count, 0.0f));
  }
  auto* w = reinterpret_cast<float*>(shard.bytes->data());
  const int64_t step = ++shard.step;
  const float lr = config.learning_rate();
  if (config.kind() == "adam") {
    const double t = static_cast<double>(step);
    const double b1 = config.beta_1(), b2 = config.beta_2();
    const float lr_t =
        static_cast<float>(lr * std::sqrt(1.0 - std::pow(b2, t)) / (1.0 - std::pow(b1, t)));
    const float beta_1 = config.beta_1(), beta_2 = config.beta_2(), eps = config.epsilon();
    const float one_minus_b1 = static_cast<float>(1.0 - b1);
    const float one_minus_b2 = static_cast<float>(1.0 - b2);
    float* m = shard.slots[0].data();
    float* v = shard.slots[1].data();
    for (size_t i = 0; i < count; ++i) {
      m[i] = beta_1 * m[i] + one_minus_b1 * g[i];
      v[i] = beta_2 * v[i] + one_minus_b2 * g[i] * g[i];
      w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
    }
    return;
  }
  if (slot_count == 0) {
    for (size_t i = 0; i < count; ++i) w[i] -= lr * g[i];
    return;
  }
  const float momentum = config.momentum();
  float* m = shard.slots[0].data();
  for (size_t i = 0; i < count; ++i) {
    m[i] = momentum * m[i] - lr * g[i];
    w[i] += config.nesterov() ? momentum * m[i] - lr * g[i] : m[i];
  }
}

void VariableStore::ReadSlots(uint64_t id, rpc::SlotState* out) const {
  Shard& shard = Find(id);
  std::vector<std::string> names;
  {
    std::shared_lock lock(mutex_);
    if (has_optimizer_) names = SlotNames(optimizer_);
  }
  std::lock_guard lock(shard.mutex);
  out->set_id(id);
  out->set_step(shard.step);
  for (size_t s = 0; s < names.size(); ++s) {
    out->add_slot_names(names[s]);
    rpc::TensorData* data = out->add_slots();
    data->set_dtype(CHORUS_F32);
    data->mutable_shape()->Assign(shard.shape.begin(), shard.shape.end());
    std::string* bytes = data->mutable_data();
    bytes->assign(shard.bytes->size(), '\0');  // zeros before the first update
    if (s < shard.slots.size()) std::memcpy(bytes->data(), shard.slots[s].data(), bytes->size());
  }
}

void VariableStore::WriteSlots(const rpc::SlotState& state) {
  Shard& shard = Find(state.id());
  std::lock_guard lock(shard.mutex);
  shard.step = state.step();
  shard.slots.clear();
  for (const rpc::TensorData& slot : state.slots()) {
    if (slot.data().size() != shard.bytes->size()) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  Describe(shard.name, state.id()) + ": a slot of the wrong size");
    }
    std::vector<float> values(slot.data().size() / sizeof(float));
    std::memcpy(values.data(), slot.data().data(), slot.data().size());
    shard.slots.push_back(std::move(values));
  }
}

}  // namespace chorus::ps_internal
