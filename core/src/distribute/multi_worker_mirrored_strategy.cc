#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/host_identity.h>
#include <chorus/distribute/multi_worker_mirrored_strategy.h>
#include <chorus/rendezvous/job_health.h>
#include <chorus/rendezvous/rendezvous.h>

#include <chrono>
#include <sstream>

#include "base/launcher_watch.h"
#include "base/logging.h"
#include "distribute/default_devices.h"
#include "distribute/job_rendezvous.h"
#include "distribute/replicated_placement.h"

namespace chorus {
namespace {

using std::chrono::milliseconds;

using internal::OrDefaultDevices;

milliseconds TimeoutOf(const CommunicationOptions& options) {
  return milliseconds(static_cast<int64_t>(*options.timeout_seconds * 1000));
}

}  // namespace

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(
    std::shared_ptr<ClusterResolver> cluster_resolver, const CommunicationOptions& options,
    std::vector<Device> local_devices, std::string_view cross_device_ops)
    : Strategy(OrDefaultDevices(std::move(local_devices)), cross_device_ops, options),
      resolver_(std::move(cluster_resolver)) {
  WatchLauncher();  // a worker of a chorus-launch that died stops (base/launcher_watch.h)
  if (!resolver_) resolver_ = ResolveClusterFromEnvironment();
  if (!resolver_) {
    Log().info(
        "MultiWorkerMirroredStrategy: no cluster (TF_CONFIG, torchrun, Open MPI or Slurm "
        "variables); one worker");
    return;
  }
  const int workers = resolver_->num_workers();
  const int id = resolver_->id_in_cluster();  // throws for a ps or evaluator task
  is_leader_ = resolver_->is_leader();
  // One worker, or none listed: a resolver of this host alone (TPUClusterResolver("local")).
  if (workers <= 1) return;

  const milliseconds timeout = TimeoutOf(communication_options());
  // The job's store, server and health: those InitializeTpuSystem joined already, if it did.
  rendezvous_ = internal::JobRendezvous::Join(*resolver_, timeout, name());
  store_ = rendezvous_->store();
  health_ = rendezvous_->health();
  // A second strategy on the same job (after the first, on every worker) keeps its keys apart.
  const int use = rendezvous_->NextUse();
  const std::string scope = use == 0 ? "mwms" : "mwms" + std::to_string(use);

  // Until the communicator exists, a failure the health finds (a worker that died or stopped
  // during the start-up, having joined) ends every wait of the start-up at once, naming it: they
  // all wait on the store, this worker's own and the collectives' alike. The communicator's own
  // subscription takes over once it exists. (A constructor that throws leaves the subscription
  // to the health's end.)
  const JobHealth::Subscription start_up =
      health_->Subscribe([store = std::weak_ptr<KvStore>(store_)](const JobFailure& failure) {
        const auto alive = store.lock();
        if (!alive) return;
        try {
          AbandonTcpStore(*alive, "the job failed during its start-up: " + failure.cause);
        } catch (...) {  // not a tcp store
        }
      });
  // Worker w's value of a start-up key; one that never writes it did not join.
  const auto from_worker = [&](const std::string& key, int w) {
    try {
      return ToString(store_->Get(key + std::to_string(w), timeout));
    } catch (const Error& e) {
      if (e.status() != CHORUS_TIMEOUT) throw;  // an abandoned store names its cause
      std::ostringstream seconds;
      seconds << *communication_options().timeout_seconds;
      throw Error(CHORUS_TIMEOUT,
                  "MultiWorkerMirroredStrategy (" + resolver_->task_name() +
                      "): " + resolver_->TaskNameOf(w) + " did not join within " + seconds.str() +
                      " s (waited for '" + key + std::to_string(w) + "' on the " +
                      store_->Describe() +
                      "; is every worker started, with the same job? CHORUS_TIMEOUT_SECONDS or "
                      "CommunicationOptions.timeout_seconds say how long to wait)");
    }
  };

  // Every worker must have as many replicas, or the global replica ids and MEAN go wrong.
  const auto local = static_cast<int64_t>(devices().size());
  store_->Set(scope + "/local_replicas/" + std::to_string(id), ToBytes(std::to_string(local)));
  for (int w = 0; w < workers; ++w) {
    const std::string theirs = from_worker(scope + "/local_replicas/", w);
    if (theirs != std::to_string(local)) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "MultiWorkerMirroredStrategy: " + resolver_->TaskNameOf(w) + " has " + theirs +
                      " local devices but " + resolver_->task_name() + " has " +
                      std::to_string(local) +
                      "; give every worker the same number (CHORUS_CPU_DEVICES, --replicas)");
    }
  }

  // How the workers sit on hosts (host name and boot id, or CHORUS_HOST_ID): what the
  // collectives' scores look at (shared memory on one host, composition across hosts).
  const std::string machine = HostIdentity();
  store_->Set(scope + "/machine/" + std::to_string(id), ToBytes(machine));
  std::vector<std::string> machines;
  for (int w = 0; w < workers; ++w) {
    machines.push_back(from_worker(scope + "/machine/", w));
  }
  // The cross-worker step moves host memory: the local result is staged there (cross_device_ops).
  const JobShape shape = JobShape::FromHostIds(machines, "host");
  const CollectivePlan plan =
      PlanCollectives(Registry::Global(), communication_options().implementation, shape);
  collective_ = {plan.collectives.front(), plan.source};
  CommunicatorConfig config;
  config.rank = id;
  config.size = workers;
  config.store = store_;
  config.name = scope;
  config.timeout_seconds = *communication_options().timeout_seconds;
  // Peers reach this worker at the host of its own cluster address.
  config.address = internal::SplitClusterAddress(resolver_->AddressOf(id), name()).host;
  config.host_id = machine;
  for (int w = 0; w < workers; ++w) config.task_names.push_back(resolver_->TaskNameOf(w));
  config.health = health_;
  Log().info(
      "MultiWorkerMirroredStrategy: {} of {} workers ({}), {} local replicas, collective {} "
      "({})",
      resolver_->task_name(), workers, shape.Describe(), local, collective_.name,
      collective_.source);
  AttachCommunicator(Communicator::Create(Registry::Global(), plan, config));
  health_->Unsubscribe(start_up);
}

MultiWorkerMirroredStrategy::~MultiWorkerMirroredStrategy() {
  StopPendingWork(name());
  // The job's rendezvous goes with its last user (internal::JobRendezvous): this strategy, or
  // the TPU system that joined the job first.
  health_.reset();
  store_.reset();
  rendezvous_.reset();
}

VariableKind MultiWorkerMirroredStrategy::PlacementFor(
    VariableSynchronization synchronization) const {
  return internal::ReplicatedPlacement(synchronization);
}

}  // namespace chorus
