// tf.distribute.Strategy: the base of OneDeviceStrategy, MirroredStrategy and
// CentralStorageStrategy (see strategies.h).
#ifndef CHORUS_STRATEGY_H_
#define CHORUS_STRATEGY_H_

#include <chorus/collective/communication_options.h>
#include <chorus/collective/cross_device_ops.h>
#include <chorus/distribute/dataset.h>
#include <chorus/distribute/replica_context.h>
#include <chorus/distribute/values.h>
#include <chorus/distribute/variable.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace chorus {

class Communicator;

namespace internal {
class ReplicaGroup;

// What run() passes to replica i for each argument: component i of a distributed value, the
// argument itself otherwise.
inline const Tensor& ForReplica(const PerReplica& value, int replica) {
  return value[static_cast<size_t>(replica)];
}
inline const Batch& ForReplica(const DistributedBatch& value, int replica) {
  return value.replicas.at(static_cast<size_t>(replica));
}
template <typename T>
const T& ForReplica(const T& value, int) {
  return value;
}
}  // namespace internal

// How a strategy places a variable's copies.
enum class VariableKind {
  kPlain,       // one copy, no strategy
  kMirrored,    // ON_WRITE: one copy per replica device, kept identical
  kSyncOnRead,  // ON_READ: one copy per replica device, aggregated when read across replicas
  kCentral,     // ON_WRITE under CentralStorage: one copy on the parameter device
};

class Strategy;

// tf.distribute.StrategyExtended.
class StrategyExtended {
 public:
  explicit StrategyExtended(Strategy& strategy) : strategy_(strategy) {}
  // Calls fn(copy, index) for every copy of `variable`, in cross-replica context; index is the
  // copy's position in variable.components().
  void update(const Variable& variable,
              const std::function<void(const Tensor& copy, size_t index)>& fn) const;
  // While the returned guard lives, variables created in this thread are placed like
  // `variable` (tf's colocate_vars_with).
  [[nodiscard]] std::shared_ptr<void> colocate_vars_with(const Variable& variable) const;
  bool variable_created_in_scope(const Variable& variable) const;
  // Devices variables live on: the replica devices, or the parameter device.
  std::vector<Device> parameter_devices() const;
  const std::vector<Device>& worker_devices() const;

 private:
  Strategy& strategy_;
};

class Strategy {
 public:
  virtual ~Strategy();
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  // "OneDeviceStrategy", "MirroredStrategy", "CentralStorageStrategy".
  virtual std::string name() const = 0;

  // While the returned guard lives, this strategy is current on this thread: variables created
  // here are distributed by it.
  [[nodiscard]] std::shared_ptr<void> scope();

  // Replicas of every worker together.
  int num_replicas_in_sync() const { return static_cast<int>(devices_.size()) * num_workers_; }
  // This worker's replicas' (compute) devices, in replica order.
  const std::vector<Device>& devices() const { return devices_; }
  // Workers in sync (1 except for MultiWorkerMirroredStrategy) and this one's id among them.
  int num_workers() const { return num_workers_; }
  int worker_id() const { return worker_id_; }
  // The collective across workers; nullptr with one worker.
  Communicator* communicator() const { return communicator_.get(); }
  // `value` as the leader (worker 0) has it, on value's device: how initial values and
  // ONLY_FIRST_REPLICA writes agree across workers. The value itself with one worker.
  Tensor BroadcastFromLeader(const Tensor& value) const;
  // Whether this worker writes checkpoints (tf's should_checkpoint): every worker takes part in
  // a save (reading SyncOnRead variables needs every worker), only these write files.
  virtual bool should_checkpoint() const { return true; }
  CrossDeviceOps& cross_device_ops() const { return *cross_device_ops_; }
  const CommunicationOptions& communication_options() const { return options_; }
  StrategyExtended& extended() { return extended_; }

  // Runs fn(ReplicaContext&, args for this replica...) once per replica, each on its own thread,
  // and waits. A PerReplica or DistributedBatch argument gives each replica its component. The
  // result: a PerReplica when fn returns a Tensor, a std::vector of fn's results otherwise,
  // nothing for void. The first replica's exception is rethrown after every replica stopped.
  template <typename Fn, typename... Args>
  auto run(Fn&& fn, const Args&... args);

  // Cross-replica reduce of a per-replica value. With an axis, the reduction also runs along
  // that axis, and MEAN divides by the total number of elements along it over every replica
  // (right for uneven batches). The result lives on the first replica's device.
  Tensor reduce(chorus_reduce_op op, const PerReplica& value, std::optional<int> axis = {}) const;
  // Concatenates the replicas' values along `axis` (0 only in this version).
  Tensor gather(const PerReplica& value, int axis) const;
  std::vector<Tensor> experimental_local_results(const PerReplica& value) const;
  std::vector<Tensor> experimental_local_results(const Variable& variable) const;

  // `dataset` batched by the global batch, each batch split over the replicas (of every worker);
  // `options` (tf.distribute.InputOptions) say whether the replicas' slices are copied to their
  // devices and how many steps DistributedDataset::MakeIterator prepares ahead.
  DistributedDataset experimental_distribute_dataset(const Dataset& dataset) const;
  DistributedDataset experimental_distribute_dataset(const Dataset& dataset,
                                                     const InputOptions& options) const;
  DistributedDataset distribute_datasets_from_function(
      const std::function<Dataset(const InputContext&)>& dataset_fn) const;
  DistributedDataset distribute_datasets_from_function(
      const std::function<Dataset(const InputContext&)>& dataset_fn,
      const InputOptions& options) const;

  // How this strategy places a new variable (kPlain never: that is for no strategy).
  virtual VariableKind PlacementFor(VariableSynchronization synchronization) const = 0;
  // Devices of a variable of that kind.
  virtual std::vector<Device> DevicesFor(VariableKind kind) const;
  // The parameter device (CentralStorage), or the first replica device.
  virtual Device parameter_device() const { return devices_.front(); }

  // The untyped core of run(): body(context) on each replica thread.
  void RunReplicas(const std::function<void(ReplicaContext&)>& body);

 protected:
  Strategy(std::vector<Device> devices, std::string_view cross_device_ops_name,
           const CommunicationOptions& options);
  // Makes reductions, gathers and broadcasts span every worker through `communicator` (whose
  // rank is the worker id). Called once by a multi-worker strategy's constructor.
  void AttachCommunicator(std::unique_ptr<Communicator> communicator);
  // Work still in flight on other threads (a collective, a cross-device op) is aborted (the
  // plugins' waits return CHORUS_ABORTED) and waited for, up to 10 s; what does not return by
  // then is leaked with a logged error rather than destroyed under a running operation. The
  // destructors call it first. `who` names the strategy in the messages.
  void StopPendingWork(const std::string& who);

 private:
  int num_workers_ = 1;
  int worker_id_ = 0;
  std::unique_ptr<Communicator> communicator_;
  std::vector<Device> devices_;
  std::unique_ptr<CrossDeviceOps> cross_device_ops_;
  CommunicationOptions options_;
  std::unique_ptr<internal::ReplicaGroup> group_;
  StrategyExtended extended_;
};

template <typename Fn, typename... Args>
auto Strategy::run(Fn&& fn, const Args&... args) {
  using Result =
      std::decay_t<decltype(fn(std::declval<ReplicaContext&>(), internal::ForReplica(args, 0)...))>;
  if constexpr (std::is_void_v<Result>) {
    RunReplicas([&](ReplicaContext& ctx) {
      fn(ctx, internal::ForReplica(args, ctx.local_replica_id())...);
    });
  } else {
    std::vector<Result> results(devices_.size());
    RunReplicas([&](ReplicaContext& ctx) {
      const int id = ctx.local_replica_id();
      results[static_cast<size_t>(id)] = fn(ctx, internal::ForReplica(args, id)...);
    });
    if constexpr (std::is_same_v<Result, Tensor>) {
      return PerReplica(std::move(results));
    } else {
      return results;
    }
  }
}

}  // namespace chorus

#endif  // CHORUS_STRATEGY_H_
