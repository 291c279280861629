// tf.distribute.coordinator.ClusterCoordinator: schedules registered functions on the workers of
// a ParameterServerStrategy and gives their results as RemoteValues.
//
// Semantics, as TensorFlow documents them:
// - schedule() returns at once (it blocks only while the bounded queue is full); a function runs
//   at least once: one whose worker dies or stops answering is put back and run on another (or
//   on the same worker once it answers again).
// - The first error a function raises cancels the functions still queued and is raised once, by
//   the next schedule(), join() or done(); later schedules work again. A ps that does not answer
//   is such an error, naming the ps task: recovery is a restart of the ps and the chief from the
//   last checkpoint.
// - Nothing waits forever: every RPC has a deadline, and a job whose every worker has been
//   unreachable for worker_lost_timeout fails with an error naming them. A function that runs
//   past its deadline on workers that still answer is run again at most twice more, then fails
//   the job naming it.
#ifndef CHORUS_PARAMETER_SERVER_CLUSTER_COORDINATOR_H_
#define CHORUS_PARAMETER_SERVER_CLUSTER_COORDINATOR_H_

#include <chorus/parameter_server/parameter_server_strategy.h>
#include <chorus/runtime/tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chorus {

namespace ps_internal {
struct ClosureState;
}  // namespace ps_internal

// A scheduled function's result.
class RemoteValue {
 public:
  RemoteValue() = default;
  explicit RemoteValue(std::shared_ptr<ps_internal::ClosureState> state);
  // Waits for the function and returns its results; throws its error (or the error that
  // cancelled it).
  std::vector<Tensor> fetch() const;
  std::vector<Tensor> get() const { return fetch(); }
  bool is_ready() const;
  // Which worker ran it last (-1 before it ran); for tests and logs.
  int worker() const;

 private:
  std::shared_ptr<ps_internal::ClosureState> state_;
};

// A dataset built on every worker by a registered dataset function (rebuilt, from its start, on a
// worker that comes back after a failure).
class PerWorkerIterator {
 public:
  uint64_t id = 0;
  std::string dataset_function;
};
class PerWorkerDataset {
 public:
  PerWorkerIterator iterator() const;
  uint64_t id = 0;
  std::string dataset_function;
};

struct CoordinatorOptions {
  size_t max_queued = 256;  // schedule() blocks beyond this many queued functions
  // Functions in flight on one worker: 1 as TensorFlow (each step reads the weights the one before
  // it wrote there); 2 hides the round trip of short functions (chorus-ps-bench shows both).
  int functions_per_worker = 1;
  // A function's run deadline; 0 = 2 x ParameterServerOptions::rpc_timeout. It must leave room
  // for the function's own work and one whole rpc_timeout on a ps call: a worker whose ps does
  // not answer reports that ps (ending the job) only when the ps call's own deadline comes before
  // this one; else the run counts as past its deadline (run again, at most 3 times in all).
  std::chrono::milliseconds function_timeout{0};
  // How long every worker may stay unreachable before the job fails; 0 = 5 x rpc_timeout.
  std::chrono::milliseconds worker_lost_timeout{0};
};

class ClusterCoordinator {
 public:
  explicit ClusterCoordinator(ParameterServerStrategy& strategy, CoordinatorOptions options = {});
  // Cancels what is queued and in flight, then tells the workers and ps tasks to exit (all at
  // once, 2 s at most; not the ps tasks a function found not answering), unless
  // keep_servers_running() was called.
  ~ClusterCoordinator();
  ClusterCoordinator(const ClusterCoordinator&) = delete;
  ClusterCoordinator& operator=(const ClusterCoordinator&) = delete;

  RemoteValue schedule(const std::string& function, std::vector<Tensor> args = {});
  RemoteValue schedule(const std::string& function, const PerWorkerIterator& iterator,
                       std::vector<Tensor> args = {});
  // Waits until every scheduled function finished; raises the first error (once).
  void join();
  // Whether every scheduled function finished; raises the first error (once).
  bool done();
  static std::vector<std::vector<Tensor>> fetch(const std::vector<RemoteValue>& values);

  PerWorkerDataset create_per_worker_dataset(const std::string& dataset_function);

  // Functions completed and put back (after a worker failure) so far.
  int64_t completed() const;
  int64_t retried() const;
  // Leaves the servers running at destruction (a test that starts another coordinator).
  void keep_servers_running();

  ParameterServerStrategy& strategy() const { return strategy_; }

 private:
  ParameterServerStrategy& strategy_;
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace chorus

#endif  // CHORUS_PARAMETER_SERVER_CLUSTER_COORDINATOR_H_
