// RankHealth: which rank broke a torch job. A collective sees only its neighbours, so a survivor
// would otherwise name the neighbour that passed the failure on ("rank 0 gave up"). chorus's own
// jobs learn it from their TCP store server (chorus/rendezvous/job_health.h); under PyTorch the
// store is torch's, so the ranks tell each other through it instead:
//   - each rank publishes its process id and start time; a rank on the same host whose process
//     no longer exists (or is a zombie, or is another process under a reused id) died;
//   - each rank adds to a heartbeat counter in the store twice a second; a rank whose counter
//     stands still for a few beats stopped answering (died on another host, stopped, hangs).
// A rank that asks publishes that it saw a failure, so that when it then ends (its program gives
// up) the others do not take it for the cause. Asked only after an operation failed, so a healthy
// job pays for the heartbeat alone.
#ifndef CHORUS_BINDINGS_PYTORCH_RANK_HEALTH_H_
#define CHORUS_BINDINGS_PYTORCH_RANK_HEALTH_H_

#include <chorus/rendezvous/kv_store.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace chorus::torch_backend {

class RankHealth {
 public:
  // Publishes this rank's process under `scope` in `store` and reads every rank's (within
  // `timeout`), then starts the heartbeat. `host_ids`: every rank's host; `names`: how messages
  // name each rank.
  RankHealth(std::shared_ptr<KvStore> store, std::string scope, int rank,
             std::vector<std::string> host_ids, std::vector<std::string> names,
             std::chrono::milliseconds timeout);
  ~RankHealth();
  RankHealth(const RankHealth&) = delete;
  RankHealth& operator=(const RankHealth&) = delete;

  // After an operation failed: "rank 2 (pid 123 on this host) died", "rank 3 (on host b)
  // stopped answering: ...", or "" when every rank looks alive (or the store does not answer)
  // within `within`. The first cause found is kept and returned at once from then on.
  std::string Diagnose(std::chrono::milliseconds within);

 private:
  void Beat();
  std::string LocalDeaths() const;
  // Whether `rank` saw a failure first (it asked Diagnose): its end is not the cause.
  bool FailedItself(int rank) const;

  std::shared_ptr<KvStore> store_;
  std::string scope_;
  int rank_;
  std::vector<std::string> host_ids_, names_;
  std::vector<long long> pids_;
  std::vector<std::string> start_times_;

  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::string cause_;
  std::thread beat_;
};

}  // namespace chorus::torch_backend

#endif  // CHORUS_BINDINGS_PYTORCH_RANK_HEALTH_H_
