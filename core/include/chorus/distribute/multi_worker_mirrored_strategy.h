// tf.distribute.MultiWorkerMirroredStrategy: one process per worker, each with its local
// devices; replicas = local devices x workers, with global replica ids. Variables are mirrored
// on every replica of every worker and start from the leader's values; gradients and every
// reduce cross the local devices (cross-device ops) and then the workers (a collective:
// core_ring, gloo, ring_grpc, nccl, ...), issued in the same order on every worker.
#ifndef CHORUS_MULTI_WORKER_MIRRORED_STRATEGY_H_
#define CHORUS_MULTI_WORKER_MIRRORED_STRATEGY_H_

#include <chorus/cluster_resolver/cluster_resolver.h>
#include <chorus/collective/communicator.h>
#include <chorus/distribute/strategy.h>

#include <memory>
#include <string>
#include <vector>

namespace chorus {

class JobHealth;
class KvStore;
namespace internal {
class JobRendezvous;
}

// The collective a multi-worker strategy runs on, and why (selection.h).
struct CollectiveSelection {
  std::string name;    // the communicator's primary collective
  std::string source;  // "CHORUS_COMMUNICATION=gloo", "AUTO: shm scores 80 ...", ...
};

class MultiWorkerMirroredStrategy : public Strategy {
 public:
  // cluster_resolver: nullptr = ResolveClusterFromEnvironment() (TF_CONFIG, torchrun, Open MPI,
  // Slurm), a single worker when none is set. local_devices: empty = the registry's default
  // devices (CHORUS_CPU_DEVICES). Every worker must have the same number of local devices.
  // The leader serves the rendezvous store at its address in the cluster; the others connect to
  // it within the time-out. Throws Error naming the problem (a ps or evaluator task, a worker
  // that never arrives, an unknown collective name).
  explicit MultiWorkerMirroredStrategy(std::shared_ptr<ClusterResolver> cluster_resolver = nullptr,
                                       const CommunicationOptions& options = {},
                                       std::vector<Device> local_devices = {},
                                       std::string_view cross_device_ops = "");
  ~MultiWorkerMirroredStrategy() override;

  std::string name() const override { return "MultiWorkerMirroredStrategy"; }
  VariableKind PlacementFor(VariableSynchronization synchronization) const override;
  bool should_checkpoint() const override { return is_leader_; }

  const ClusterResolver* cluster_resolver() const { return resolver_.get(); }
  bool is_leader() const { return is_leader_; }
  // The collective across workers and why it was chosen.
  const CollectiveSelection& collective() const { return collective_; }

 private:
  std::shared_ptr<ClusterResolver> resolver_;
  bool is_leader_ = true;
  CollectiveSelection collective_;
  // The job's server, store and health, shared with whatever else in this process joined it.
  std::shared_ptr<internal::JobRendezvous> rendezvous_;
  std::shared_ptr<KvStore> store_;     // the rendezvous's store, for the communicator
  std::shared_ptr<JobHealth> health_;  // names the worker that breaks the job
};

}  // namespace chorus

#endif  // CHORUS_MULTI_WORKER_MIRRORED_STRATEGY_H_
