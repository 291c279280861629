// tf.distribute.ParameterServerStrategy (TensorFlow 2): asynchronous training with a coordinator
// (the "chief" task, which runs the user's program), workers that run the functions it schedules
// (cluster_coordinator.h) and parameter servers ("ps" tasks) that hold the variables. Every task
// runs the same program: workers and ps tasks call ServeIfServerTask() (functions.h) first and
// serve until the coordinator ends the job; the chief goes on and creates this strategy.
//
// Variables created with CreateVariable (or ShardedVariable::Create in scope()) are placed on
// the ps tasks round-robin; with a partitioner their rows (axis 0) are split into shards spread
// the same way. Reads, writes and optimizer updates go to the ps that holds each shard; an update
// applies under that shard's lock on its ps.
#ifndef CHORUS_PARAMETER_SERVER_STRATEGY_H_
#define CHORUS_PARAMETER_SERVER_STRATEGY_H_

#include <chorus/cluster_resolver/cluster_resolver.h>
#include <chorus/distribute/variable.h>
#include <chorus/parameter_server/partitioners.h>
#include <chorus/runtime/tensor.h>
#include <chorus/training/checkpoint.h>
#include <chorus/training/checkpoint_manager.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace chorus {

namespace ps_internal {
class PsClient;
struct VariableInfo;
class Layout;
}  // namespace ps_internal

// The optimizer the ps tasks apply (Keras' SGD with momentum, or Adam; the same arithmetic as
// chorus::SGD and chorus::Adam). Its slots live beside each shard.
struct ServerOptimizer {
  static ServerOptimizer SGD(float learning_rate = 0.01f, float momentum = 0.0f,
                             bool nesterov = false);
  static ServerOptimizer Adam(float learning_rate = 0.001f, float beta_1 = 0.9f,
                              float beta_2 = 0.999f, float epsilon = 1e-7f);
  std::string kind = "sgd";  // "sgd" or "adam"
  float learning_rate = 0.01f;
  float momentum = 0.0f;
  bool nesterov = false;
  float beta_1 = 0.9f;
  float beta_2 = 0.999f;
  float epsilon = 1e-7f;
};

struct ShardPlacement {
  uint64_t id = 0;  // the shard's id on its ps
  int ps = 0;       // index in the "ps" job
  int64_t first_row = 0;
  Shape shape;
};

// A variable held by the ps tasks: one shard, or several along axis 0 (tf's ShardedVariable).
// A handle: copies refer to the same variable. Values come and go as host (CPU:0) tensors.
// Usable on the coordinator and, through FunctionContext::variable, in a worker's function.
class ShardedVariable {
 public:
  ShardedVariable() = default;
  // A variable of the current ParameterServerStrategy's scope (Error when there is none).
  static ShardedVariable Create(const VariableSpec& spec, const Tensor& initial);

  bool defined() const { return info_ != nullptr; }
  const std::string& name() const;
  const Shape& shape() const;
  chorus_dtype dtype() const;
  bool trainable() const;
  const std::vector<ShardPlacement>& shards() const;

  // The whole value: every shard read (in parallel) into its rows of one new tensor.
  Tensor read() const;
  // The same into `out` (the variable's dtype and shape), which a loop can reuse: a new 64 MiB
  // tensor costs more to allocate here than the read (first-touch page faults).
  void read_into(const Tensor& out) const;
  // Whole-value writes, split along the shards.
  void assign(const Tensor& value) const;
  void assign_add(const Tensor& delta) const;
  void assign_sub(const Tensor& delta) const;

  ShardedVariable(std::shared_ptr<const ps_internal::VariableInfo> info,
                  std::shared_ptr<ps_internal::PsClient> client);
  const ps_internal::VariableInfo& info() const;
  ps_internal::PsClient& client() const;

 private:
  std::shared_ptr<const ps_internal::VariableInfo> info_;
  std::shared_ptr<ps_internal::PsClient> client_;
};

// Several variables read at once (one RPC per ps).
std::vector<Tensor> ReadVariables(const std::vector<ShardedVariable>& variables);
// The ps optimizer's update with these gradients (whole-variable shapes, f32): each shard's part
// goes to its ps, one RPC per ps, and applies under the shard's lock.
void ApplyGradients(const std::vector<std::pair<Tensor, ShardedVariable>>& grads_and_vars);

struct ParameterServerOptions {
  // Deadline of every RPC but a function's run (CHORUS_TIMEOUT_SECONDS when set, else 60 s), the
  // calls of the functions on the workers to the ps tasks included (the coordinator sends it
  // with each run); and how long the constructor waits for every ps and worker to answer.
  std::chrono::milliseconds rpc_timeout{0};
  std::chrono::milliseconds connect_timeout{0};
};

class ParameterServerStrategy {
 public:
  // resolver: nullptr = the environment's (TF_CONFIG). Throws Error(INVALID_ARGUMENT) unless the
  // cluster has a chief (this process), at least one worker and one ps, and Error(UNAVAILABLE /
  // TIMEOUT) naming the task that does not answer within connect_timeout.
  explicit ParameterServerStrategy(
      std::unique_ptr<ClusterResolver> resolver = nullptr,
      std::shared_ptr<const partitioners::Partitioner> variable_partitioner = nullptr,
      ParameterServerOptions options = {});
  ~ParameterServerStrategy();
  ParameterServerStrategy(const ParameterServerStrategy&) = delete;
  ParameterServerStrategy& operator=(const ParameterServerStrategy&) = delete;

  std::string name() const { return "ParameterServerStrategy"; }
  const ClusterResolver& cluster_resolver() const { return *resolver_; }
  int num_ps() const;
  int num_workers() const;

  // While the returned guard lives, ShardedVariable::Create on this thread uses this strategy.
  [[nodiscard]] std::shared_ptr<void> scope();
  // Creates a variable (sharded by the partitioner) on the ps tasks, initialised to `initial`.
  ShardedVariable CreateVariable(const VariableSpec& spec, const Tensor& initial);
  // The optimizer every ps applies from now on (ApplyGradients); set it before training.
  void set_optimizer(const ServerOptimizer& optimizer);

  // Every variable created so far, in creation order.
  std::vector<ShardedVariable> variables() const;
  // What a worker needs to see the variables by name; bumps with every new variable.
  std::shared_ptr<const ps_internal::Layout> layout() const;
  ps_internal::PsClient& client() const { return *client_; }
  const ParameterServerOptions& options() const { return options_; }

 private:
  std::unique_ptr<ClusterResolver> resolver_;
  std::shared_ptr<const partitioners::Partitioner> partitioner_;
  ParameterServerOptions options_;
  std::shared_ptr<ps_internal::PsClient> client_;
  struct State;
  std::unique_ptr<State> state_;
};

// Checkpoints of ps variables in chorus::Checkpoint's format, each variable as one whole tensor
// (its shards concatenated), the optimizer's slots as "<optimizer key>/<variable>/<slot>" and
// its step as "<optimizer key>/iterations": the keys chorus::Checkpoint writes for a variable
// and an optimizer. So a file restores into another shard count, into MirroredStrategy or into
// a program with no strategy, and back.
class ShardedCheckpoint {
 public:
  ShardedCheckpoint& Track(const std::string& key, const ShardedVariable& variable);
  // The ps optimizer's slots and step of every tracked trainable variable.
  ShardedCheckpoint& TrackOptimizer(const std::string& key);
  void Save(const std::string& path) const;
  // Saves as <prefix>-<number> of `manager`'s directory, recorded in its index (a manager of no
  // strategy: the chief alone writes); returns the path.
  std::string Save(CheckpointManager& manager, int64_t number) const;
  // Restores every tracked variable (and slots and step, when tracked and present); returns the
  // optimizer's iterations (the step to resume at), 0 when not tracked.
  int64_t Restore(const std::string& path) const;

 private:
  // The whole values read from the ps tasks, tracked by a chorus::Checkpoint (the variables it
  // tracks are kept alive here).
  struct Snapshot {
    Checkpoint checkpoint;
    std::vector<Variable> values;
  };
  Snapshot Read() const;

  std::vector<std::pair<std::string, ShardedVariable>> variables_;
  std::string optimizer_key_;
};

}  // namespace chorus

#endif  // CHORUS_PARAMETER_SERVER_STRATEGY_H_
