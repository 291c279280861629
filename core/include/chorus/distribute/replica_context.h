// ReplicaContext: what the step function sees on each replica (tf.distribute.ReplicaContext),
// and the thread-local current context.
#ifndef CHORUS_REPLICA_CONTEXT_H_
#define CHORUS_REPLICA_CONTEXT_H_

#include <chorus/collective/communication_options.h>
#include <chorus/distribute/values.h>
#include <chorus/runtime/tensor.h>

#include <any>
#include <functional>
#include <vector>

namespace chorus {

class Strategy;
namespace internal {
class ReplicaGroup;
}

class ReplicaContext {
 public:
  ReplicaContext(Strategy& strategy, internal::ReplicaGroup& group, int replica_id);

  // The replica's id among every replica of every worker (worker_id * local replicas + local id).
  int replica_id_in_sync_group() const;
  // The replica's position among this worker's replicas (its device, its slot in PerReplica).
  int local_replica_id() const { return replica_id_; }
  int num_replicas_in_sync() const;
  Strategy& strategy() const { return strategy_; }
  const Device& device() const;

  // Reduces `value` across replicas; every replica gets the result on its own device. MEAN
  // divides by the number of replicas.
  Tensor all_reduce(chorus_reduce_op op, const Tensor& value,
                    const CommunicationOptions& options = {});
  // Several tensors in one fused batch reduce (packed by bytes_per_pack).
  std::vector<Tensor> all_reduce(chorus_reduce_op op, const std::vector<Tensor>& values,
                                 const CommunicationOptions& options = {});
  // Concatenates every replica's value along `axis` (0 only in this version; sizes may differ).
  Tensor all_gather(const Tensor& value, int axis, const CommunicationOptions& options = {});

  // Pauses every replica, runs `merge_fn` once in cross-replica context with each replica's
  // `value` (in replica order), and returns its result to every replica. Every replica must
  // call merge_call the same number of times, in the same order as its other collective calls;
  // a replica that does not is reported, not waited for.
  template <typename R, typename T>
  R merge_call(const std::function<R(Strategy&, const std::vector<T>&)>& merge_fn, const T& value) {
    std::any result = MergeCallAny("merge_call", value, [&](std::vector<std::any>& values) {
      std::vector<T> typed;
      for (auto& v : values) typed.push_back(std::any_cast<T>(v));
      return std::any(merge_fn(strategy_, typed));
    });
    return std::any_cast<R>(result);
  }

  // The untyped rendezvous merge_call and the collectives are built on. `kind` names the call in
  // errors ("merge_call", "all_reduce").
  std::any MergeCallAny(const char* kind, std::any value,
                        const std::function<std::any(std::vector<std::any>&)>& merge_fn);

 private:
  Strategy& strategy_;
  internal::ReplicaGroup& group_;
  int replica_id_;
};

// The current replica context: non-null only inside Strategy::run on a replica thread (and null
// again inside merge_call's merge function, which runs in cross-replica context).
ReplicaContext* CurrentReplicaContext();
// The strategy of the innermost scope() on this thread, or of the replica thread; nullptr when
// there is none.
Strategy* CurrentStrategy();
// True outside any replica function while a strategy is current (tf's in_cross_replica_context).
bool InCrossReplicaContext();

namespace internal {
// Sets the thread's context for a scope; restores the previous one when destroyed.
class ContextGuard {
 public:
  ContextGuard(Strategy* strategy, ReplicaContext* replica);
  ~ContextGuard();
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;

 private:
  Strategy* saved_strategy_;
  ReplicaContext* saved_replica_;
};
}  // namespace internal

}  // namespace chorus

#endif  // CHORUS_REPLICA_CONTEXT_H_
