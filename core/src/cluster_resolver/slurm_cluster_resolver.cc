// SlurmClusterResolver: the tasks of a Slurm step from SLURM_* variables, with the node list
// expanded here (no scontrol) and tasks laid out on the nodes in block order, as srun does, then
// split among the jobs as TensorFlow's SlurmClusterResolver splits them.
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_resolver.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <utility>

#include "base/socket_util.h"
#include "cluster_resolver/cluster_resolver_internal.h"

namespace chorus {
namespace {

const char* const kResolver = "SlurmClusterResolver";
// Far more nodes than any cluster has; bounds what a typo like "n[1-999999999]" costs.
constexpr size_t kMaxHosts = 1 << 20;

using cluster_internal::Fail;

[[noreturn]] void FailHostList(const std::string& list, const std::string& problem) {
  Fail("Slurm node list '" + list + "' " + problem +
       "; write it as Slurm does, e.g. \"node[01-03,07],gpu5\"");
}

// Splits on commas that are not inside brackets.
std::vector<std::string> SplitOutsideBrackets(const std::string& list) {
  std::vector<std::string> parts(1);
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  return parts;
}

// "01-03,7" -> {"01","02","03","7"}: each range keeps the width of its first number.
std::vector<std::string> ExpandRanges(const std::string& list, const std::string& ranges) {
  std::vector<std::string> numbers;
  for (const std::string& range : SplitOutsideBrackets(ranges)) {
    const size_t dash = range.find('-');
    const std::string low = range.substr(0, dash);
    const std::string high = dash == std::string::npos ? low : range.substr(dash + 1);
    long long first = 0;
    long long last = 0;
    const auto is_number = [](const std::string& text) {
      return !text.empty() && text.size() <= 18 &&
             text.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!is_number(low) || !is_number(high) || !cluster_internal::ParseInteger(low, &first) ||
        !cluster_internal::ParseInteger(high, &last)) {
      FailHostList(list, "has a range '" + range + "' that is not N or N-M");
    }
    if (first > last) FailHostList(list, "has a range '" + range + "' that runs backwards");
    if (static_cast<size_t>(last - first) >= kMaxHosts) {
      FailHostList(
          list, "has a range '" + range + "' of more than " + std::to_string(kMaxHosts) + " hosts");
    }
    for (long long n = first; n <= last; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < low.size()) digits.insert(0, low.size() - digits.size(), '0');
      numbers.push_back(std::move(digits));
    }
  }
  return numbers;
}

// One host expression, "a[1-2]b[3,5]c": the product of its bracket groups, first group slowest.
void ExpandHost(const std::string& list, const std::string& pattern,
                std::vector<std::string>* hosts) {
  std::vector<std::string> names = {""};
  size_t pos = 0;
  while (pos < pattern.size()) {
    const size_t open = pattern.find('[', pos);
    const std::string literal = pattern.substr(pos, open - pos);
    if (literal.find(']') != std::string::npos) FailHostList(list, "has a ']' without a '['");
    for (std::string& name : names) name += literal;
    if (open == std::string::npos) break;
    const size_t close = pattern.find(']', open);
    if (close == std::string::npos) FailHostList(list, "has a '[' without a ']'");
    const std::string ranges = pattern.substr(open + 1, close - open - 1);
    if (ranges.find('[') != std::string::npos) FailHostList(list, "has nested brackets");
    const std::vector<std::string> numbers = ExpandRanges(list, ranges);
    if (names.size() * numbers.size() + hosts->size() > kMaxHosts) {
      FailHostList(list, "names more than " + std::to_string(kMaxHosts) + " hosts");
    }
    std::vector<std::string> product;
    product.reserve(names.size() * numbers.size());
    for (const std::string& name : names) {
      for (const std::string& number : numbers) product.push_back(name + number);
    }
    names = std::move(product);
    pos = close + 1;
  }
  hosts->insert(hosts->end(), names.begin(), names.end());
}

// SLURM_TASKS_PER_NODE (or SLURM_STEP_TASKS_PER_NODE, `name`), e.g. "2(x3),1" -> {2, 2, 2, 1}.
std::vector<int> ExpandTasksPerNode(const char* name, const std::string& text) {
  const auto fail = [name, &text](const std::string& item) {
    Fail(std::string(name) + "='" + text + "' has an item '" + item +
         "' that is not N or N(xM); write it as Slurm does, e.g. \"2(x3),1\"");
  };
  std::vector<int> counts;
  for (const std::string& item : SplitOutsideBrackets(text)) {
    long long count = 0;
    long long repeat = 1;
    const size_t paren = item.find("(x");
    const std::string count_text = item.substr(0, paren);
    if (count_text.find_first_not_of("0123456789") != std::string::npos ||
        !cluster_internal::ParseInteger(count_text, &count) || count < 1 || count > 65535) {
      fail(item);
    }
    if (paren != std::string::npos) {
      const std::string repeat_text = item.substr(paren + 2);
      if (repeat_text.size() < 2 || repeat_text.back() != ')' ||
          repeat_text.find_first_not_of("0123456789") != repeat_text.size() - 1 ||
          !cluster_internal::ParseInteger(repeat_text.substr(0, repeat_text.size() - 1), &repeat) ||
          repeat < 1 || static_cast<size_t>(repeat) > kMaxHosts) {
        fail(item);
      }
    }
    counts.insert(counts.end(), static_cast<size_t>(repeat), static_cast<int>(count));
    if (counts.size() > kMaxHosts) fail(item);
  }
  return counts;
}

// The first of `names` that is set, or nullptr.
const char* FirstSet(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (GetEnv(name)) return name;
  }
  return nullptr;
}

// How many tasks run on each node and where that came from: the `tasks_per_node` argument, else
// SLURM_STEP_TASKS_PER_NODE, else SLURM_TASKS_PER_NODE, else SLURM_NTASKS_PER_NODE on every
// node, else an even split of the tasks (variable `tasks_name`).
std::vector<int> TasksPerNode(size_t nodes, long long tasks, const char* tasks_name,
                              std::optional<int> tasks_per_node, std::string* source) {
  if (tasks_per_node) {
    *source = "tasks_per_node=" + std::to_string(*tasks_per_node);
    if (*tasks_per_node < 1 || *tasks_per_node > 65535) {
      Fail("SlurmClusterResolver's tasks_per_node " + std::to_string(*tasks_per_node) +
           " is not in 1..65535; pass how many tasks run on each node, or leave it unset to "
           "read Slurm's variables");
    }
    return std::vector<int>(nodes, *tasks_per_node);
  }
  if (const char* name = FirstSet({"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})) {
    *source = name;
    return ExpandTasksPerNode(name, *GetEnv(name));
  }
  if (GetEnv("SLURM_NTASKS_PER_NODE")) {
    *source = "SLURM_NTASKS_PER_NODE";
    const auto per_node =
        cluster_internal::RequiredEnvInteger("SLURM_NTASKS_PER_NODE", 1, 65535, kResolver);
    return std::vector<int>(nodes, static_cast<int>(per_node));
  }
  *source = tasks_name;
  if (tasks % static_cast<long long>(nodes) != 0) {
    Fail(std::string(tasks_name) + "=" + std::to_string(tasks) +
         " tasks do not split evenly over " + std::to_string(nodes) +
         " nodes, and neither SLURM_TASKS_PER_NODE nor SLURM_NTASKS_PER_NODE is set; set "
         "SLURM_TASKS_PER_NODE, e.g. \"2(x3),1\"");
  }
  return std::vector<int>(nodes, static_cast<int>(tasks / static_cast<long long>(nodes)));
}

// The jobs in TensorFlow's order (sorted by name), checked; empty `jobs` is `tasks` workers.
SlurmClusterResolver::Jobs SortedJobs(SlurmClusterResolver::Jobs jobs, size_t tasks,
                                      const std::string& layout) {
  if (jobs.empty()) return {{"worker", static_cast<int>(tasks)}};
  std::sort(jobs.begin(), jobs.end());
  long long requested = 0;
  std::string listed;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto& [job, count] = jobs[i];
    if (i > 0 && jobs[i - 1].first == job) {
      Fail("SlurmClusterResolver's jobs name '" + job + "' twice; give each job once with its " +
           "number of tasks");
    }
    if (count < 0) {
      Fail("SlurmClusterResolver's job '" + job + "' has " + std::to_string(count) +
           " tasks; give every job a count of 0 or more");
    }
    requested += count;
    listed += (listed.empty() ? "" : ", ") + job + " " + std::to_string(count);
  }
  if (requested != static_cast<long long>(tasks)) {
    Fail("SlurmClusterResolver's jobs ask for " + std::to_string(requested) + " tasks (" + listed +
         "), but the Slurm step has " + std::to_string(tasks) + " (" + layout +
         "); make the jobs' counts add up to " + std::to_string(tasks));
  }
  return jobs;
}

// The resolver and the most tasks on one node.
std::pair<SimpleClusterResolver, int> SlurmFromEnvironment(SlurmClusterResolver::Jobs jobs,
                                                           uint16_t port_base,
                                                           std::optional<int> tasks_per_node,
                                                           std::string rpc_layer) {
  if (port_base == 0) Fail("SlurmClusterResolver's port base 0 is not a port; use 1..65535");
  const int max_tasks = std::numeric_limits<int>::max();
  // A step's own variables describe the tasks of this srun; the job's, the whole allocation.
  const char* tasks_name = FirstSet({"SLURM_STEP_NUM_TASKS"});
  if (!tasks_name) tasks_name = "SLURM_NTASKS";
  const long long tasks = cluster_internal::RequiredEnvInteger(tasks_name, 1, max_tasks, kResolver);
  const long long rank =
      cluster_internal::RequiredEnvInteger("SLURM_PROCID", 0, tasks - 1, kResolver);
  const char* node_list_name =
      FirstSet({"SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST"});
  if (!node_list_name) {
    Fail(
        "SLURM_NODELIST is not set, and SlurmClusterResolver needs it; start the process with "
        "srun or set the variable");
  }
  const std::string node_list = *GetEnv(node_list_name);
  const std::vector<std::string> nodes = ExpandSlurmHostList(node_list);
  std::string per_node_source;
  const std::vector<int> per_node =
      TasksPerNode(nodes.size(), tasks, tasks_name, tasks_per_node, &per_node_source);
  if (per_node.size() != nodes.size()) {
    Fail(per_node_source + "='" + *GetEnv(per_node_source.c_str()) + "' gives counts for " +
         std::to_string(per_node.size()) + " nodes, but " + node_list_name + "='" + node_list +
         "' has " + std::to_string(nodes.size()) + "; make them describe the same nodes");
  }
  // As srun's block distribution: a node's tasks are consecutive, in node-list order.
  std::vector<std::string> task_addresses;
  for (size_t node = 0; node < nodes.size(); ++node) {
    if (port_base + per_node[node] - 1 > 65535) {
      Fail(std::to_string(per_node[node]) + " tasks on node " + nodes[node] + " need ports up to " +
           std::to_string(port_base + per_node[node] - 1) + " from port base " +
           std::to_string(port_base) + "; use a lower port base");
    }
    for (int local = 0; local < per_node[node]; ++local) {
      task_addresses.push_back(JoinHostPort(nodes[node], static_cast<uint16_t>(port_base + local)));
    }
  }
  const std::string layout = std::to_string(nodes.size()) + " node" +
                             (nodes.size() == 1 ? "" : "s") + " in " + node_list_name +
                             ", tasks per node from " + per_node_source;
  if (!tasks_per_node && static_cast<long long>(task_addresses.size()) != tasks) {
    Fail("the Slurm tasks per node add up to " + std::to_string(task_addresses.size()) +
         " tasks, but " + tasks_name + "=" + std::to_string(tasks) + "; make " + per_node_source +
         " and " + tasks_name + " agree");
  }
  if (rank >= static_cast<long long>(task_addresses.size())) {
    Fail("SLURM_PROCID=" + std::to_string(rank) + " is not one of the " +
         std::to_string(task_addresses.size()) + " tasks (" + layout +
         "); make tasks_per_node match the step's layout");
  }
  ClusterSpec spec;
  std::string task_type;
  int task_id = 0;
  size_t first = 0;
  for (const auto& [job, count] : SortedJobs(std::move(jobs), task_addresses.size(), layout)) {
    const size_t end = first + static_cast<size_t>(count);
    spec[job].assign(task_addresses.begin() + static_cast<std::ptrdiff_t>(first),
                     task_addresses.begin() + static_cast<std::ptrdiff_t>(end));
    if (static_cast<size_t>(rank) >= first && static_cast<size_t>(rank) < end) {
      task_type = job;
      task_id = static_cast<int>(rank - static_cast<long long>(first));
    }
    first = end;
  }
  return {SimpleClusterResolver(std::move(spec), task_type, task_id, std::move(rpc_layer)),
          *std::max_element(per_node.begin(), per_node.end())};
}

// --- GPUs -------------------------------------------------------------------------------------

// Far more GPUs than a node has; bounds what a typo like "0-999999999" means.
constexpr long long kMaxGpus = 1 << 20;

bool IsDigits(const std::string& text, size_t max_digits = 9) {
  return !text.empty() && text.size() <= max_digits &&
         text.find_first_not_of("0123456789") == std::string::npos;
}

// The value of `name` when set, "" included (GetEnv treats "" as unset, but CUDA_VISIBLE_DEVICES=""
// means no GPU).
std::optional<std::string> RawEnv(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::nullopt : std::optional<std::string>(value);
}

// "" and "NoDevFiles" (what Slurm sets for GPUs without device files) name no GPU.
bool NamesNoGpu(const std::string& list) { return list.empty() || list == "NoDevFiles"; }

// SLURM_STEP_GPUS or SLURM_JOB_GPUS, Slurm's GPU indices, e.g. "0-3,6" -> 5.
long long CountSlurmGpuList(const char* name, const std::string& list) {
  if (NamesNoGpu(list)) return 0;
  long long count = 0;
  for (const std::string& item : SplitOutsideBrackets(list)) {
    const size_t dash = item.find('-');
    const std::string low = item.substr(0, dash);
    const std::string high = dash == std::string::npos ? low : item.substr(dash + 1);
    long long first = 0;
    long long last = 0;
    if (!IsDigits(low) || !IsDigits(high) || !cluster_internal::ParseInteger(low, &first) ||
        !cluster_internal::ParseInteger(high, &last) || first > last) {
      Fail(std::string(name) + "='" + list + "' has an item '" + item +
           "' that is not a GPU index N or a range N-M (N <= M); write it as Slurm does, e.g. "
           "\"0-3,6\"");
    }
    count += last - first + 1;
    if (count > kMaxGpus) {
      Fail(std::string(name) + "='" + list + "' names more than " + std::to_string(kMaxGpus) +
           " GPUs; write the GPU indices Slurm gave the step, e.g. \"0-3,6\"");
    }
  }
  return count;
}

// CUDA_VISIBLE_DEVICES: GPU indices or UUIDs ("GPU-...", "MIG-..."). As CUDA, a negative index
// ends the list ("-1" is no GPU).
long long CountCudaVisibleDevices(const std::string& list) {
  const char* const name = "CUDA_VISIBLE_DEVICES";
  if (NamesNoGpu(list)) return 0;
  long long count = 0;
  for (const std::string& item : SplitOutsideBrackets(list)) {
    if (item.size() > 1 && item[0] == '-' && IsDigits(item.substr(1))) break;
    const bool uuid = (item.rfind("GPU-", 0) == 0 || item.rfind("MIG-", 0) == 0) && item.size() > 4;
    if (!IsDigits(item) && !uuid) {
      Fail(std::string(name) + "='" + list + "' has an item '" + item +
           "' that is not a GPU index or UUID; write a comma list such as \"0,1\" or "
           "\"GPU-<uuid>\", or \"\" for no GPU");
    }
    ++count;
  }
  return count;
}

// SLURM_GPUS_PER_TASK or SLURM_GPUS_ON_NODE: "N" or gres's "TYPE:N", several types joined by
// commas, e.g. "a100:2" -> 2.
long long CountSlurmGpuNumber(const char* name, const std::string& text) {
  long long count = 0;
  for (const std::string& item : SplitOutsideBrackets(text)) {
    const size_t colon = item.rfind(':');
    const std::string number = colon == std::string::npos ? item : item.substr(colon + 1);
    long long value = 0;
    if ((colon != std::string::npos && colon == 0) || !IsDigits(number) ||
        !cluster_internal::ParseInteger(number, &value) || value > kMaxGpus) {
      Fail(std::string(name) + "='" + text + "' is not a GPU count N or TYPE:N (N at most " +
           std::to_string(kMaxGpus) + "); write it as Slurm does, e.g. \"2\" or \"a100:2\"");
    }
    count += value;
  }
  if (count > kMaxGpus) {
    Fail(std::string(name) + "='" + text + "' counts more than " + std::to_string(kMaxGpus) +
         " GPUs; write it as Slurm does, e.g. \"2\" or \"a100:2\"");
  }
  return count;
}

// The GPUs Slurm gave this task, in the order SlurmClusterResolver's comment gives; nullopt when
// none of the variables is set. TensorFlow counts CUDA_VISIBLE_DEVICES (else nvidia-smi) as the
// node's GPUs and divides them among the node's tasks, because its auto_set_gpu then narrows each
// task's CUDA_VISIBLE_DEVICES; chorus sets no variable, so the count is what this task sees,
// undivided.
std::optional<long long> SlurmGpusFromEnvironment() {
  for (const char* name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    if (std::optional<std::string> list = RawEnv(name)) return CountSlurmGpuList(name, *list);
  }
  if (std::optional<std::string> list = RawEnv("CUDA_VISIBLE_DEVICES")) {
    return CountCudaVisibleDevices(*list);
  }
  for (const char* name : {"SLURM_GPUS_PER_TASK", "SLURM_GPUS_ON_NODE"}) {
    if (std::optional<std::string> text = RawEnv(name)) return CountSlurmGpuNumber(name, *text);
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> ExpandSlurmHostList(const std::string& list) {
  const size_t first = list.find_first_not_of(" \t\n");
  const size_t last = list.find_last_not_of(" \t\n");
  if (first == std::string::npos) FailHostList(list, "is empty");
  const std::string trimmed = list.substr(first, last - first + 1);
  std::vector<std::string> hosts;
  for (const std::string& pattern : SplitOutsideBrackets(trimmed)) {
    if (pattern.empty()) FailHostList(list, "has an empty host name");
    if (pattern.find_first_of(" \t\n") != std::string::npos) {
      FailHostList(list, "has white space in '" + pattern + "'");
    }
    ExpandHost(list, pattern, &hosts);
  }
  return hosts;
}

SlurmClusterResolver::SlurmClusterResolver(uint16_t port_base)
    : SlurmClusterResolver(SlurmFromEnvironment({}, port_base, std::nullopt, "")) {}

SlurmClusterResolver::SlurmClusterResolver(Jobs jobs, uint16_t port_base,
                                           std::optional<int> tasks_per_node, std::string rpc_layer)
    : SlurmClusterResolver(
          SlurmFromEnvironment(std::move(jobs), port_base, tasks_per_node, std::move(rpc_layer))) {}

SlurmClusterResolver::SlurmClusterResolver(std::pair<SimpleClusterResolver, int> resolved)
    : SimpleClusterResolver(std::move(resolved.first)), max_tasks_per_node_(resolved.second) {}

// As TensorFlow's SlurmClusterResolver (TF 2.x, not 1.x's, whose num_accelerators() answered
// gpus_per_node): __init__ sets gpus_per_task = gpus_per_node // max(tasks per node) when only
// gpus_per_node is given, raises when max(tasks per node) * gpus_per_task > gpus_per_node, and
// num_accelerators() returns {"GPU": gpus_per_task}. Unlike TensorFlow, 0 GPUs is {} (as chorus
// counts devices), and gpus_per_task alone is not checked against the node's GPUs.
void SlurmClusterResolver::SetGpus(std::optional<int> gpus_per_node,
                                   std::optional<int> gpus_per_task) {
  for (const auto& [argument, count] :
       {std::pair{"gpus_per_node", gpus_per_node}, std::pair{"gpus_per_task", gpus_per_task}}) {
    if (count && *count < 0) {
      Fail(std::string("SlurmClusterResolver's ") + argument + " " + std::to_string(*count) +
           " is negative; pass how many GPUs there are, or leave it unset to read Slurm's "
           "variables");
    }
  }
  if (gpus_per_node && gpus_per_task &&
      static_cast<long long>(*gpus_per_task) * max_tasks_per_node_ > *gpus_per_node) {
    Fail("SlurmClusterResolver's gpus_per_task " + std::to_string(*gpus_per_task) + " on " +
         std::to_string(max_tasks_per_node_) + " task" + (max_tasks_per_node_ == 1 ? "" : "s") +
         " of a node needs " +
         std::to_string(static_cast<long long>(*gpus_per_task) * max_tasks_per_node_) +
         " GPUs, but gpus_per_node is " + std::to_string(*gpus_per_node) +
         "; lower gpus_per_task or raise gpus_per_node");
  }
  if (gpus_per_task) {
    gpus_per_task_ = gpus_per_task;
  } else if (gpus_per_node) {
    gpus_per_task_ = *gpus_per_node / std::max(max_tasks_per_node_, 1);
  } else {
    gpus_per_task_.reset();
  }
}

std::map<std::string, int> SlurmClusterResolver::num_accelerators(
    const std::optional<std::string>& task_type, std::optional<int> task_id) const {
  if (has_num_accelerators()) return SimpleClusterResolver::num_accelerators(task_type, task_id);
  std::optional<long long> gpus = gpus_per_task_;
  if (!gpus) gpus = SlurmGpusFromEnvironment();
  if (!gpus) return SimpleClusterResolver::num_accelerators(task_type, task_id);
  if (task_type || task_id) master(task_type, task_id);  // throws for a task the cluster lacks
  if (*gpus == 0) return {};
  return {{"GPU", static_cast<int>(*gpus)}};
}

}  // namespace chorus
