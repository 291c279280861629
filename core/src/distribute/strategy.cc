#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>
#include <chorus/distribute/strategy.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "base/logging.h"
#include "distribute/replica_group.h"

namespace chorus {

Strategy::Strategy(std::vector<Device> devices, std::string_view cross_device_ops_name,
                   const CommunicationOptions& options)
    : devices_(std::move(devices)), options_(options.Resolved()), extended_(*this) {
  if (devices_.empty())
    throw Error(CHORUS_INVALID_ARGUMENT, "a strategy needs at least one device");
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (!devices_[i].enumerator || devices_[i].index >= devices_[i].enumerator->count()) {
      throw Error(CHORUS_INVALID_ARGUMENT, "replica device " + std::to_string(i) +
                                               " is undefined; take devices from a registry");
    }
    for (size_t j = 0; j < i; ++j) {
      if (devices_[i] == devices_[j]) {
        throw Error(CHORUS_INVALID_ARGUMENT,
                    "device " + devices_[i].name() + " is given twice; give each replica its own");
      }
    }
  }
  const Registry& registry = Registry::Global();
  const auto selection = SelectCrossDeviceOps(registry, cross_device_ops_name, devices_);
  cross_device_ops_ = CrossDeviceOps::Create(registry, selection.names, devices_);
  cross_device_ops_->set_timeout_seconds(*options_.timeout_seconds);
  group_ = std::make_unique<internal::ReplicaGroup>(static_cast<int>(devices_.size()));
}

// name() is pure virtual, and the derived part is gone by now.
Strategy::~Strategy() { StopPendingWork("the strategy"); }

void Strategy::StopPendingWork(const std::string& who) {
  constexpr auto kGrace = std::chrono::seconds(10);
  const std::string reason = who + " was destroyed while the operation was in flight";
  if (communicator_ && communicator_->in_flight() > 0) {
    communicator_->Abort(CHORUS_ABORTED, reason);
    if (!communicator_->WaitIdle(kGrace)) {
      Log().error(
          "{}: a collective did not return within 10 s of its abort; its communicator "
          "is leaked rather than destroyed under it",
          who);
      (void)communicator_.release();
    }
  }
  if (cross_device_ops_ && cross_device_ops_->in_flight() > 0) {
    cross_device_ops_->Abort(reason);
    if (!cross_device_ops_->WaitIdle(kGrace)) {
      Log().error(
          "{}: a cross-device op did not return within 10 s of its abort; the "
          "cross-device ops are leaked rather than destroyed under it",
          who);
      (void)cross_device_ops_.release();
    }
  }
}

void Strategy::AttachCommunicator(std::unique_ptr<Communicator> communicator) {
  num_workers_ = communicator->size();
  worker_id_ = communicator->rank();
  communicator_ = std::move(communicator);
  cross_device_ops_->set_cross_worker(communicator_.get());
}

Tensor Strategy::BroadcastFromLeader(const Tensor& value) const {
  if (communicator_ == nullptr) return value;
  std::vector<unsigned char> host(value.bytes());
  if (!host.empty()) value.CopyToHost(host.data());
  communicator_->Broadcast(host.data(), static_cast<size_t>(value.num_elements()), value.dtype(),
                           0);
  Tensor out(value.device(), value.dtype(), value.shape());
  if (!host.empty()) out.CopyFromHost(host.data());
  return out;
}

std::shared_ptr<void> Strategy::scope() {
  Strategy* current = CurrentStrategy();
  if (current != nullptr && current != this) {
    throw Error(CHORUS_INVALID_ARGUMENT, "cannot enter the scope of " + name() +
                                             " inside the scope of another strategy (" +
                                             current->name() + "); leave that scope first");
  }
  return std::make_shared<internal::ContextGuard>(this, CurrentReplicaContext());
}

void Strategy::RunReplicas(const std::function<void(ReplicaContext&)>& body) {
  if (CurrentReplicaContext() != nullptr) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "run() was called inside a replica function; call it in cross-replica context");
  }
  group_->Run([&](int replica) {
    ReplicaContext context(*this, *group_, replica);
    internal::ContextGuard guard(this, &context);
    body(context);
  });
}

std::vector<Device> Strategy::DevicesFor(VariableKind kind) const {
  if (kind == VariableKind::kCentral) return {parameter_device()};
  return devices_;
}

namespace {

void RequireComponents(const PerReplica& value, size_t replicas, const char* what) {
  if (value.size() != replicas) {
    throw Error(CHORUS_INVALID_ARGUMENT, std::string(what) + ": the value has " +
                                             std::to_string(value.size()) + " components for " +
                                             std::to_string(replicas) + " replicas");
  }
}

// Reduces along axis `axis` of an f32 tensor on the host: out has the shape without that axis.
std::vector<float> ReduceAlongAxis(const Tensor& t, size_t axis, chorus_reduce_op op,
                                   Shape* out_shape) {
  const Shape& shape = t.shape();
  if (axis >= shape.size()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "reduce: axis " + std::to_string(axis) +
                                             " is out of range for shape " + ShapeString(shape));
  }
  *out_shape = shape;
  out_shape->erase(out_shape->begin() + static_cast<std::ptrdiff_t>(axis));
  const int64_t outer =
      std::accumulate(shape.begin(), shape.begin() + axis, int64_t{1}, std::multiplies<>());
  const int64_t inner =
      std::accumulate(shape.begin() + axis + 1, shape.end(), int64_t{1}, std::multiplies<>());
  const int64_t length = shape[axis];
  const std::vector<float> in = t.ToVector();
  std::vector<float> out(static_cast<size_t>(outer * inner));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      float acc = op == CHORUS_REDUCE_PROD  ? 1.0f
                  : op == CHORUS_REDUCE_MIN ? std::numeric_limits<float>::infinity()
                  : op == CHORUS_REDUCE_MAX ? -std::numeric_limits<float>::infinity()
                                            : 0.0f;
      for (int64_t k = 0; k < length; ++k) {
        const float x = in[static_cast<size_t>((o * length + k) * inner + i)];
        acc = op == CHORUS_REDUCE_PROD  ? acc * x
              : op == CHORUS_REDUCE_MIN ? std::min(acc, x)
              : op == CHORUS_REDUCE_MAX ? std::max(acc, x)
                                        : acc + x;
      }
      out[static_cast<size_t>(o * inner + i)] = acc;
    }
  }
  return out;
}

// Concatenates every worker's `local` along axis 0 (workers' row counts may differ): the row
// counts are gathered first, then every part padded to the largest.
Tensor GatherAcrossWorkers(Communicator& communicator, const Tensor& local) {
  const auto workers = static_cast<size_t>(communicator.size());
  const int64_t row_elements = local.dim(0) > 0 ? local.num_elements() / local.dim(0) : 0;
  int64_t my_rows = local.dim(0);
  std::vector<int64_t> rows(workers);
  communicator.AllGather(&my_rows, rows.data(), 1, CHORUS_I64);
  int64_t max_rows = 0, total_rows = 0;
  for (int64_t r : rows) {
    max_rows = std::max(max_rows, r);
    total_rows += r;
  }
  // Elements of one row, for the padded exchange; a worker with 0 rows still knows the row size
  // from the shape.
  Shape rest(local.shape().begin() + 1, local.shape().end());
  const int64_t per_row =
      row_elements > 0 ? row_elements
                       : std::accumulate(rest.begin(), rest.end(), int64_t{1}, std::multiplies<>());
  const size_t element = chorus_dtype_size(local.dtype());
  const size_t block = static_cast<size_t>(max_rows * per_row) * element;
  std::vector<unsigned char> mine(block), all(block * workers);
  if (local.bytes() > 0) local.CopyToHost(mine.data());
  communicator.AllGather(mine.data(), all.data(), block / element, local.dtype());
  std::vector<unsigned char> packed;
  packed.reserve(static_cast<size_t>(total_rows * per_row) * element);
  for (size_t w = 0; w < workers; ++w) {
    const auto* begin = all.data() + w * block;
    packed.insert(packed.end(), begin, begin + static_cast<size_t>(rows[w] * per_row) * element);
  }
  Shape shape = local.shape();
  shape[0] = total_rows;
  Tensor out(local.device(), local.dtype(), shape);
  if (!packed.empty()) out.CopyFromHost(packed.data());
  return out;
}

}  // namespace

Tensor Strategy::reduce(chorus_reduce_op op, const PerReplica& value,
                        std::optional<int> axis) const {
  RequireComponents(value, devices_.size(), "reduce");
  if (!axis) {
    Tensor out(devices_.front(), value[0].dtype(), value[0].shape());
    ReduceSpec spec;
    spec.dtype = value[0].dtype();
    spec.count = static_cast<size_t>(value[0].num_elements());
    for (size_t r = 0; r < value.size(); ++r) {
      if (value[r].shape() != value[0].shape() || value[r].dtype() != value[0].dtype()) {
        throw Error(CHORUS_INVALID_ARGUMENT, "reduce: replica " + std::to_string(r) +
                                                 "'s value is " + ShapeString(value[r].shape()) +
                                                 ", replica 0's " + ShapeString(value[0].shape()));
      }
      const Tensor local =
          value[r].device() == devices_[r] ? value[r] : value[r].CopyTo(devices_[r]);
      spec.inputs.push_back(local.buffer());
    }
    spec.outputs = {out.buffer()};
    cross_device_ops_->Reduce(op, spec);
    return out;
  }
  // Along an axis: each replica reduces its own rows, then the partial results are combined.
  // MEAN divides by the rows of every replica together, so uneven batches weigh right.
  if (*axis < 0) throw Error(CHORUS_INVALID_ARGUMENT, "reduce: axis must be >= 0");
  const chorus_reduce_op local_op = op == CHORUS_REDUCE_MEAN ? CHORUS_REDUCE_SUM : op;
  Shape out_shape;
  std::vector<float> total;
  int64_t rows = 0;
  for (size_t r = 0; r < value.size(); ++r) {
    Shape shape;
    std::vector<float> part =
        ReduceAlongAxis(value[r], static_cast<size_t>(*axis), local_op, &shape);
    rows += value[r].dim(static_cast<size_t>(*axis));
    if (r == 0) {
      out_shape = shape;
      total = part;
      continue;
    }
    if (shape != out_shape) {
      throw Error(CHORUS_INVALID_ARGUMENT, "reduce: replica " + std::to_string(r) + " reduces to " +
                                               ShapeString(shape) + ", replica 0 to " +
                                               ShapeString(out_shape));
    }
    for (size_t i = 0; i < total.size(); ++i) {
      const float x = part[i];
      total[i] = local_op == CHORUS_REDUCE_PROD  ? total[i] * x
                 : local_op == CHORUS_REDUCE_MIN ? std::min(total[i], x)
                 : local_op == CHORUS_REDUCE_MAX ? std::max(total[i], x)
                                                 : total[i] + x;
    }
  }
  if (communicator_ != nullptr) {  // combine the workers' partial results and row counts
    communicator_->AllReduce(total.data(), total.data(), total.size(), CHORUS_F32, local_op);
    communicator_->AllReduce(&rows, &rows, 1, CHORUS_I64, CHORUS_REDUCE_SUM);
  }
  if (op == CHORUS_REDUCE_MEAN) {
    for (float& x : total) x = rows > 0 ? x / static_cast<float>(rows) : 0.0f;
  }
  return Tensor::FromVector(devices_.front(), out_shape, total);
}

Tensor Strategy::gather(const PerReplica& value, int axis) const {
  RequireComponents(value, devices_.size(), "gather");
  if (axis != 0) {
    throw Error(CHORUS_UNSUPPORTED,
                "gather: only axis 0 is supported in this version, got " + std::to_string(axis));
  }
  Shape shape = value[0].shape();
  if (shape.empty()) throw Error(CHORUS_INVALID_ARGUMENT, "gather: values must have rank >= 1");
  int64_t rows = 0;
  std::vector<chorus_buffer> inputs;
  std::vector<size_t> counts;
  std::vector<Tensor> locals;
  for (size_t r = 0; r < value.size(); ++r) {
    Shape rest(value[r].shape().begin() + 1, value[r].shape().end());
    if (value[r].shape().empty() || rest != Shape(shape.begin() + 1, shape.end()) ||
        value[r].dtype() != value[0].dtype()) {
      throw Error(CHORUS_INVALID_ARGUMENT, "gather: replica " + std::to_string(r) + "'s value is " +
                                               ShapeString(value[r].shape()) +
                                               ", incompatible with replica 0's " +
                                               ShapeString(shape));
    }
    rows += value[r].dim(0);
    locals.push_back(value[r].device() == devices_[r] ? value[r] : value[r].CopyTo(devices_[r]));
    inputs.push_back(locals.back().buffer());
    counts.push_back(static_cast<size_t>(value[r].num_elements()));
  }
  shape[0] = rows;
  Tensor out(devices_.front(), value[0].dtype(), shape);
  cross_device_ops_->AllGather(value[0].dtype(), inputs, counts, {out.buffer()});
  return communicator_ == nullptr ? out : GatherAcrossWorkers(*communicator_, out);
}

std::vector<Tensor> Strategy::experimental_local_results(const PerReplica& value) const {
  return value.values();
}

std::vector<Tensor> Strategy::experimental_local_results(const Variable& variable) const {
  return variable.components();
}

DistributedDataset Strategy::experimental_distribute_dataset(const Dataset& dataset) const {
  return experimental_distribute_dataset(dataset, InputOptions{});
}

DistributedDataset Strategy::experimental_distribute_dataset(const Dataset& dataset,
                                                             const InputOptions& options) const {
  const auto local = static_cast<int64_t>(devices_.size());
  return DistributedDataset::FromGlobalBatches(dataset, devices_, worker_id_ * local,
                                               local * num_workers_, options);
}

DistributedDataset Strategy::distribute_datasets_from_function(
    const std::function<Dataset(const InputContext&)>& dataset_fn) const {
  return distribute_datasets_from_function(dataset_fn, InputOptions{});
}

DistributedDataset Strategy::distribute_datasets_from_function(
    const std::function<Dataset(const InputContext&)>& dataset_fn,
    const InputOptions& options) const {
  const InputContext context(num_workers_, worker_id_, num_replicas_in_sync());
  return DistributedDataset::FromPerReplicaBatches(dataset_fn(context), devices_, options);
}

// ---- StrategyExtended ----------------------------------------------------------------------

void StrategyExtended::update(const Variable& variable,
                              const std::function<void(const Tensor&, size_t)>& fn) const {
  if (CurrentReplicaContext() != nullptr) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "extended().update() must be called in cross-replica context; from a replica "
                "function, call it inside merge_call");
  }
  if (!variable_created_in_scope(variable)) {
    throw Error(CHORUS_INVALID_ARGUMENT, "variable '" + variable.name() +
                                             "' was not created in the scope of this " +
                                             strategy_.name());
  }
  internal::ContextGuard cross_replica(&strategy_, nullptr);
  const auto& components = variable.components();
  for (size_t i = 0; i < components.size(); ++i) fn(components[i], i);
}

bool StrategyExtended::variable_created_in_scope(const Variable& variable) const {
  return variable.defined() && variable.strategy() == &strategy_;
}

std::vector<Device> StrategyExtended::parameter_devices() const {
  return strategy_.DevicesFor(strategy_.PlacementFor(VariableSynchronization::kOnWrite));
}

const std::vector<Device>& StrategyExtended::worker_devices() const { return strategy_.devices(); }

}  // namespace chorus
