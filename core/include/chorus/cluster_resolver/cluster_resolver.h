// Cluster resolvers, as tf.distribute.cluster_resolver: where every task of a job runs and
// which task this process is. TFConfigClusterResolver reads TF_CONFIG in TensorFlow's exact
// format; the others read what a launcher (Slurm, Open MPI's mpirun, torchrun) sets.
#ifndef CHORUS_CLUSTER_RESOLVER_H_
#define CHORUS_CLUSTER_RESOLVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace chorus {

// Job name ("chief", "worker", "ps", "evaluator") -> task addresses ("host:port"), in index order.
using ClusterSpec = std::map<std::string, std::vector<std::string>>;

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
};

// A resolver over a spec given in code.
class SimpleClusterResolver : public ClusterResolver {
 public:
  // Throws Error(INVALID_ARGUMENT) for the same mistakes TF_CONFIG's parser reports.
  SimpleClusterResolver(ClusterSpec spec, std::string task_type, int task_id,
                        std::string rpc_layer = "");
  const ClusterSpec& cluster_spec() const override { return spec_; }
  const std::string& task_type() const override { return task_type_; }
  int task_id() const override { return task_id_; }
  std::string rpc_layer() const override { return rpc_layer_; }
  std::string name() const override { return "SimpleClusterResolver"; }

 private:
  ClusterSpec spec_;
  std::string task_type_;
  int task_id_;
  std::string rpc_layer_;
};

// TF_CONFIG = {"cluster": {"chief": [...], "worker": [...], "ps": [...], "evaluator": [...]},
//              "task": {"type": "worker", "index": 0}, "rpc_layer": "grpc"}.
class TFConfigClusterResolver : public SimpleClusterResolver {
 public:
  // From the TF_CONFIG variable; throws Error(INVALID_ARGUMENT) when it is unset or malformed.
  TFConfigClusterResolver();
  // From a TF_CONFIG string. Each malformed case throws Error(INVALID_ARGUMENT) whose message
  // names the problem and the fix: bad JSON, a cluster that is not an object of lists of
  // "host:port" strings, an unknown task type (e.g. "master"), more than one chief, a task
  // index out of range, a duplicate address, a missing task.
  static TFConfigClusterResolver Parse(const std::string& tf_config);
  std::string name() const override { return "TFConfigClusterResolver"; }

 private:
  TFConfigClusterResolver(SimpleClusterResolver base);
};

// Slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_NODELIST (expanded here, without scontrol, e.g.
// "node[01-03,07],gpu5"), SLURM_TASKS_PER_NODE (e.g. "2(x3),1") or SLURM_NTASKS_PER_NODE.
// Every task becomes a worker at <node>:<port_base + local task index>.
class SlurmClusterResolver : public SimpleClusterResolver {
 public:
  explicit SlurmClusterResolver(uint16_t port_base = 8888);
  std::string name() const override { return "SlurmClusterResolver"; }
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

 private:
  explicit LauncherClusterResolver(std::pair<std::string, SimpleClusterResolver> resolved);
  std::string launcher_;  // "OpenMpi" or "Torchrun"
};

// The resolver the environment describes: TF_CONFIG, else torchrun's or Open MPI's variables,
// else Slurm's; nullptr when none is set (a single worker).
std::unique_ptr<ClusterResolver> ResolveClusterFromEnvironment();

}  // namespace chorus

#endif  // CHORUS_CLUSTER_RESOLVER_H_
