// ClusterResolver's derived queries (as tf.distribute's multi_worker_util), the validation every
// resolver's spec goes through, and the choice of resolver from the environment.
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_resolver.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/registry.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <set>

#include "base/socket_util.h"
#include "cluster_resolver/cluster_resolver_internal.h"

namespace chorus {
namespace {

const char* const kChief = "chief";
const char* const kWorker = "worker";

std::string Quoted(const std::string& text) { return "'" + text + "'"; }

std::string JoinJobNames(const SparseClusterSpec::SparseJobs& spec) {
  std::string names;
  for (const auto& [job, addresses] : spec) names += (names.empty() ? "" : ", ") + job;
  return names.empty() ? "no jobs" : names;
}

// What is wrong with `address` as "host:port" or "[IPv6]:port" (port 1..65535), or "".
std::string AddressProblem(const std::string& address) {
  HostPort unused;
  return ParseHostPort(address, &unused);
}

using cluster_internal::Fail;
using cluster_internal::FirstGap;
using cluster_internal::GapFix;
using cluster_internal::IndexList;
using cluster_internal::IsTaskType;
using cluster_internal::JobSize;

std::string UnknownTaskType(const std::string& type, const std::string& where) {
  if (type == "master") {
    return "unknown task type 'master' " + where +
           "; TensorFlow 2 calls the coordinating task 'chief': rename 'master' to 'chief'";
  }
  return "unknown task type " + Quoted(type) + " " + where +
         "; the task types are chief, worker, ps and evaluator";
}

// The size of every job: "chief 1, ps 2, worker 3".
std::string JobCounts(const ClusterSpec& spec) {
  std::string counts;
  for (const auto& [job, addresses] : spec) {
    counts += (counts.empty() ? "" : ", ") + job + " " + std::to_string(addresses.size());
  }
  return counts.empty() ? "no jobs" : counts;
}

// A dense spec's tasks by index.
SparseClusterSpec::SparseJobs ByIndex(const ClusterSpec& spec) {
  SparseClusterSpec::SparseJobs jobs;
  for (const auto& [job, addresses] : spec) {
    SparseClusterSpec::TaskMap& tasks = jobs[job];
    for (size_t i = 0; i < addresses.size(); ++i) tasks.emplace(static_cast<int>(i), addresses[i]);
  }
  return jobs;
}

int NumTasks(const SparseClusterSpec::SparseJobs& spec, const std::string& job) {
  auto it = spec.find(job);
  return it == spec.end() ? 0 : static_cast<int>(it->second.size());
}

// The checks of multi_worker_util.validate_cluster_spec, plus well-formed, distinct addresses and
// chief and worker jobs without gaps.
void ValidateCluster(const SparseClusterSpec::SparseJobs& spec, const std::string& task_type,
                     int task_id) {
  for (const auto& [job, tasks] : spec) {
    if (!IsTaskType(job)) Fail(UnknownTaskType(job, "in the cluster"));
  }
  std::map<std::string, std::string> owner_of_address;
  for (const auto& [job, tasks] : spec) {
    for (const auto& [index, address] : tasks) {
      const std::string task = job + " " + std::to_string(index);
      const std::string problem = AddressProblem(address);
      if (!problem.empty()) {
        Fail("address " + Quoted(address) + " of " + task + " " + problem +
             "; write every address as \"host:port\" with a port in 1..65535, e.g. "
             "\"localhost:2222\" or \"[::1]:2222\"");
      }
      auto [it, inserted] = owner_of_address.emplace(address, task);
      if (!inserted) {
        Fail("address " + Quoted(address) + " is used by both " + it->second + " and " + task +
             "; give every task its own host:port");
      }
    }
  }
  if (NumTasks(spec, kChief) > 1) {
    Fail("the cluster has " + std::to_string(NumTasks(spec, kChief)) +
         " chief tasks; there must be at most one: make the others workers");
  }
  if (NumTasks(spec, "evaluator") > 1) {
    Fail("the cluster has " + std::to_string(NumTasks(spec, "evaluator")) +
         " evaluator tasks; there must be at most one");
  }
  for (const std::string job : {kChief, kWorker}) {
    auto it = spec.find(job);
    if (it == spec.end()) continue;
    if (std::optional<int> gap = FirstGap(it->second)) {
      Fail("the " + job + " job has no task " + std::to_string(*gap) +
           " (its task indices: " + IndexList(it->second) +
           "), and the chief and the workers take part in collectives, which number them "
           "0..n-1 (as TensorFlow's MultiWorkerMirroredStrategy needs contiguous worker "
           "indices): " +
           GapFix(it->second.size()));
    }
  }
  if (!IsTaskType(task_type)) Fail(UnknownTaskType(task_type, "for this task"));
  auto job = spec.find(task_type);
  // As in TensorFlow, a side-car evaluator need not be listed: it joins no collective.
  if (job == spec.end() && task_type == "evaluator") {
    if (task_id != 0) {
      Fail("task index " + std::to_string(task_id) +
           " of an evaluator that is not in the cluster must be 0: there is at most one "
           "evaluator");
    }
    return;
  }
  if (job == spec.end()) {
    Fail("this task's type " + Quoted(task_type) + " is not a job of the cluster (it has " +
         JoinJobNames(spec) + "); set the task type to one of them or add the job");
  }
  const SparseClusterSpec::TaskMap& tasks = job->second;
  if (FirstGap(tasks)) {
    if (tasks.count(task_id) == 0) {
      Fail("task index " + std::to_string(task_id) + " is not a task of the " + task_type +
           " job (its task indices: " + IndexList(tasks) + "); set the task index to one of them");
    }
    return;
  }
  const int size = static_cast<int>(tasks.size());
  if (task_id < 0 || task_id >= size) {
    Fail("task index " + std::to_string(task_id) + " is out of range: the cluster has " +
         std::to_string(size) + " " + task_type + " task" + (size == 1 ? "" : "s") +
         (size > 0 ? " (indices 0.." + std::to_string(size - 1) + ")" : "") +
         "; set the task index within it");
  }
}

}  // namespace

namespace cluster_internal {

void Fail(const std::string& message) { throw Error(CHORUS_INVALID_ARGUMENT, message); }

int JobSize(const ClusterSpec& spec, const std::string& job) {
  auto it = spec.find(job);
  return it == spec.end() ? 0 : static_cast<int>(it->second.size());
}

bool IsTaskType(const std::string& type) {
  static const std::set<std::string> kTaskTypes = {"chief", "worker", "ps", "evaluator"};
  return kTaskTypes.count(type) > 0;
}

bool ParseInteger(const std::string& text, long long* value) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return false;
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') return false;
  *value = parsed;
  return true;
}

long long OptionalEnvInteger(const char* name, long long fallback, long long min, long long max,
                             const std::string& resolver) {
  const std::optional<std::string> text = GetEnv(name);
  if (!text) return fallback;
  long long value = 0;
  if (!ParseInteger(*text, &value) || value < min || value > max) {
    Fail(std::string(name) + "=" + Quoted(*text) + " is not an integer in [" + std::to_string(min) +
         ", " + std::to_string(max) + "], which " + resolver +
         " needs; fix the launcher's variable or unset it");
  }
  return value;
}

long long RequiredEnvInteger(const char* name, long long min, long long max,
                             const std::string& resolver) {
  if (!GetEnv(name)) {
    Fail(std::string(name) + " is not set, and " + resolver +
         " needs it; start the process through its launcher or set the variable");
  }
  return OptionalEnvInteger(name, 0, min, max, resolver);
}

}  // namespace cluster_internal

int ClusterResolver::num_workers() const {
  return JobSize(collective_jobs(), kChief) + JobSize(collective_jobs(), kWorker);
}

int ClusterResolver::id_in_cluster() const {
  if (task_type() == kChief) return 0;
  if (task_type() == kWorker) {
    return task_id() + (JobSize(collective_jobs(), kChief) > 0 ? 1 : 0);
  }
  throw Error(CHORUS_INVALID_ARGUMENT,
              task_name() + " has no id in the cluster: only the chief and the workers take part " +
                  "in collectives; ask for the id of a chief or worker task");
}

bool ClusterResolver::is_leader() const {
  if (task_type() == kChief) return true;
  return task_type() == kWorker && task_id() == 0 && JobSize(collective_jobs(), kChief) == 0;
}

std::string ClusterResolver::leader_address() const {
  if (num_workers() == 0) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "the cluster has neither a chief nor a worker task, so it has no leader; add a "
                "chief or worker job");
  }
  return AddressOf(0);
}

std::string ClusterResolver::task_name() const {
  return task_type() + " " + std::to_string(task_id());
}

std::string ClusterResolver::TaskNameOf(int id) const {
  const int workers = num_workers();
  if (id < 0 || id >= workers) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "collective worker id " + std::to_string(id) +
                    " is out of range: the cluster has " + std::to_string(workers) +
                    " chief and worker tasks" +
                    (workers > 0 ? " (ids 0.." + std::to_string(workers - 1) + ")" : "") +
                    "; ask for an id in that range");
  }
  const bool has_chief = JobSize(collective_jobs(), kChief) > 0;
  if (has_chief && id == 0) return "chief 0";
  return "worker " + std::to_string(has_chief ? id - 1 : id);
}

std::string ClusterResolver::AddressOf(int id) const {
  TaskNameOf(id);  // throws for an id out of range
  const bool has_chief = JobSize(collective_jobs(), kChief) > 0;
  if (has_chief && id == 0) return collective_jobs().at(kChief)[0];
  return collective_jobs().at(kWorker)[has_chief ? id - 1 : id];
}

std::string ClusterResolver::master(const std::optional<std::string>& task_type,
                                    std::optional<int> task_id,
                                    const std::string& rpc_layer) const {
  if (std::string preset = preset_master(); !preset.empty()) return preset;
  if (runs_alone()) return "";
  const std::string type = task_type.value_or(this->task_type());
  const int id = task_id.value_or(this->task_id());
  const ClusterSpec& spec = cluster_spec();
  auto job = spec.find(type);
  if (job == spec.end() || id < 0 || id >= static_cast<int>(job->second.size())) {
    Fail("master(): the cluster has no task " + type + " " + std::to_string(id) +
         " (its jobs: " + JobCounts(spec) + "); ask for a task type and index it has");
  }
  return FormatMasterUrl(job->second[id], rpc_layer.empty() ? this->rpc_layer() : rpc_layer);
}

std::map<std::string, int> ClusterResolver::num_accelerators(
    const std::optional<std::string>& task_type, std::optional<int> task_id) const {
  if (task_type || task_id) master(task_type, task_id);  // throws for a task the cluster lacks
  std::map<std::string, int> counts;
  for (const std::shared_ptr<DeviceEnumerator>& devices : Registry::Global().DeviceEnumerators()) {
    for (uint32_t i = 0; i < devices->count(); ++i) {
      switch (devices->info(i).kind) {
        case CHORUS_DEVICE_CPU:
          break;
        case CHORUS_DEVICE_GPU:
          ++counts["GPU"];
          break;
        case CHORUS_DEVICE_TPU:
          ++counts["TPU"];
          break;
        default: {
          std::string type = devices->platform();
          for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
          ++counts[type];
        }
      }
    }
  }
  return counts;
}

std::string FormatMasterUrl(const std::string& address, const std::string& rpc_layer) {
  return rpc_layer.empty() ? address : rpc_layer + "://" + address;
}

void ValidateParameterServerCluster(const ClusterResolver& resolver) {
  const ClusterSpec& spec = resolver.cluster_spec();
  const std::string what = "ParameterServerStrategy: ";
  for (const auto& [job, addresses] : spec) {
    if (!IsTaskType(job)) Fail(what + UnknownTaskType(job, "in the cluster"));
  }
  if (JobSize(spec, kChief) > 1) {
    Fail(what + "the cluster has " + std::to_string(JobSize(spec, kChief)) +
         " chief tasks; there must be at most one, the coordinator: make the others workers");
  }
  for (const char* job : {kWorker, "ps"}) {
    if (JobSize(spec, job) > 0) continue;
    Fail(what + "the cluster has " +
         (spec.count(job) ? "an empty \"" + std::string(job) + "\" job"
                          : "no \"" + std::string(job) + "\" job") +
         " (its jobs: " + JobCounts(spec) +
         "), and a parameter-server cluster needs at least one " + job + " task; add one, e.g. \"" +
         job + "\": [\"host:2222\"] in TF_CONFIG's cluster");
  }
}

SimpleClusterResolver::SimpleClusterResolver(SingleLocalProcess) : task_id_(0) {}

std::map<std::string, int> SimpleClusterResolver::num_accelerators(
    const std::optional<std::string>& task_type, std::optional<int> task_id) const {
  if (num_accelerators_ || !counts_local_accelerators()) {
    if (task_type || task_id) master(task_type, task_id);  // throws for a task the cluster lacks
    return num_accelerators_.value_or(std::map<std::string, int>{});
  }
  return ClusterResolver::num_accelerators(task_type, task_id);
}

void SimpleClusterResolver::SetTask(std::string task_type, int task_id) {
  ValidateCluster(spec_with_gaps_.tasks(), task_type, task_id);
  task_type_ = std::move(task_type);
  task_id_ = task_id;
}

SimpleClusterResolver::SimpleClusterResolver(ClusterSpec spec, std::string task_type, int task_id,
                                             std::string rpc_layer)
    : spec_(std::move(spec)),
      task_type_(std::move(task_type)),
      task_id_(task_id),
      rpc_layer_(std::move(rpc_layer)) {
  ValidateCluster(ByIndex(spec_), task_type_, task_id_);
  spec_with_gaps_ = SparseClusterSpec(spec_);
}

SimpleClusterResolver::SimpleClusterResolver(WithGaps, SparseClusterSpec spec,
                                             std::string task_type, int task_id,
                                             std::string rpc_layer)
    : spec_with_gaps_(std::move(spec)),
      task_type_(std::move(task_type)),
      task_id_(task_id),
      rpc_layer_(std::move(rpc_layer)) {
  ValidateCluster(spec_with_gaps_.tasks(), task_type_, task_id_);
  for (const auto& [job, tasks] : spec_with_gaps_.tasks()) {
    if (FirstGap(tasks)) continue;
    std::vector<std::string>& addresses = spec_[job];
    for (const auto& [index, address] : tasks) addresses.push_back(address);
  }
}

const ClusterSpec& SimpleClusterResolver::cluster_spec() const {
  if (!has_gaps()) return spec_;
  for (const auto& [job, tasks] : spec_with_gaps_.tasks()) {
    if (std::optional<int> gap = FirstGap(tasks)) {
      Fail(name() + ": cluster_spec(): job " + Quoted(job) + " has no task " +
           std::to_string(*gap) + " (its task indices: " + IndexList(tasks) +
           "), and a ClusterSpec lists task i at position i, so it cannot show the job without "
           "renumbering its tasks; read cluster_spec_with_gaps() instead, or close the gap: " +
           GapFix(tasks.size()));
    }
  }
  return spec_;  // not reached: has_gaps() means a job has a gap
}

std::string SimpleClusterResolver::master(const std::optional<std::string>& task_type,
                                          std::optional<int> task_id,
                                          const std::string& rpc_layer) const {
  if (!has_gaps()) return ClusterResolver::master(task_type, task_id, rpc_layer);
  // ClusterResolver::master reads cluster_spec(), which a spec with gaps cannot give.
  if (std::string preset = preset_master(); !preset.empty()) return preset;
  const std::string type = task_type.value_or(this->task_type());
  const int id = task_id.value_or(this->task_id());
  try {
    return FormatMasterUrl(spec_with_gaps_.task_address(type, id),
                           rpc_layer.empty() ? this->rpc_layer() : rpc_layer);
  } catch (const Error& e) {
    Fail(std::string("master(): ") + e.what());
  }
}

std::unique_ptr<ClusterResolver> ResolveClusterFromEnvironment() {
  if (std::optional<std::string> tf_config = GetEnv("TF_CONFIG")) {
    // "{}" is TensorFlow's single local process: no cluster to resolve.
    if (TFConfigClusterResolver::Parse(*tf_config).cluster_spec().empty()) return nullptr;
    return std::make_unique<TFConfigClusterResolver>();
  }
  for (const char* name : {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}) {
    if (GetEnv(name)) return std::make_unique<LauncherClusterResolver>();
  }
  if (GetEnv("SLURM_PROCID")) return std::make_unique<SlurmClusterResolver>();
  return nullptr;
}

}  // namespace chorus
