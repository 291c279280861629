// tf.distribute's multi_worker_util, with TensorFlow's names and TensorFlow's answers: which task
// is the chief, how many workers a task's cluster has, a task's id among them, the collective
// leader. chorus's own questions (ClusterResolver::num_workers(), id_in_cluster(), is_leader())
// answer for the training cluster, where an evaluator has no place; these answer as TensorFlow
// does, where the evaluator is a cluster of its own.
#ifndef CHORUS_MULTI_WORKER_UTIL_H_
#define CHORUS_MULTI_WORKER_UTIL_H_

#include <chorus/cluster_resolver/cluster_resolver.h>

#include <string>

namespace chorus::multi_worker_util {

// Each function first checks, as TensorFlow's _validate_cluster_spec: the task type is chief,
// worker, evaluator or ps and is a job of the cluster, at most one chief and one evaluator, and
// task_id is below the job's size. Throws Error(INVALID_ARGUMENT) naming what is wrong.

// The chief, the evaluator (a chief of its own), or worker 0 when there is no chief.
bool is_chief(const ClusterSpec& cluster_spec, const std::string& task_type, int task_id);

// "/job:chief/replica:0/task:0", else "/job:worker/replica:0/task:0"; "" for an empty cluster
// (checked no further) and for the evaluator.
std::string collective_leader(const ClusterSpec& cluster_spec, const std::string& task_type,
                              int task_id);

// The chief and workers, or for an evaluator the evaluators. A ps task is an error.
int worker_count(const ClusterSpec& cluster_spec, const std::string& task_type);

// The chief 0, worker i i + (1 if there is a chief), evaluator i i. A ps task is an error.
int id_in_cluster(const ClusterSpec& cluster_spec, const std::string& task_type, int task_id);

}  // namespace chorus::multi_worker_util

#endif  // CHORUS_MULTI_WORKER_UTIL_H_
