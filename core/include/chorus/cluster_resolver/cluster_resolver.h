// Cluster resolvers, as tf.distribute.cluster_resolver: where every task of a job runs and
// which task this process is. TFConfigClusterResolver reads TF_CONFIG in TensorFlow's exact
// format; the others read what a launcher (Slurm, Open MPI's mpirun, torchrun) sets.
#ifndef CHORUS_CLUSTER_RESOLVER_H_
#define CHORUS_CLUSTER_RESOLVER_H_

#include <chorus/cluster_resolver/cluster_spec.h>

#include <concepts>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace chorus {

class ClusterResolver {
 public:
  virtual ~ClusterResolver() = default;

  virtual const ClusterSpec& cluster_spec() const = 0;
  virtual const std::string& task_type() const = 0;  // "worker", "chief", ...
  virtual int task_id() const = 0;                   // index within task_type
  virtual std::string rpc_layer() const { return ""; }
  virtual std::string name() const = 0;  // "TFConfigClusterResolver", ...

  // The workers that take part in collectives: the chief (if any) then the workers. As
  // tf.distribute's multi_worker_util: the chief is id 0, worker i is i + 1 when there is a chief.
  int num_workers() const;
  // This task's id among num_workers(); throws Error(INVALID_ARGUMENT) for a ps or evaluator.
  int id_in_cluster() const;
  // The leader: the chief, or worker 0 when there is no chief.
  bool is_leader() const;
  std::string leader_address() const;
  // "worker 1" / "chief 0": how messages name a task.
  std::string task_name() const;
  // The task name of the worker with collective id `id` (inverse of id_in_cluster).
  std::string TaskNameOf(int id) const;
  // The address of the worker with collective id `id`.
  std::string AddressOf(int id) const;

  // As TensorFlow's ClusterResolver.master(): the address of task (task_type, task_id), this
  // task's where one is not given, as "<rpc_layer>://host:port" ("host:port" when the rpc layer is
  // empty); `rpc_layer` overrides rpc_layer() when not empty. "" when the process runs alone
  // (see runs_alone()), or the preset master when there is one. Throws Error(INVALID_ARGUMENT) for
  // a task the cluster does not have.
  virtual std::string master(const std::optional<std::string>& task_type = std::nullopt,
                             std::optional<int> task_id = std::nullopt,
                             const std::string& rpc_layer = "") const;

  // As TensorFlow's num_accelerators(): the accelerator devices of task (task_type, task_id),
  // this task's where none is given, by TensorFlow's device type: "GPU", "TPU", or another
  // device's platform in upper case; CPUs are not counted. chorus sees this process's devices
  // only (its device enumerators, loaded on first use), so every task is answered with them: the
  // strategies require the tasks of a job to be alike. (SlurmClusterResolver answers from Slurm
  // first.) Throws Error(INVALID_ARGUMENT) for a task the cluster does not have.
  virtual std::map<std::string, int> num_accelerators(
      const std::optional<std::string>& task_type = std::nullopt,
      std::optional<int> task_id = std::nullopt) const;

 protected:
  // True when there is no cluster to connect to, so master() is "": an empty cluster spec
  // (TF_CONFIG "{}", a single local process).
  virtual bool runs_alone() const { return cluster_spec().empty(); }
  // What master() returns whatever the task, when not "" (TF_CONFIG's "session_master").
  virtual std::string preset_master() const { return ""; }
  // The jobs that num_workers(), id_in_cluster(), is_leader(), TaskNameOf() and AddressOf() read
  // the chief and the workers from: cluster_spec(), unless a resolver's other jobs keep it from
  // answering (a SimpleClusterResolver whose ps job has gaps).
  virtual const ClusterSpec& collective_jobs() const { return cluster_spec(); }
};

// As TensorFlow's format_master_url: "<rpc_layer>://<address>", or `address` when rpc_layer is "".
std::string FormatMasterUrl(const std::string& address, const std::string& rpc_layer);

// The checks ParameterServerStrategy makes of its cluster: only the jobs chief, worker, ps and
// evaluator; at most one chief; at least one worker and at least one ps task. Throws
// Error(INVALID_ARGUMENT) naming the problem and the fix.
void ValidateParameterServerCluster(const ClusterResolver& resolver);

// A resolver over a spec given in code.
class SimpleClusterResolver : public ClusterResolver {
 public:
  // Throws Error(INVALID_ARGUMENT) for the same mistakes TF_CONFIG's parser reports.
  SimpleClusterResolver(ClusterSpec spec, std::string task_type, int task_id,
                        std::string rpc_layer = "");
  // From a spec whose jobs may have gaps, as TensorFlow's takes any tf.train.ClusterSpec; checked
  // as above, and a dense spec makes the same resolver. With gaps:
  // - The chief and worker jobs must have none: the collectives number their tasks 0..n-1
  //   (TensorFlow's MultiWorkerMirroredStrategy needs contiguous worker indices). A gap there
  //   throws Error(INVALID_ARGUMENT) naming it.
  // - A ps or evaluator job may have gaps, and this task may be any task of the spec. master()
  //   and num_accelerators() answer a task by its index (master("ps", 3)), the collective
  //   queries (num_workers(), AddressOf(), ...) as for a dense spec, cluster_spec_with_gaps()
  //   with the whole spec. cluster_spec() throws Error(INVALID_ARGUMENT) naming the first gap
  //   rather than renumber tasks, and so fail what reads it: UnionClusterResolver and
  //   ParameterServerStrategy (its ps tasks are 0..n-1).
  // A template only so that a braced spec, e.g. {{"worker", {"a:1"}}}, picks the constructor
  // above.
  template <std::same_as<SparseClusterSpec> Spec>
  SimpleClusterResolver(Spec spec, std::string task_type, int task_id, std::string rpc_layer = "")
      : SimpleClusterResolver(WithGaps{}, std::move(spec), std::move(task_type), task_id,
                              std::move(rpc_layer)) {}

  // Throws Error(INVALID_ARGUMENT) for a spec with gaps (see above).
  const ClusterSpec& cluster_spec() const override;
  // Every task by its index, the spec's gaps kept.
  const SparseClusterSpec& cluster_spec_with_gaps() const { return spec_with_gaps_; }
  const std::string& task_type() const override { return task_type_; }
  int task_id() const override { return task_id_; }
  std::string rpc_layer() const override { return rpc_layer_; }
  std::string name() const override { return "SimpleClusterResolver"; }

  // Overrides which task this process is, as TensorFlow's task_type/task_id setters; checked as
  // the constructor checks them (throws Error(INVALID_ARGUMENT), leaving the task unchanged).
  void SetTask(std::string task_type, int task_id);
  void set_rpc_layer(std::string rpc_layer) { rpc_layer_ = std::move(rpc_layer); }

  // As TensorFlow's SimpleClusterResolver(num_accelerators=...): what num_accelerators() answers
  // (for every task). Without it, a SimpleClusterResolver answers {} as TensorFlow's does, and the
  // resolvers built on it (TF_CONFIG, launchers) count this process's devices (Slurm's reads
  // Slurm's GPU variables first).
  void set_num_accelerators(std::map<std::string, int> counts) {
    num_accelerators_ = std::move(counts);
  }
  std::map<std::string, int> num_accelerators(
      const std::optional<std::string>& task_type = std::nullopt,
      std::optional<int> task_id = std::nullopt) const override;
  std::string master(const std::optional<std::string>& task_type = std::nullopt,
                     std::optional<int> task_id = std::nullopt,
                     const std::string& rpc_layer = "") const override;

 protected:
  // Whether num_accelerators() counts this process's devices when none were set (the resolvers
  // that read a launcher's variables), rather than answering {} (SimpleClusterResolver itself).
  virtual bool counts_local_accelerators() const { return false; }
  // Whether set_num_accelerators() was called.
  bool has_num_accelerators() const { return num_accelerators_.has_value(); }
  // An empty cluster with no task: a single local process (TF_CONFIG "{}").
  struct SingleLocalProcess {};
  explicit SimpleClusterResolver(SingleLocalProcess);
  const ClusterSpec& collective_jobs() const override { return spec_; }

 private:
  struct WithGaps {};
  SimpleClusterResolver(WithGaps, SparseClusterSpec spec, std::string task_type, int task_id,
                        std::string rpc_layer);
  // Whether a job has gaps: spec_ leaves those jobs out.
  bool has_gaps() const { return spec_.size() < spec_with_gaps_.tasks().size(); }

  ClusterSpec spec_;  // the jobs without gaps: every job unless built from a spec with gaps
  SparseClusterSpec spec_with_gaps_;
  std::string task_type_;
  int task_id_;
  std::string rpc_layer_;
  std::optional<std::map<std::string, int>> num_accelerators_;
};

// What a program may set in place of what the launcher says (TensorFlow's resolvers take
// task_type, task_id and rpc_layer arguments); unset fields keep the launcher's value.
struct TaskOverrides {
  std::optional<std::string> task_type;
  std::optional<int> task_id;
  std::optional<std::string> rpc_layer;
};

// TF_CONFIG = {"cluster": {"chief": [...], "worker": [...], "ps": [...], "evaluator": [...]},
//              "task": {"type": "worker", "index": 0}, "rpc_layer": "grpc"}.
// As in TensorFlow, "{}" (no "cluster" and no "task") is a single local process: an empty
// cluster spec, task type "" and master() "".
class TFConfigClusterResolver : public SimpleClusterResolver {
 public:
  // From the TF_CONFIG variable; throws Error(INVALID_ARGUMENT) when it is unset or malformed.
  TFConfigClusterResolver();
  explicit TFConfigClusterResolver(const TaskOverrides& overrides);
  // From a TF_CONFIG string. Each malformed case throws Error(INVALID_ARGUMENT) whose message
  // names the problem and the fix: bad JSON, a cluster that is not an object of lists of
  // "host:port" strings, an unknown task type (e.g. "master"), more than one chief, a task
  // index out of range, a duplicate address, a missing task.
  static TFConfigClusterResolver Parse(const std::string& tf_config,
                                       const TaskOverrides& overrides = {});
  std::string name() const override { return "TFConfigClusterResolver"; }
  // TF_CONFIG's "session_master", which master() returns when set.
  const std::string& session_master() const { return session_master_; }

 protected:
  // As TensorFlow's: also a cluster of one task needs no master.
  bool runs_alone() const override;
  bool counts_local_accelerators() const override { return true; }
  std::string preset_master() const override { return session_master_; }

 private:
  TFConfigClusterResolver(SimpleClusterResolver base, std::string session_master);
  TFConfigClusterResolver(SingleLocalProcess, std::string session_master);
  std::string session_master_;
};

// Slurm, as TensorFlow's SlurmClusterResolver: SLURM_PROCID picks this task among the step's
// tasks (SLURM_STEP_NUM_TASKS, else SLURM_NTASKS) on its nodes (SLURM_STEP_NODELIST, else
// SLURM_NODELIST or SLURM_JOB_NODELIST, expanded here without scontrol, e.g.
// "node[01-03,07],gpu5"), laid out in node-list order with the tasks per node from the
// `tasks_per_node` argument, else SLURM_STEP_TASKS_PER_NODE, else SLURM_TASKS_PER_NODE (e.g.
// "2(x3),1"), else SLURM_NTASKS_PER_NODE, else an even split. The task with local index i on
// its node listens at <node>:<port_base + i>.
//
// The jobs map splits that task list: as TensorFlow, the jobs in order of their names (TF sorts
// its dict), each taking the next `count` tasks, e.g. {{"ps", 1}, {"worker", 2}}: task 0 is
// ps 0, tasks 1 and 2 are workers 0 and 1. The counts must add up to the step's tasks.
//
// num_accelerators() is {"GPU": n} for the GPUs of one task ({} when n is 0), every task alike,
// the first of: set_num_accelerators(); SetGpus() (TensorFlow's gpus_per_task, else
// gpus_per_node / the most tasks on a node); the GPUs in SLURM_STEP_GPUS, else SLURM_JOB_GPUS
// (e.g. "0-3,6"), else CUDA_VISIBLE_DEVICES ("" or "NoDevFiles": none); SLURM_GPUS_PER_TASK,
// else SLURM_GPUS_ON_NODE (e.g. "2" or "a100:2"); else this process's devices. A malformed
// variable throws Error(INVALID_ARGUMENT) naming it.
class SlurmClusterResolver : public SimpleClusterResolver {
 public:
  using Jobs = std::vector<std::pair<std::string, int>>;
  // Every task a worker, rpc_layer "".
  explicit SlurmClusterResolver(uint16_t port_base = 8888);
  // TensorFlow's constructor (jobs, port_base, tasks_per_node, rpc_layer); empty `jobs` is every
  // task a worker. Throws Error(INVALID_ARGUMENT) naming the variable or argument that is wrong.
  SlurmClusterResolver(Jobs jobs, uint16_t port_base = 8888,
                       std::optional<int> tasks_per_node = std::nullopt,
                       std::string rpc_layer = "grpc");
  std::string name() const override { return "SlurmClusterResolver"; }

  // TensorFlow's gpus_per_node and gpus_per_task arguments: the GPUs each task has, which
  // num_accelerators() answers in place of Slurm's variables. As TensorFlow, gpus_per_task
  // defaults to gpus_per_node / the most tasks on one node, and the tasks of the busiest node may
  // not need more than gpus_per_node. Throws Error(INVALID_ARGUMENT) for a negative count or
  // more GPUs than a node has, leaving the counts unchanged; nullopt for both reads Slurm again.
  void SetGpus(std::optional<int> gpus_per_node, std::optional<int> gpus_per_task = std::nullopt);
  // The most tasks this step runs on one node.
  int max_tasks_per_node() const { return max_tasks_per_node_; }

  std::map<std::string, int> num_accelerators(
      const std::optional<std::string>& task_type = std::nullopt,
      std::optional<int> task_id = std::nullopt) const override;

 protected:
  bool counts_local_accelerators() const override { return true; }

 private:
  explicit SlurmClusterResolver(std::pair<SimpleClusterResolver, int> resolved);
  int max_tasks_per_node_;
  std::optional<int> gpus_per_task_;  // from SetGpus
};

// Expands a Slurm host list: "n[1-3,5],m07" -> {"n1","n2","n3","n5","m07"} (zero padding kept).
std::vector<std::string> ExpandSlurmHostList(const std::string& list);

// Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE) and torchrun (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT). Worker i is at MASTER_ADDR (default 127.0.0.1) : MASTER_PORT + i
// (default port 29500).
class LauncherClusterResolver : public SimpleClusterResolver {
 public:
  LauncherClusterResolver();
  std::string name() const override { return launcher_ + "ClusterResolver"; }

 protected:
  bool counts_local_accelerators() const override { return true; }

 private:
  explicit LauncherClusterResolver(std::pair<std::string, SimpleClusterResolver> resolved);
  std::string launcher_;  // "OpenMpi" or "Torchrun"
};

// As TensorFlow's UnionResolver: the union of several resolvers' clusters, and the first
// resolver's task, rpc layer, master and accelerators unless `overrides` says otherwise. A job
// in more than one cluster gets the tasks of each in the resolvers' order (TensorFlow's rule for
// jobs given as lists, the only form a chorus ClusterSpec has). The resolvers are shared, not
// copied: a task set on the first later is this resolver's too. Throws Error(INVALID_ARGUMENT)
// for no resolvers or a null one.
class UnionClusterResolver : public ClusterResolver {
 public:
  explicit UnionClusterResolver(std::vector<std::shared_ptr<const ClusterResolver>> resolvers,
                                TaskOverrides overrides = {});
  const ClusterSpec& cluster_spec() const override { return spec_; }
  const std::string& task_type() const override;
  int task_id() const override;
  std::string rpc_layer() const override;
  std::string name() const override { return "UnionClusterResolver"; }
  // A task given by both task_type and task_id is looked up in the union; otherwise the first
  // resolver's master (with `rpc_layer`, if given).
  std::string master(const std::optional<std::string>& task_type = std::nullopt,
                     std::optional<int> task_id = std::nullopt,
                     const std::string& rpc_layer = "") const override;
  std::map<std::string, int> num_accelerators(
      const std::optional<std::string>& task_type = std::nullopt,
      std::optional<int> task_id = std::nullopt) const override;

 private:
  std::vector<std::shared_ptr<const ClusterResolver>> resolvers_;
  TaskOverrides overrides_;
  ClusterSpec spec_;
};

// The resolver the environment describes: TF_CONFIG, else torchrun's or Open MPI's variables,
// else Slurm's; nullptr when none is set or TF_CONFIG is "{}" (a single local process).
std::unique_ptr<ClusterResolver> ResolveClusterFromEnvironment();

}  // namespace chorus

#endif  // CHORUS_CLUSTER_RESOLVER_H_
