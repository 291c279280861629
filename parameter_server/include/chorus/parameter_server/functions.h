// What every task of a parameter-server job shares: the functions the coordinator schedules and
// the per-worker dataset functions, registered by name in the program every role runs (nothing
// is shipped as code), and the server loop of the worker and ps tasks.
#ifndef CHORUS_PARAMETER_SERVER_FUNCTIONS_H_
#define CHORUS_PARAMETER_SERVER_FUNCTIONS_H_

#include <chorus/cluster_resolver/cluster_resolver.h>
#include <chorus/distribute/dataset.h>
#include <chorus/parameter_server/parameter_server_strategy.h>
#include <chorus/runtime/tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus {

// What a scheduled function sees on its worker.
class FunctionContext {
 public:
  virtual ~FunctionContext() = default;
  // A variable the coordinator created, by name; Error(NOT_FOUND) naming the known ones.
  virtual ShardedVariable variable(const std::string& name) const = 0;
  // The next batch of the per-worker dataset whose iterator was scheduled with this function
  // (it starts again from its first batch when it runs out); Error when none was.
  virtual HostBatch next_batch() = 0;
  virtual int worker_index() const = 0;
  virtual int num_workers() const = 0;
};

// A function the coordinator can schedule: arguments and results are host tensors.
using RemoteFunction =
    std::function<std::vector<Tensor>(FunctionContext& context, const std::vector<Tensor>& args)>;
// Builds a worker's dataset (batched), as distribute_datasets_from_function's dataset_fn.
using DatasetFunction = std::function<Dataset(const InputContext& context)>;

// Register at start-up, before ServeIfServerTask, in every role (static initialisers are fine).
// A name registered twice is an Error.
void RegisterFunction(const std::string& name, RemoteFunction function);
void RegisterDatasetFunction(const std::string& name, DatasetFunction function);

// On a worker or ps task (TF_CONFIG's task type, or `resolver`'s), serves the job until the
// coordinator shuts it down or chorus-launch ends, then returns true: the program should exit.
// On the chief and the evaluator returns false at once; with no cluster (no TF_CONFIG, or "{}")
// also false. Errors (a port in use) throw Error naming the task and the port.
bool ServeIfServerTask(const ClusterResolver* resolver = nullptr);

}  // namespace chorus

#endif  // CHORUS_PARAMETER_SERVER_FUNCTIONS_H_
