#include <chorus/base/error.h>
#include <chorus/distribute/replica_context.h>
#include <chorus/distribute/strategy.h>

#include <any>
#include <exception>
#include <vector>

#include "distribute/packed_reduce.h"
#include "distribute/replica_group.h"

namespace chorus {
namespace {

thread_local Strategy* t_strategy = nullptr;
thread_local ReplicaContext* t_replica = nullptr;

}  // namespace

ReplicaContext* CurrentReplicaContext() { return t_replica; }
Strategy* CurrentStrategy() { return t_strategy; }
bool InCrossReplicaContext() { return t_strategy != nullptr && t_replica == nullptr; }

namespace internal {

ContextGuard::ContextGuard(Strategy* strategy, ReplicaContext* replica)
    : saved_strategy_(t_strategy), saved_replica_(t_replica) {
  t_strategy = strategy;
  t_replica = replica;
}

ContextGuard::~ContextGuard() {
  t_strategy = saved_strategy_;
  t_replica = saved_replica_;
}

}  // namespace internal

ReplicaContext::ReplicaContext(Strategy& strategy, internal::ReplicaGroup& group, int replica_id)
    : strategy_(strategy), group_(group), replica_id_(replica_id) {}

int ReplicaContext::num_replicas_in_sync() const { return strategy_.num_replicas_in_sync(); }

int ReplicaContext::replica_id_in_sync_group() const {
  return strategy_.worker_id() * static_cast<int>(strategy_.devices().size()) + replica_id_;
}

const Device& ReplicaContext::device() const {
  return strategy_.devices()[static_cast<size_t>(replica_id_)];
}

std::any ReplicaContext::MergeCallAny(
    const char* kind, std::any value,
    const std::function<std::any(std::vector<std::any>&)>& merge_fn) {
  if (CurrentReplicaContext() != this) {
    throw Error(CHORUS_INVALID_ARGUMENT, std::string(kind) +
                                             " must be called from the replica function "
                                             "that received this ReplicaContext");
  }
  const double timeout = *strategy_.communication_options().timeout_seconds;
  return group_.Rendezvous(
      replica_id_, kind, std::move(value),
      [&](std::vector<std::any>& values) {
        internal::ContextGuard cross_replica(&strategy_, nullptr);
        return merge_fn(values);
      },
      timeout);
}

std::vector<Tensor> ReplicaContext::all_reduce(chorus_reduce_op op,
                                               const std::vector<Tensor>& values,
                                               const CommunicationOptions& options) {
  const CommunicationOptions merged =
      CommunicationOptions::Merge(strategy_.communication_options(), options).Resolved();
  // Each replica packs and unpacks its own tensors; the rendezvous only checks and reduces.
  const Device& device = strategy_.devices()[static_cast<size_t>(replica_id_)];
  const std::vector<std::vector<size_t>> packs =
      internal::PlanPacks(values, *merged.bytes_per_pack);
  struct Packed {
    const std::vector<Tensor>* tensors;
    internal::ReplicaPacks packs;
    std::exception_ptr error;  // packing failed: raised in the rendezvous, to every replica
  };
  Packed mine{&values, {}, nullptr};
  try {
    mine.packs = internal::PackTensors(values, packs, device);
  } catch (...) {
    mine.error = std::current_exception();  // still join the others, so none waits in vain
  }
  MergeCallAny("all_reduce", std::any(&mine), [&](std::vector<std::any>& all) {
    std::vector<std::vector<Tensor>> inputs;
    std::vector<const internal::ReplicaPacks*> replicas;
    for (auto& v : all) {
      const Packed* packed = std::any_cast<Packed*>(v);
      inputs.push_back(*packed->tensors);
      replicas.push_back(&packed->packs);
    }
    internal::CheckSameLayout(inputs);
    for (auto& v : all) {
      if (const Packed* packed = std::any_cast<Packed*>(v); packed->error) {
        std::rethrow_exception(packed->error);
      }
    }
    strategy_.cross_device_ops().set_timeout_seconds(*merged.timeout_seconds);
    internal::ReducePacks(strategy_.cross_device_ops(), op, replicas);
    return std::any(true);
  });
  return internal::UnpackTensors(mine.packs.outputs, values, packs);
}

Tensor ReplicaContext::all_reduce(chorus_reduce_op op, const Tensor& value,
                                  const CommunicationOptions& options) {
  return all_reduce(op, std::vector<Tensor>{value}, options)[0];
}

Tensor ReplicaContext::all_gather(const Tensor& value, int axis,
                                  const CommunicationOptions& options) {
  (void)options;
  if (axis != 0) {
    throw Error(CHORUS_UNSUPPORTED, "all_gather: only axis 0 is supported in this version, got " +
                                        std::to_string(axis));
  }
  std::any result = MergeCallAny("all_gather", value, [&](std::vector<std::any>& all) {
    std::vector<Tensor> parts;
    for (auto& v : all) parts.push_back(std::any_cast<Tensor>(v));
    const Tensor gathered = strategy_.gather(PerReplica(parts), 0);  // on replica 0's device
    std::vector<Tensor> outputs{gathered};
    for (size_t r = 1; r < parts.size(); ++r) {
      outputs.push_back(gathered.CopyTo(strategy_.devices()[r]));
    }
    return std::any(outputs);
  });
  return std::any_cast<const std::vector<Tensor>&>(result)[static_cast<size_t>(replica_id_)];
}

}  // namespace chorus
