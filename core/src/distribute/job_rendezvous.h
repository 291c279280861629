// The rendezvous of a job of several workers in this process: the leader's store server, this
// worker's connection to it, the job's health and its id. Whatever in one process joins the same
// job shares one (InitializeTpuSystem's PJRT client, then the TPUStrategy over it), so a job has
// one server however many parts of the process need its store.
#ifndef CHORUS_DISTRIBUTE_JOB_RENDEZVOUS_H_
#define CHORUS_DISTRIBUTE_JOB_RENDEZVOUS_H_

#include <chorus/cluster_resolver/cluster_resolver.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "base/socket_util.h"

namespace chorus {

class JobHealth;
class KvStore;
class TcpStoreServer;

namespace internal {

// The host (without an IPv6 address's brackets) and port of a cluster address; throws
// Error(INVALID_ARGUMENT) naming `who` and the address when it is not "host:port".
HostPort SplitClusterAddress(const std::string& address, const std::string& who);

class JobRendezvous {
 public:
  // Joins the job of `resolver` (num_workers() > 1): the object already joined for the same
  // leader address and task while one lives in this process, else a new one (the leader starts
  // the server at its cluster address, everyone connects within `timeout`, says hello by task
  // name and learns the job id the leader drew). `who` names the caller in errors
  // ("MultiWorkerMirroredStrategy", "InitializeTpuSystem").
  static std::shared_ptr<JobRendezvous> Join(const ClusterResolver& resolver,
                                             std::chrono::milliseconds timeout,
                                             const std::string& who);
  ~JobRendezvous();
  JobRendezvous(const JobRendezvous&) = delete;
  JobRendezvous& operator=(const JobRendezvous&) = delete;

  const std::shared_ptr<KvStore>& store() const { return store_; }
  const std::shared_ptr<JobHealth>& health() const { return health_; }
  const std::string& id() const { return id_; }
  const std::string& leader_host() const { return leader_host_; }
  // 0 for the first user that asks, then 1, 2, ...: every worker creates its users (strategies)
  // in the same order, so a user's keys can be scoped by it and never meet an earlier user's.
  int NextUse();

 private:
  JobRendezvous() = default;
  std::string key_;      // leader address and task name, for Join's reuse
  bool listed_ = false;  // in Join's list
  std::string leader_host_;
  std::string id_;
  std::mutex mutex_;
  int uses_ = 0;
  std::unique_ptr<TcpStoreServer> server_;  // the leader's; outlives the two below
  std::shared_ptr<KvStore> store_;
  std::shared_ptr<JobHealth> health_;
};

}  // namespace internal
}  // namespace chorus

#endif  // CHORUS_DISTRIBUTE_JOB_RENDEZVOUS_H_
