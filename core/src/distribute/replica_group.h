// The replicas of one strategy: a persistent thread per replica (replica 0 runs on the caller of
// Run), and the rendezvous that merge_call and the in-replica collectives are built on.
#ifndef CHORUS_CORE_REPLICA_GROUP_H_
#define CHORUS_CORE_REPLICA_GROUP_H_

#include <any>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace chorus::internal {

class ReplicaGroup {
 public:
  explicit ReplicaGroup(int num_replicas);
  ~ReplicaGroup();
  ReplicaGroup(const ReplicaGroup&) = delete;
  ReplicaGroup& operator=(const ReplicaGroup&) = delete;

  int size() const { return size_; }

  // Runs body(replica) on every replica's thread (replica 0's is the caller's) and waits for all.
  // Rethrows the first failure (the original error, not the aborts it caused in the other
  // replicas). Not reentrant.
  void Run(const std::function<void(int)>& body);

  // Called by every replica in turn: once all have arrived with the same `kind`, the last one
  // runs merge(values in replica order) and everyone returns merge's result. Fails (throws
  // chorus::Error) when replicas call different kinds, when one returns from its function or
  // fails while others wait, or when the wait passes timeout_seconds.
  std::any Rendezvous(int replica, const std::string& kind, std::any value,
                      const std::function<std::any(std::vector<std::any>&)>& merge,
                      double timeout_seconds);

 private:
  void ThreadMain(int replica);
  // One replica's part of a job, and its bookkeeping (the first error, aborts, running_).
  void RunReplica(int replica, const std::function<void(int)>& job);
  void Abort(const std::string& reason);  // needs mutex_ held
  // Spins (yielding) without the mutex for a few microseconds while `done` is false, when every
  // replica can have a core: a replica that arrives soon then costs no sleep and wake-up.
  template <typename Done>
  void SpinBriefly(const Done& done) const;

  std::mutex mutex_;
  std::condition_variable work_cv_;  // replicas wait here for a job
  std::condition_variable done_cv_;  // Run waits here for the replicas
  std::condition_variable meet_cv_;  // replicas wait here in a rendezvous
  int size_ = 0;
  std::vector<std::thread> threads_;  // replicas 1..size_-1
  const std::function<void(int)>* job_ = nullptr;
  uint64_t job_generation_ = 0;
  std::atomic<uint64_t> job_signal_{0};  // job_generation_, readable without the mutex
  bool stopping_ = false;
  int running_ = 0;
  int returned_ = 0;  // replicas whose body returned normally in this job
  std::exception_ptr first_error_;
  std::string abort_reason_;  // set once a replica failed or misbehaved in this job

  // The rendezvous in progress.
  uint64_t meet_generation_ = 0;
  std::atomic<uint64_t> meet_signal_{0};  // meet_generation_, readable without the mutex
  std::atomic<bool> aborted_{false};      // !abort_reason_.empty(), readable without the mutex
  bool spin_ = false;                     // the replicas fit on the machine's cores
  int arrived_ = 0;
  std::vector<std::string> kinds_;
  std::vector<std::any> values_;
  std::any result_;
};

}  // namespace chorus::internal

#endif  // CHORUS_CORE_REPLICA_GROUP_H_
