#include "distribute/job_rendezvous.h"

#include <chorus/base/error.h>
#include <chorus/rendezvous/job_health.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/rendezvous/rendezvous.h>

#include <cstdio>
#include <map>

#include "base/hmac_sha256.h"

namespace chorus::internal {
namespace {

using std::chrono::milliseconds;

// Where the leader's port comes from, by resolver.
std::string WhereThePortIsSet(const ClusterResolver& resolver) {
  const std::string name = resolver.name();
  if (name == "TFConfigClusterResolver") return "TF_CONFIG's cluster";
  if (name == "TorchrunClusterResolver" || name == "OpenMpiClusterResolver") return "MASTER_PORT";
  if (name == "SlurmClusterResolver") return "the SlurmClusterResolver's port base";
  if (name == "TPUClusterResolver") return "the TPU's worker list";
  return "the cluster spec";
}

// The jobs this process has joined, by leader address and task; never destroyed (a thread may
// join while the process exits).
struct Joined {
  std::mutex mutex;
  std::map<std::string, std::weak_ptr<JobRendezvous>> jobs;
};
Joined& JoinedJobs() {
  static Joined* joined = new Joined;
  return *joined;
}

constexpr const char* kJobIdKey = "job/id";

}  // namespace

HostPort SplitClusterAddress(const std::string& address, const std::string& who) {
  HostPort split;
  if (const std::string problem = ParseHostPort(address, &split); !problem.empty()) {
    throw Error(CHORUS_INVALID_ARGUMENT, who + ": address '" + address + "' " + problem +
                                             "; write it as \"host:port\" or \"[IPv6]:port\"");
  }
  return split;
}

std::shared_ptr<JobRendezvous> JobRendezvous::Join(const ClusterResolver& resolver,
                                                   milliseconds timeout, const std::string& who) {
  const int workers = resolver.num_workers();
  resolver.id_in_cluster();  // throws for a ps or evaluator task
  const std::string key = resolver.leader_address() + "|" + resolver.task_name();
  Joined& joined = JoinedJobs();
  std::lock_guard<std::mutex> lock(joined.mutex);
  if (auto it = joined.jobs.find(key); it != joined.jobs.end()) {
    if (auto alive = it->second.lock()) return alive;
  }
  std::shared_ptr<JobRendezvous> self(new JobRendezvous());
  self->key_ = key;
  const auto [host, port] = SplitClusterAddress(resolver.leader_address(), who);
  self->leader_host_ = host;
  // Destroyed, the leader's server serves on until the other workers have come (each says hello
  // with its task name) and left, or `timeout` passed: so no worker loses the store while it
  // reads its last keys or learns who broke the job.
  if (resolver.is_leader()) {
    try {
      self->server_ = TcpStoreServer::Start(host, port, timeout, workers - 1);
    } catch (const Error& e) {
      // Fail here, naming the port: the other workers would only see a store that never answers.
      throw Error(e.status(), who + " (" + resolver.task_name() + ", the leader): " + e.what() +
                                  " (the leader's port comes from " + WhereThePortIsSet(resolver) +
                                  ")");
    }
  }
  self->store_ = ConnectTcpStore(host, port, timeout);
  AnnounceTcpStoreClient(*self->store_, resolver.task_name());
  // Who breaks the job, if one does: a worker that dies or stops answering, the leader included.
  JobHealthOptions health;
  health.host = host;
  health.port = port;
  health.leader_name = resolver.TaskNameOf(0);
  health.task_name = resolver.task_name();
  health.timeout = timeout;
  self->health_ = std::make_shared<JobHealth>(health);
  // A leader found dead or stopped takes the store with it: give the store up at once, before a
  // communicator is aborted (subscriptions run in order), so that no plugin's abort or destroy
  // waits on it for the store's own time-out. (A weak pointer: the store's own goodbye must not
  // wait for the health's end.)
  self->health_->Subscribe([store = std::weak_ptr<KvStore>(self->store_),
                            leader = health.leader_name](const JobFailure& failure) {
    const auto alive = store.lock();
    if (failure.worker != leader || !alive) return;
    try {
      AbandonTcpStore(*alive, "rendezvous: the store is given up: " + failure.cause);
    } catch (...) {  // not a tcp store: nothing waits on a leader there
    }
  });
  // The job's id, drawn by the leader: the same in every process, new for every job.
  if (resolver.is_leader()) {
    self->store_->Set(kJobIdKey, ToBytes(RandomHex(8)));
  }
  try {
    self->id_ = ToString(self->store_->Get(kJobIdKey, timeout));
  } catch (const Error& e) {
    if (e.status() != CHORUS_TIMEOUT) throw;
    throw Error(CHORUS_TIMEOUT, who + " (" + resolver.task_name() + "): the leader (" +
                                    resolver.TaskNameOf(0) +
                                    ") did not give the job its id on the " +
                                    self->store_->Describe() + " in time: " + e.what());
  }
  joined.jobs[key] = self;
  self->listed_ = true;
  return self;
}

JobRendezvous::~JobRendezvous() {
  // (One that failed to join was never listed, and Join still holds the lock.)
  if (listed_) {
    Joined& joined = JoinedJobs();
    std::lock_guard<std::mutex> lock(joined.mutex);
    if (auto it = joined.jobs.find(key_); it != joined.jobs.end() && it->second.expired()) {
      joined.jobs.erase(it);
    }
  }
  // The health holds a connection of its own: stop its thread now, before the leader's server
  // goes (which then need not wait for a worker that stopped answering). Then the store goes (its
  // goodbye, once nothing else holds it), and last the leader's server, which serves on until
  // the other workers have left, bounded by the time-out, so that each of them can still learn
  // who broke the job.
  if (health_) health_->Stop(server_.get());
  store_.reset();
  health_.reset();
  server_.reset();
}

int JobRendezvous::NextUse() {
  std::lock_guard<std::mutex> lock(mutex_);
  return uses_++;
}

}  // namespace chorus::internal
