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
#include "base/socket_util.h"
#include "distribute/default_devices.h"
#include "distribute/replicated_placement.h"

namespace chorus {
namespace {

using std::chrono::milliseconds;

using internal::OrDefaultDevices;

// The host (without an IPv6 address's brackets) and port of a cluster address.
HostPort SplitAddress(const std::string& address) {
  HostPort split;
  if (const std::string problem = ParseHostPort(address, &split); !problem.empty()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "MultiWorkerMirroredStrategy: address '" + address + "' " +
                                             problem +
                                             "; write it as \"host:port\" or \"[IPv6]:port\"");
  }
  return split;
}

// Where the leader's port comes from, by resolver.
std::string WhereThePortIsSet(const ClusterResolver& resolver) {
  const std::string name = resolver.name();
  if (name == "TFConfigClusterResolver") return "TF_CONFIG's cluster";
  if (name == "TorchrunClusterResolver" || name == "OpenMpiClusterResolver") return "MASTER_PORT";
  if (name == "SlurmClusterResolver") return "the SlurmClusterResolver's port base";
  return "the cluster spec";
}

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
  const auto [host, port] = SplitAddress(resolver_->leader_address());
  // Destroyed, the leader's server serves on until the other workers have come (each says hello
  // with its task name) and left, or `timeout` passed: so no worker loses the store while it
  // reads its last keys or learns who broke the job.
  if (is_leader_) {
    try {
      server_ = TcpStoreServer::Start(host, port, timeout, workers - 1);
    } catch (const Error& e) {
      // Fail here, naming the port: the other workers would only see a store that never answers.
      throw Error(e.status(), "MultiWorkerMirroredStrategy (" + resolver_->task_name() +
                                  ", the leader): " + e.what() + " (the leader's port comes from " +
                                  WhereThePortIsSet(*resolver_) + ")");
    }
  }
  store_ = ConnectTcpStore(host, port, timeout);
  AnnounceTcpStoreClient(*store_, resolver_->task_name());
  // Who breaks the job, if one does: a worker that dies or stops answering, the leader included.
  JobHealthOptions health;
  health.host = host;
  health.port = port;
  health.leader_name = resolver_->TaskNameOf(0);
  health.task_name = resolver_->task_name();
  health.timeout = timeout;
  health_ = std::make_shared<JobHealth>(health);
  // A leader found dead or stopped takes the store with it: give the store up at once, before the
  // communicator is aborted (subscriptions run in order), so that no plugin's abort or destroy
  // waits on it for the store's own time-out.
  // (A weak pointer: the store's own goodbye must not wait for the health's end.)
  health_->Subscribe([store = std::weak_ptr<KvStore>(store_),
                      leader = health.leader_name](const JobFailure& failure) {
    const auto alive = store.lock();
    if (failure.worker != leader || !alive) return;
    try {
      AbandonTcpStore(*alive, "rendezvous: the store is given up: " + failure.cause);
    } catch (...) {  // not a tcp store: nothing waits on a leader there
    }
  });

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
  store_->Set("mwms/local_replicas/" + std::to_string(id), ToBytes(std::to_string(local)));
  for (int w = 0; w < workers; ++w) {
    const std::string theirs = from_worker("mwms/local_replicas/", w);
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
  store_->Set("mwms/machine/" + std::to_string(id), ToBytes(machine));
  std::vector<std::string> machines;
  for (int w = 0; w < workers; ++w) {
    machines.push_back(from_worker("mwms/machine/", w));
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
  config.name = "mwms";
  config.timeout_seconds = *communication_options().timeout_seconds;
  // Peers reach this worker at the host of its own cluster address.
  config.address = SplitAddress(resolver_->AddressOf(id)).host;
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
  if (!health_) return;
  // The communicator holds the health too: stop its thread now, before the leader's server goes
  // (which then need not wait for a worker that stopped answering).
  health_->Stop(server_.get());
  // Then the members go: the store (its goodbye), and last the leader's server, which serves on
  // until the other workers have left, bounded by the time-out, so that each of them can still
  // learn who broke the job.
}

VariableKind MultiWorkerMirroredStrategy::PlacementFor(
    VariableSynchronization synchronization) const {
  return internal::ReplicatedPlacement(synchronization);
}

}  // namespace chorus
