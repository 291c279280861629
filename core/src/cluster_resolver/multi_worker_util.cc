// multi_worker_util: TensorFlow's answers about a cluster spec's tasks.
#include <chorus/cluster_resolver/multi_worker_util.h>

#include "cluster_resolver/cluster_resolver_internal.h"

namespace chorus::multi_worker_util {
namespace {

using cluster_internal::Fail;
using cluster_internal::IsTaskType;
using cluster_internal::JobSize;

void Validate(const ClusterSpec& spec, const std::string& task_type, int task_id) {
  if (!IsTaskType(task_type)) {
    Fail("unrecognized task_type '" + task_type +
         "': the task types are chief, worker, evaluator and ps");
  }
  if (spec.count(task_type) == 0) {
    Fail("task_type '" + task_type + "' is not a job of the cluster spec; add it or ask for a " +
         "job the cluster has");
  }
  if (JobSize(spec, "chief") > 1) Fail("there must be at most one 'chief' task in the cluster");
  if (JobSize(spec, "evaluator") > 1) {
    Fail("there must be at most one 'evaluator' task in the cluster");
  }
  if (task_id < 0 || task_id >= JobSize(spec, task_type)) {
    Fail("task_id " + std::to_string(task_id) + " is not a task of job '" + task_type +
         "', which has " + std::to_string(JobSize(spec, task_type)) + " tasks");
  }
}

}  // namespace

bool is_chief(const ClusterSpec& cluster_spec, const std::string& task_type, int task_id) {
  Validate(cluster_spec, task_type, task_id);
  if (task_type == "chief" || task_type == "evaluator") return true;
  return cluster_spec.count("chief") == 0 && task_type == "worker" && task_id == 0;
}

std::string collective_leader(const ClusterSpec& cluster_spec, const std::string& task_type,
                              int task_id) {
  if (cluster_spec.empty()) return "";
  Validate(cluster_spec, task_type, task_id);
  if (task_type == "evaluator") return "";
  if (cluster_spec.count("chief") > 0) return "/job:chief/replica:0/task:0";
  if (cluster_spec.count("worker") == 0) {
    Fail("the cluster has neither a chief nor a worker to lead its collectives");
  }
  return "/job:worker/replica:0/task:0";
}

int worker_count(const ClusterSpec& cluster_spec, const std::string& task_type) {
  Validate(cluster_spec, task_type, 0);
  if (task_type == "evaluator") return JobSize(cluster_spec, "evaluator");
  if (task_type != "chief" && task_type != "worker") {
    Fail("worker_count of task_type '" + task_type +
         "': only a chief, worker or evaluator task counts workers");
  }
  return JobSize(cluster_spec, "chief") + JobSize(cluster_spec, "worker");
}

int id_in_cluster(const ClusterSpec& cluster_spec, const std::string& task_type, int task_id) {
  Validate(cluster_spec, task_type, task_id);
  if (task_type == "chief") return 0;
  if (task_type == "worker") return task_id + JobSize(cluster_spec, "chief");
  if (task_type == "evaluator") return task_id;
  Fail("there is no id for task_type '" + task_type + "': only chief, worker and evaluator " +
       "tasks have one");
}

}  // namespace chorus::multi_worker_util
