// SparseClusterSpec: TensorFlow's tf.train.ClusterSpec, jobs of tasks by index.
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_spec.h>

#include "cluster_resolver/cluster_resolver_internal.h"

namespace chorus {
namespace {

using cluster_internal::Fail;
using cluster_internal::FirstGap;
using cluster_internal::IndexList;

// A job name or an address as messages quote it.
std::string InQuotes(const std::string& text) { return "'" + text + "'"; }

}  // namespace

namespace cluster_internal {

std::optional<int> FirstGap(const SparseClusterSpec::TaskMap& tasks) {
  int expected = 0;
  for (const auto& [index, address] : tasks) {
    if (index != expected) return expected;
    ++expected;
  }
  return std::nullopt;
}

std::string GapFix(size_t num_tasks) {
  if (num_tasks == 1) return "give its task index 0";
  return "number its tasks 0.." + std::to_string(num_tasks - 1) + " or add the missing ones";
}

std::string IndexList(const SparseClusterSpec::TaskMap& tasks) {
  std::string list;
  for (auto it = tasks.begin(); it != tasks.end();) {
    const int first = it->first;
    int last = first;
    for (++it; it != tasks.end() && it->first == last + 1; ++it) last = it->first;
    list += (list.empty() ? "" : ", ") + std::to_string(first);
    if (last > first) list += (last == first + 1 ? ", " : "..") + std::to_string(last);
  }
  return list.empty() ? "none" : list;
}

}  // namespace cluster_internal

SparseClusterSpec::Job::Job(std::initializer_list<std::string> addresses) {
  int index = 0;
  for (const std::string& address : addresses) tasks_.emplace_back(index++, address);
}

SparseClusterSpec::Job::Job(std::initializer_list<std::pair<const int, std::string>> tasks)
    : tasks_(tasks.begin(), tasks.end()) {}

SparseClusterSpec::SparseClusterSpec(const ClusterSpec& dense_jobs)
    : SparseClusterSpec(dense_jobs, {}) {}

SparseClusterSpec::SparseClusterSpec(const SparseJobs& sparse_jobs)
    : SparseClusterSpec({}, sparse_jobs) {}

SparseClusterSpec::SparseClusterSpec(const ClusterSpec& dense_jobs, const SparseJobs& sparse_jobs) {
  for (const auto& [job, addresses] : dense_jobs) {
    std::vector<std::pair<int, std::string>> tasks;
    for (const std::string& address : addresses) {
      tasks.emplace_back(static_cast<int>(tasks.size()), address);
    }
    AddJob(job, tasks);
  }
  for (const auto& [job, tasks] : sparse_jobs) {
    if (jobs_.count(job) > 0) {
      Fail("job " + InQuotes(job) +
           " is given both as a list and as a map of task index to address; give it once");
    }
    AddJob(job, {tasks.begin(), tasks.end()});
  }
  CheckDistinctAddresses();
}

SparseClusterSpec::SparseClusterSpec(
    std::initializer_list<std::pair<const std::string, Job>> jobs) {
  for (const auto& [job, tasks] : jobs) {
    if (jobs_.count(job) > 0) Fail("job " + InQuotes(job) + " is given twice; give each job once");
    AddJob(job, tasks.tasks_);
  }
  CheckDistinctAddresses();
}

void SparseClusterSpec::AddJob(const std::string& job,
                               const std::vector<std::pair<int, std::string>>& job_tasks) {
  if (job.empty()) {
    Fail("a job has an empty name; name every job, e.g. \"worker\" (tasks are /job:<name>/task:i)");
  }
  TaskMap& tasks = jobs_[job];
  for (const auto& [index, address] : job_tasks) {
    const std::string task = job + " " + std::to_string(index);
    if (index < 0) {
      Fail("task index " + std::to_string(index) + " of job " + InQuotes(job) +
           " is negative; task indices count from 0");
    }
    if (address.empty()) {
      Fail("the address of " + task + " is empty; give every task its \"host:port\", e.g. " +
           "\"localhost:2222\"");
    }
    auto [it, inserted] = tasks.emplace(index, address);
    if (!inserted) {
      Fail(task + " is given twice (" + InQuotes(it->second) + " and " + InQuotes(address) +
           "); give each task index once");
    }
  }
}

void SparseClusterSpec::CheckDistinctAddresses() const {
  std::map<std::string, std::string> owner_of_address;
  for (const auto& [job, tasks] : jobs_) {
    for (const auto& [index, address] : tasks) {
      const std::string task = job + " " + std::to_string(index);
      auto [it, inserted] = owner_of_address.emplace(address, task);
      if (!inserted) {
        Fail("address " + InQuotes(address) + " is used by both " + it->second + " and " + task +
             "; give every task its own host:port");
      }
    }
  }
}

const SparseClusterSpec::TaskMap& SparseClusterSpec::JobOrThrow(const std::string& job) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) {
    std::string names;
    for (const auto& [name, tasks] : jobs_) names += (names.empty() ? "" : ", ") + name;
    throw Error(CHORUS_NOT_FOUND, "no such job in the cluster: " + InQuotes(job) + " (its jobs: " +
                                      (names.empty() ? "none" : names) + "); ask for a job it has");
  }
  return it->second;
}

std::vector<std::string> SparseClusterSpec::jobs() const {
  std::vector<std::string> names;
  for (const auto& [job, tasks] : jobs_) names.push_back(job);
  return names;
}

int SparseClusterSpec::num_tasks(const std::string& job) const {
  return static_cast<int>(JobOrThrow(job).size());
}

std::vector<int> SparseClusterSpec::task_indices(const std::string& job) const {
  std::vector<int> indices;
  for (const auto& [index, address] : JobOrThrow(job)) indices.push_back(index);
  return indices;
}

const std::string& SparseClusterSpec::task_address(const std::string& job, int task_index) const {
  const TaskMap& tasks = JobOrThrow(job);
  auto it = tasks.find(task_index);
  if (it == tasks.end()) {
    throw Error(CHORUS_NOT_FOUND, "no task with index " + std::to_string(task_index) + " in job " +
                                      InQuotes(job) + " (its task indices: " + IndexList(tasks) +
                                      "); ask for a task it has");
  }
  return it->second;
}

std::vector<std::optional<std::string>> SparseClusterSpec::job_tasks(const std::string& job) const {
  const TaskMap& tasks = JobOrThrow(job);
  std::vector<std::optional<std::string>> list;
  if (!tasks.empty()) list.resize(static_cast<size_t>(tasks.rbegin()->first) + 1);
  for (const auto& [index, address] : tasks) list[static_cast<size_t>(index)] = address;
  return list;
}

std::map<std::string, SparseClusterSpec::JobTasks> SparseClusterSpec::as_dict() const {
  std::map<std::string, JobTasks> dict;
  for (const auto& [job, tasks] : jobs_) {
    if (FirstGap(tasks)) {
      dict.emplace(job, tasks);
      continue;
    }
    std::vector<std::string> addresses;
    for (const auto& [index, address] : tasks) addresses.push_back(address);
    dict.emplace(job, std::move(addresses));
  }
  return dict;
}

bool SparseClusterSpec::is_dense() const {
  for (const auto& [job, tasks] : jobs_) {
    if (FirstGap(tasks)) return false;
  }
  return true;
}

ClusterSpec SparseClusterSpec::ToDense() const {
  ClusterSpec dense;
  for (const auto& [job, tasks] : jobs_) {
    if (std::optional<int> gap = FirstGap(tasks)) {
      Fail("job " + InQuotes(job) + " has no task " + std::to_string(*gap) +
           " (its task indices: " + IndexList(tasks) +
           "), and a ClusterSpec lists task i at position i, so it cannot leave a task out " +
           "(the strategies need tasks 0..n-1): " + cluster_internal::GapFix(tasks.size()));
    }
    std::vector<std::string>& addresses = dense[job];
    for (const auto& [index, address] : tasks) addresses.push_back(address);
  }
  return dense;
}

}  // namespace chorus
