// TPUClusterResolver: the TPU workers from the tpu argument, KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS,
// TPU_NAME, or on a TPU VM TPU_WORKER_HOSTNAMES and TPU_WORKER_ID.
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/tpu_cluster_resolver.h>

#include <limits>
#include <regex>
#include <set>
#include <utility>

#include "base/socket_util.h"
#include "cluster_resolver/cluster_resolver_internal.h"

namespace chorus {
namespace {

using cluster_internal::Fail;

constexpr char kTpuResolver[] = "TPUClusterResolver";
constexpr char kGkeEndpoints[] = "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS";
constexpr char kTpuName[] = "TPU_NAME";
constexpr char kWorkerHostnames[] = "TPU_WORKER_HOSTNAMES";
constexpr char kWorkerId[] = "TPU_WORKER_ID";
constexpr char kGrpcPrefix[] = "grpc://";
constexpr uint16_t kDefaultPort = 8470;  // Cloud TPU's worker port

// "host:port" of one worker address as Cloud TPU writes it ("grpc://" optional, port 8470 when
// left out), checked; `where` names where it came from.
std::string WorkerAddress(std::string address, const std::string& where) {
  if (address.starts_with(kGrpcPrefix)) address.erase(0, sizeof(kGrpcPrefix) - 1);
  const bool has_port = address.find(':') != std::string::npos && address.back() != ']';
  if (!has_port) address += ":" + std::to_string(kDefaultPort);
  HostPort parsed;
  if (std::string problem = ParseHostPort(address, &parsed); !problem.empty()) {
    Fail(std::string(kTpuResolver) + ": worker address '" + address + "' from " + where + " " +
         problem + "; give each worker as grpc://host:port (port 8470 when left out)");
  }
  return address;
}

std::vector<std::string> WorkerAddresses(const std::string& list, const std::string& where) {
  std::vector<std::string> addresses;
  std::set<std::string> seen;
  for (const std::string& part : SplitList(list, ',')) {
    std::string address = WorkerAddress(part, where);
    if (!seen.insert(address).second) {
      Fail(std::string(kTpuResolver) + ": worker address '" + address + "' is listed twice in " +
           where + "; list each TPU worker once");
    }
    addresses.push_back(std::move(address));
  }
  if (addresses.empty()) {
    Fail(std::string(kTpuResolver) + ": " + where + " lists no worker address; give " +
         "grpc://host:port,...");
  }
  return addresses;
}

struct Resolved {
  std::string tpu;
  std::string source;
  std::vector<std::string> workers;  // empty for "local"
  int task_id = 0;
};

// The TPU's name or addresses and where they came from: the argument, else the variables in
// TensorFlow's order; nullopt when none is set.
std::optional<std::pair<std::string, std::string>> TpuName(const std::optional<std::string>& tpu) {
  if (tpu && !tpu->empty()) return std::make_pair(*tpu, std::string("the tpu argument"));
  for (const char* variable : {kGkeEndpoints, kTpuName}) {
    if (std::optional<std::string> value = GetEnv(variable)) {
      return std::make_pair(*value, std::string(variable));
    }
  }
  return std::nullopt;
}

// A TPU VM's own description of its slice: TPU_WORKER_HOSTNAMES and TPU_WORKER_ID.
std::optional<Resolved> FromTpuVm(const std::string& tpu) {
  std::optional<std::string> hosts = GetEnv(kWorkerHostnames);
  if (!hosts) return std::nullopt;
  Resolved resolved{tpu.empty() ? *hosts : tpu, kWorkerHostnames,
                    WorkerAddresses(*hosts, kWorkerHostnames), 0};
  resolved.task_id = static_cast<int>(cluster_internal::OptionalEnvInteger(
      kWorkerId, 0, 0, static_cast<long long>(resolved.workers.size()) - 1, kTpuResolver));
  return resolved;
}

Resolved Resolve(const std::optional<std::string>& tpu) {
  const std::optional<std::pair<std::string, std::string>> name = TpuName(tpu);
  if (!name) {
    if (std::optional<Resolved> vm = FromTpuVm("")) return *vm;
    Fail(std::string(kTpuResolver) + ": no TPU given: pass the tpu argument (\"local\", or " +
         "\"grpc://host:port,...\"), or set " + kGkeEndpoints + ", " + kTpuName + " or " +
         kWorkerHostnames + " (with " + kWorkerId + ")");
  }
  const auto& [value, where] = *name;
  if (value == "local") return Resolved{"local", "local", {}, 0};
  if (value.starts_with(kGrpcPrefix)) {
    return Resolved{value, where == "the tpu argument" ? "argument" : where,
                    WorkerAddresses(value, where), 0};
  }
  // A Cloud TPU name: only Cloud TPU's API (with the GCE metadata server's project and zone)
  // knows its workers. A TPU VM describes its own slice.
  if (std::optional<Resolved> vm = FromTpuVm(value)) return *vm;
  Fail(std::string(kTpuResolver) + ": TPU '" + value + "' (from " + where +
       ") is a Cloud TPU name, which only the Cloud TPU API and the GCE metadata server can " +
       "resolve, and chorus calls neither; give the workers as \"grpc://host:port,...\" (as " +
       kGkeEndpoints + " does), set " + kWorkerHostnames + " and " + kWorkerId +
       " (as a TPU VM does), or use \"local\" for chips attached to this host");
}

}  // namespace

TPUClusterResolver::TPUClusterResolver() : TPUClusterResolver(TpuClusterResolverOptions{}) {}

TPUClusterResolver::TPUClusterResolver(const std::string& tpu)
    : TPUClusterResolver([&] {
        TpuClusterResolverOptions options;
        options.tpu = tpu;
        return options;
      }()) {}

TPUClusterResolver::TPUClusterResolver(const TpuClusterResolverOptions& options) {
  if (options.job_name.empty()) {
    Fail(std::string(kTpuResolver) + ": job_name is empty; the TPU workers' job needs a name " +
         "(TensorFlow's default is \"worker\")");
  }
  Resolved resolved = Resolve(options.tpu);
  tpu_ = std::move(resolved.tpu);
  source_ = std::move(resolved.source);
  task_type_ = options.job_name;
  task_id_ = resolved.task_id;
  if (tpu_ == "local") return;  // as TensorFlow: no cluster, not even the coordinator
  spec_[options.job_name] = std::move(resolved.workers);
  if (options.coordinator_name && options.coordinator_address) {
    if (*options.coordinator_name == options.job_name) {
      Fail(std::string(kTpuResolver) + ": coordinator_name '" + *options.coordinator_name +
           "' is the TPU workers' job name; give the coordinator a job of its own");
    }
    spec_[*options.coordinator_name] = {
        WorkerAddress(*options.coordinator_address, "coordinator_address")};
  } else if (options.coordinator_name) {
    // TensorFlow starts a server of its own for the coordinator here; chorus has none to start.
    Fail(std::string(kTpuResolver) + ": coordinator_name '" + *options.coordinator_name +
         "' needs a coordinator_address (host:port): chorus starts no coordinator server");
  }
}

void TPUClusterResolver::SetTask(std::string task_type, int task_id) {
  if (task_id < 0) {
    Fail(std::string(kTpuResolver) + ": task_id " + std::to_string(task_id) +
         " is negative; task ids count from 0");
  }
  task_type_ = std::move(task_type);
  task_id_ = task_id;
}

std::map<std::string, int> TPUClusterResolver::num_accelerators(
    const std::optional<std::string>& task_type, std::optional<int> task_id) const {
  std::map<std::string, int> counts = ClusterResolver::num_accelerators(task_type, task_id);
  // As TensorFlow's: the answer is the TPU cores per worker, also when there are none.
  return {{"TPU", counts.count("TPU") > 0 ? counts.at("TPU") : 0}};
}

TPUClusterResolver::DeviceDetails TPUClusterResolver::GetDeviceDictAndCores(
    const std::vector<std::string>& device_names) {
  static const std::regex kTpuDevice(R"(.*task:(\d+)/.*device:TPU:(\d+)$)");
  DeviceDetails details;
  for (const std::string& name : device_names) {
    std::smatch match;
    if (!std::regex_match(name, match, kTpuDevice)) continue;
    long long host = 0, core = 0;
    if (!cluster_internal::ParseInteger(match[1].str(), &host) ||
        !cluster_internal::ParseInteger(match[2].str(), &core) ||
        host > std::numeric_limits<int>::max() || core > std::numeric_limits<int>::max()) {
      continue;
    }
    details.device_map[static_cast<int>(host)].push_back(static_cast<int>(core));
    ++details.total_cores;
  }
  return details;
}

int TPUClusterResolver::VerifyAndReturnSameCoreCount(
    const std::map<int, std::vector<int>>& device_map) {
  std::set<size_t> counts;
  for (const auto& [host, cores] : device_map) counts.insert(cores.size());
  if (counts.size() != 1) {
    std::string hosts;
    for (const auto& [host, cores] : device_map) {
      hosts += (hosts.empty() ? "" : ", ") + std::string("host ") + std::to_string(host) + ": " +
               std::to_string(cores.size());
    }
    throw Error(CHORUS_INTERNAL, std::string(kTpuResolver) +
                                     ": the TPU hosts do not have the same number of cores (" +
                                     (hosts.empty() ? "no hosts" : hosts) + ")");
  }
  return static_cast<int>(*counts.begin());
}

}  // namespace chorus
