// TFConfigClusterResolver: TF_CONFIG in TensorFlow's format, checked as TensorFlow checks it
// (TFConfigClusterResolver and multi_worker_util.validate_cluster_spec).
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_resolver.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>

#include "base/launcher_watch.h"
#include "cluster_resolver/cluster_resolver_internal.h"

namespace chorus {
namespace {

using nlohmann::json;

const char* const kExample =
    "e.g. {\"cluster\": {\"worker\": [\"host1:2222\", \"host2:2222\"]}, "
    "\"task\": {\"type\": \"worker\", \"index\": 0}}";

[[noreturn]] void FailTfConfig(const std::string& message) {
  throw Error(CHORUS_INVALID_ARGUMENT, "TF_CONFIG: " + message);
}

// A JSON value as messages quote it, cut short when long.
std::string Shown(const json& value) {
  std::string text = value.dump();
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  return text;
}

ClusterSpec ParseCluster(const json& config) {
  auto cluster = config.find("cluster");
  if (cluster == config.end()) {
    FailTfConfig("there is no \"cluster\"; add the jobs and their addresses, " +
                 std::string(kExample));
  }
  if (!cluster->is_object()) {
    FailTfConfig(
        "\"cluster\" must be an object of job name to a list of \"host:port\" strings, not " +
        Shown(*cluster) + "; " + kExample);
  }
  ClusterSpec spec;
  for (const auto& [job, addresses] : cluster->items()) {
    if (!addresses.is_array()) {
      FailTfConfig("job \"" + job + "\" must be a list of \"host:port\" strings, not " +
                   Shown(addresses) + "; write it as [\"host:port\", ...]");
    }
    std::vector<std::string>& list = spec[job];
    for (const json& address : addresses) {
      if (!address.is_string()) {
        FailTfConfig("the address of " + job + " " + std::to_string(list.size()) + " must be a " +
                     "\"host:port\" string, not " + Shown(address) +
                     "; quote it, e.g. \"host:2222\"");
      }
      list.push_back(address.get<std::string>());
    }
  }
  return spec;
}

int TotalTasks(const ClusterSpec& spec) {
  int total = 0;
  for (const auto& [job, addresses] : spec) total += static_cast<int>(addresses.size());
  return total;
}

// The task's index: an integer (or, as Python's int() accepts, a string of one).
int ParseTaskIndex(const json& index) {
  const std::string text = index.is_string() ? index.get<std::string>() : index.dump();
  long long value = 0;
  if ((!index.is_number_integer() && !index.is_string()) ||
      !cluster_internal::ParseInteger(text, &value)) {
    FailTfConfig("task \"index\" must be an integer, not " + Shown(index) + "; e.g. \"index\": 0");
  }
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    FailTfConfig("task index " + text + " is out of range; set it to this task's index in its job");
  }
  return static_cast<int>(value);
}

// The task this process is: "task" when given, else the cluster's only task.
std::pair<std::string, int> ParseTask(const json& config, const ClusterSpec& spec) {
  auto task = config.find("task");
  if (task == config.end() || task->is_null()) {
    const int total = TotalTasks(spec);
    if (total == 0) {
      FailTfConfig("the cluster has no tasks; list at least one address, " + std::string(kExample));
    }
    if (total > 1) {
      FailTfConfig("there is no \"task\" and the cluster has " + std::to_string(total) +
                   " tasks; add \"task\": {\"type\": ..., \"index\": ...} to say which one this "
                   "process is");
    }
    auto only_job =
        std::find_if(spec.begin(), spec.end(), [](const auto& job) { return !job.second.empty(); });
    return {only_job->first, 0};
  }
  if (!task->is_object()) {
    FailTfConfig("\"task\" must be an object like {\"type\": \"worker\", \"index\": 0}, not " +
                 Shown(*task));
  }
  auto type = task->find("type");
  if (type == task->end() || !type->is_string()) {
    FailTfConfig("\"task\" needs a \"type\" string (chief, worker, ps or evaluator), but it is " +
                 Shown(*task) + "; e.g. {\"type\": \"worker\", \"index\": 0}");
  }
  const std::string task_type = type->get<std::string>();
  auto index = task->find("index");
  if (index == task->end()) {
    // Index 0 when the job has one task; an unknown or absent job is reported by the checks.
    auto job = spec.find(task_type);
    if (job == spec.end() || job->second.size() <= 1) return {task_type, 0};
    FailTfConfig("\"task\" has no \"index\" (" + Shown(*task) + "); add which " + task_type +
                 " this process is, e.g. \"index\": 0");
  }
  return {task_type, ParseTaskIndex(*index)};
}

}  // namespace

TFConfigClusterResolver::TFConfigClusterResolver(SimpleClusterResolver base,
                                                 std::string session_master)
    : SimpleClusterResolver(std::move(base)), session_master_(std::move(session_master)) {}

TFConfigClusterResolver::TFConfigClusterResolver(SingleLocalProcess, std::string session_master)
    : SimpleClusterResolver(SingleLocalProcess{}), session_master_(std::move(session_master)) {}

TFConfigClusterResolver::TFConfigClusterResolver() : TFConfigClusterResolver(TaskOverrides{}) {}

TFConfigClusterResolver::TFConfigClusterResolver(const TaskOverrides& overrides)
    : TFConfigClusterResolver([&overrides] {
        std::optional<std::string> text = GetEnv("TF_CONFIG");
        if (!text) {
          throw Error(CHORUS_INVALID_ARGUMENT,
                      "TF_CONFIG is not set; set it to the cluster and this task as JSON, " +
                          std::string(kExample));
        }
        return Parse(*text, overrides);
      }()) {
  // A worker chorus-launch started (it sets TF_CONFIG) stops when chorus-launch dies.
  WatchLauncher();
}

bool TFConfigClusterResolver::runs_alone() const {
  const ClusterSpec& spec = cluster_spec();
  return spec.empty() || (spec.size() == 1 && spec.begin()->second.size() == 1);
}

TFConfigClusterResolver TFConfigClusterResolver::Parse(const std::string& tf_config,
                                                       const TaskOverrides& overrides) {
  json config;
  try {
    config = json::parse(tf_config);
  } catch (const json::exception& e) {
    std::string reason = e.what();
    // nlohmann prefixes "[json.exception.parse_error.101] "; the rest says where and why.
    if (const size_t bracket = reason.find("] "); bracket != std::string::npos) {
      reason = reason.substr(bracket + 2);
    }
    std::string shown = tf_config.size() > 200 ? tf_config.substr(0, 200) + "..." : tf_config;
    FailTfConfig("'" + shown + "' is not valid JSON (" + reason + "); fix it, " + kExample);
  }
  if (!config.is_object()) {
    FailTfConfig("must be a JSON object with \"cluster\" and \"task\", not " + Shown(config) +
                 "; " + kExample);
  }
  std::string rpc_layer;
  if (auto rpc = config.find("rpc_layer"); rpc != config.end() && !rpc->is_null()) {
    if (!rpc->is_string()) {
      FailTfConfig("\"rpc_layer\" must be a string such as \"grpc\", not " + Shown(*rpc));
    }
    rpc_layer = rpc->get<std::string>();
  }
  if (overrides.rpc_layer) rpc_layer = *overrides.rpc_layer;
  std::string session_master;
  if (auto master = config.find("session_master"); master != config.end() && !master->is_null()) {
    if (!master->is_string()) {
      FailTfConfig("\"session_master\" must be a string such as \"grpc://host:2222\", not " +
                   Shown(*master));
    }
    session_master = master->get<std::string>();
  }
  // TensorFlow reads "{}" (no cluster, no task) as a single local process: an empty cluster.
  if (!config.contains("cluster") && !config.contains("task") && !overrides.task_type &&
      !overrides.task_id) {
    TFConfigClusterResolver alone(SingleLocalProcess{}, std::move(session_master));
    alone.set_rpc_layer(std::move(rpc_layer));
    return alone;
  }
  ClusterSpec spec = ParseCluster(config);
  std::string task_type;
  int task_id = 0;
  if (overrides.task_type && overrides.task_id) {
    task_type = *overrides.task_type;
    task_id = *overrides.task_id;
  } else {
    std::tie(task_type, task_id) = ParseTask(config, spec);
    task_type = overrides.task_type.value_or(task_type);
    task_id = overrides.task_id.value_or(task_id);
  }
  try {
    return TFConfigClusterResolver(
        SimpleClusterResolver(std::move(spec), task_type, task_id, std::move(rpc_layer)),
        std::move(session_master));
  } catch (const Error& e) {
    FailTfConfig(e.what());
  }
}

}  // namespace chorus
