// Cluster specs: ClusterSpec, every job a list of addresses (task i at position i), and
// SparseClusterSpec, TensorFlow's tf.train.ClusterSpec, whose jobs may leave task indices out.
#ifndef CHORUS_CLUSTER_RESOLVER_CLUSTER_SPEC_H_
#define CHORUS_CLUSTER_RESOLVER_CLUSTER_SPEC_H_

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace chorus {

// Job name ("chief", "worker", "ps", "evaluator") -> task addresses ("host:port"), in index order.
using ClusterSpec = std::map<std::string, std::vector<std::string>>;

// As TensorFlow's tf.train.ClusterSpec: jobs of tasks by index, where a job may be sparse, e.g.
// {"worker": {1: "w1:2222", 3: "w3:2222"}}, for a task that needs to know only some of the
// others. Any job name is allowed, as in TensorFlow; the resolvers check the names they accept.
// Constructors throw Error(INVALID_ARGUMENT) naming the job and task for an empty job name, a
// negative task index, an index given twice, an empty address, or an address used by two tasks
// (which TF_CONFIG's parser refuses too). Addresses are not parsed: "localhost:0" is allowed.
class SparseClusterSpec {
 public:
  // One job's tasks: task index -> address.
  using TaskMap = std::map<int, std::string>;
  using SparseJobs = std::map<std::string, TaskMap>;
  // A job as as_dict() answers it: the addresses in index order when dense, else by index.
  using JobTasks = std::variant<std::vector<std::string>, TaskMap>;

  // One job's tasks as the braced constructor takes them: a list of addresses (task i at
  // position i) or {index, address} pairs, as TensorFlow's dict takes a list or a dict.
  class Job {
   public:
    Job() = default;
    Job(std::initializer_list<std::string> addresses);
    Job(std::initializer_list<std::pair<const int, std::string>> tasks);

   private:
    friend class SparseClusterSpec;
    std::vector<std::pair<int, std::string>> tasks_;
  };

  SparseClusterSpec() = default;  // no jobs, as ClusterSpec({})
  explicit SparseClusterSpec(const ClusterSpec& dense_jobs);
  explicit SparseClusterSpec(const SparseJobs& sparse_jobs);
  // Both kinds at once; a job in both throws Error(INVALID_ARGUMENT).
  SparseClusterSpec(const ClusterSpec& dense_jobs, const SparseJobs& sparse_jobs);
  // As TensorFlow's dict, e.g. {{"ps", {"ps0:2222"}}, {"worker", {{1, "w1:2222"}}}}; a job given
  // twice throws Error(INVALID_ARGUMENT).
  SparseClusterSpec(std::initializer_list<std::pair<const std::string, Job>> jobs);

  // The job names, sorted (TensorFlow's ClusterDef sorts them too).
  std::vector<std::string> jobs() const;
  // Whether there is no job (TensorFlow's bool(cluster_spec) is !empty()).
  bool empty() const { return jobs_.empty(); }

  // These throw Error(NOT_FOUND) for a job the cluster does not have (TensorFlow's ValueError).
  // The number of tasks given, not the largest index + 1.
  int num_tasks(const std::string& job) const;
  // The task indices, sorted.
  std::vector<int> task_indices(const std::string& job) const;
  // Also throws Error(NOT_FOUND) for an index the job does not have, as TensorFlow's
  // "No task with index 2 in job 'worker'".
  const std::string& task_address(const std::string& job, int task_index) const;
  // The addresses up to the largest index, nullopt at the gaps (TensorFlow's None); an empty job
  // gives an empty list (TensorFlow's raises).
  std::vector<std::optional<std::string>> job_tasks(const std::string& job) const;

  // Every job: a list when its indices are 0..n-1, else its tasks by index. An empty job is an
  // empty list (TensorFlow answers {}: no tasks either way).
  std::map<std::string, JobTasks> as_dict() const;
  // Every job's tasks by index.
  const SparseJobs& tasks() const { return jobs_; }

  // Whether every job's indices are 0..n-1, as a ClusterSpec lists them.
  bool is_dense() const;
  // The spec as a ClusterSpec. Throws Error(INVALID_ARGUMENT) naming the first job with a gap and
  // its first missing index: a ClusterSpec has no way to leave a task out without renumbering
  // the tasks after it, and the strategies, as TensorFlow's MultiWorkerMirroredStrategy, need
  // tasks 0..n-1.
  ClusterSpec ToDense() const;

  // As TensorFlow's: the same tasks at the same indices, however each job was given.
  friend bool operator==(const SparseClusterSpec&, const SparseClusterSpec&) = default;

 private:
  // Checks and takes one job; `job_tasks` may hold an index twice, which is refused.
  void AddJob(const std::string& job, const std::vector<std::pair<int, std::string>>& job_tasks);
  // Refuses an address used by two tasks.
  void CheckDistinctAddresses() const;
  const TaskMap& JobOrThrow(const std::string& job) const;

  SparseJobs jobs_;
};

}  // namespace chorus

#endif  // CHORUS_CLUSTER_RESOLVER_CLUSTER_SPEC_H_
