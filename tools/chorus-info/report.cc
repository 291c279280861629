#include "report.h"

#include <chorus/base/dtype.h>
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/collective/cross_device_ops.h>
#include <chorus/collective/selection.h>

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <map>

namespace chorus::info {

namespace {

std::string Bytes(uint64_t bytes) {
  if (bytes == 0) return "unknown";
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1ull << 30) << " GiB";
  return out.str();
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out.empty() ? "(nothing)" : out;
}

}  // namespace

void PrintSearchPath(const Registry& registry, std::ostream& out) {
  out << "Plugin folders, in search order:\n";
  for (const auto& dir : registry.searched_dirs()) {
    const auto& unreadable = registry.unreadable_dirs();
    const auto skipped = std::find_if(unreadable.begin(), unreadable.end(),
                                      [&](const Rejection& folder) { return folder.path == dir; });
    std::error_code ec;
    out << "  " << dir;
    if (skipped != unreadable.end()) {
      out << "  (skipped: " << skipped->reason << ")";
    } else if (!std::filesystem::is_directory(dir, ec)) {
      out << "  (does not exist)";
    }
    out << "\n";
  }
  auto filter = GetEnv("CHORUS_PLUGINS");
  out << "CHORUS_PLUGINS: " << (filter ? *filter : "(unset: load every plugin found)") << "\n";
}

void PrintPlugins(const Registry& registry, std::ostream& out) {
  out << "\nPlugins loaded (" << registry.plugins().size() << "):\n";
  for (const auto& plugin : registry.plugins()) {
    out << "  " << plugin->name() << "  ABI " << plugin->abi_major() << "." << plugin->abi_minor()
        << "  version " << plugin->version() << "\n"
        << "    path:     " << plugin->path() << "\n"
        << "    provides: " << Join(plugin->Provides()) << "\n";
    if (!plugin->description().empty()) out << "    about:    " << plugin->description() << "\n";
    for (const auto& note : plugin->notes()) out << "    note:     " << note << "\n";
  }
}

void PrintDevices(const Registry& registry, std::ostream& out) {
  out << "\nDevices:\n";
  try {
    for (const auto& enumerator : registry.DeviceEnumerators()) {
      out << "  platform " << enumerator->platform() << " (plugin " << enumerator->library().name()
          << "): " << enumerator->count() << " device(s)\n";
      for (uint32_t i = 0; i < enumerator->count(); ++i) {
        const DeviceInfo& info = enumerator->info(i);
        out << "    [" << i << "] " << info.name << "  kind " << DeviceKindName(info.kind)
            << "  memory " << Bytes(info.memory_bytes);
        if (info.numa_node >= 0) out << "  numa " << info.numa_node;
        if (!info.pci_bus_id.empty()) out << "  pci " << info.pci_bus_id;
        out << "\n";
      }
    }
  } catch (const Error& e) {
    out << "  error: " << e.what() << "\n";
  }
}

namespace {

JobShape ShapeOf(const JobDescription& job) {
  JobShape shape;
  shape.ranks = job.workers;
  shape.hosts = job.hosts;
  shape.ranks_per_host = job.workers % job.hosts == 0 ? job.workers / job.hosts : 0;
  return shape;
}

CommunicationImplementation ImplementationOf(const JobDescription& job) {
  return job.implementation == "RING"   ? CommunicationImplementation::kRing
         : job.implementation == "NCCL" ? CommunicationImplementation::kNccl
                                        : CommunicationImplementation::kAuto;
}

}  // namespace

std::vector<std::string> PrintSelection(const Registry& registry, const JobDescription& job,
                                        std::ostream& out) {
  std::vector<std::string> errors;
  out << "\nSelected by the current variables:\n";
  try {
    const auto devices = registry.DefaultDevices();
    std::vector<std::string> names;
    for (const auto& device : devices) names.push_back(device.name());
    out << "  default devices:  " << Join(names) << "\n";
    const auto selection = SelectCrossDeviceOps(registry, "", devices);
    out << "  cross-device ops: " << selection.name << "  (" << selection.source << ")\n";
  } catch (const Error& e) {
    out << "  cross-device ops: error: " << e.what() << "\n";
    errors.push_back(e.what());
  }
  out << "  available cross-device ops: " << Join(registry.CrossDeviceOpsNames()) << "\n";
  const JobShape shape = ShapeOf(job);
  try {
    const CollectivePlan plan = PlanCollectives(registry, ImplementationOf(job), shape);
    out << "  collective (" << shape.Describe() << "): " << plan.collectives.front() << "  ("
        << plan.source << ")\n";
  } catch (const Error& e) {
    out << "  collective (" << shape.Describe() << "): error: " << e.what() << "\n";
    errors.push_back(e.what());
  }
  out << "  available collectives: " << Join(registry.CollectiveNames()) << "\n";
  return errors;
}

namespace {

constexpr uint64_t kSizes[] = {4096, 65536, 1 << 20, 16 << 20, 64 << 20};

std::string SizeName(uint64_t bytes) {
  if (bytes >= (1 << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

// One table: a row per operation and size, a column per implementation, then the choice.
template <typename Names, typename ScoreAt, typename Choice>
void PrintTable(const Names& names, const std::vector<chorus_collective_op>& ops,
                ScoreAt&& score_at, Choice&& choice, std::ostream& out) {
  size_t width = 6;
  for (const auto& name : names) width = std::max(width, name.size() + 2);
  out << "    " << std::left << std::setw(16) << "operation" << std::setw(9) << "size";
  for (const auto& name : names) out << std::setw(static_cast<int>(width)) << name;
  out << "chosen (why)\n";
  std::map<std::string, std::string> zero_reasons;  // name -> a reason it scored 0
  for (chorus_collective_op op : ops) {
    const bool sized = op != CHORUS_OP_BARRIER;
    for (uint64_t bytes : kSizes) {
      if (!sized && bytes != kSizes[0]) break;
      const uint64_t b = sized ? bytes : 0;
      out << "    " << std::setw(16) << CollectiveOpName(op) << std::setw(9)
          << (sized ? SizeName(b) : "-");
      for (const auto& name : names) {
        const Score score = score_at(name, op, b);
        if (score.value == 0 && !zero_reasons.count(name)) zero_reasons[name] = score.reason;
        out << std::setw(static_cast<int>(width))
            << (score.value ? std::to_string(score.value) : "-");
      }
      out << choice(op, b) << "\n";
    }
  }
  for (const auto& [name, reason] : zero_reasons)
    out << "    (- " << name << ": " << reason << ")\n";
}

}  // namespace

void PrintScores(const Registry& registry, const JobDescription& job, std::ostream& out) {
  out << "\nScores (plugin.h 1.1; AUTO takes the highest per operation and size, f32):\n";
  try {
    const auto devices = registry.DefaultDevices();
    const JobShape local = LocalShape(devices);
    out << "  cross-device ops over the default devices (" << local.Describe() << "):\n";
    const auto selection = SelectCrossDeviceOps(registry, "", devices);
    const auto names = registry.CrossDeviceOpsNames();
    auto ops = CrossDeviceOps::Create(registry, selection.names, devices);
    PrintTable(
        names, {CHORUS_OP_ALL_REDUCE, CHORUS_OP_BROADCAST, CHORUS_OP_ALL_GATHER},
        [&](const std::string& name, chorus_collective_op op, uint64_t bytes) {
          const auto entry = registry.FindCrossDeviceOps(name, "chorus-info");
          return ScoreOf(entry.api->capabilities,
                         ScoreArgs(op, CHORUS_F32, bytes, local, CHORUS_REQUEST_AUTO));
        },
        [&](chorus_collective_op op, uint64_t bytes) {
          const std::string& chosen = ops->BackendFor(op, CHORUS_F32, bytes);
          if (selection.source.rfind("AUTO", 0) != 0) return chosen + " (" + selection.source + ")";
          const auto entry = registry.FindCrossDeviceOps(chosen, "chorus-info");
          const Score score = ScoreOf(entry.api->capabilities,
                                      ScoreArgs(op, CHORUS_F32, bytes, local, CHORUS_REQUEST_AUTO));
          return chosen + " (best score, " + std::to_string(score.value) + ")";
        },
        out);
  } catch (const Error& e) {
    out << "    error: " << e.what() << "\n";
  }
  const JobShape shape = ShapeOf(job);
  out << "  collectives for a job of " << shape.Describe()
      << " (--workers, --hosts; CommunicationOptions " << job.implementation << "):\n";
  try {
    const CollectivePlan plan = PlanCollectives(registry, ImplementationOf(job), shape);
    out << "    primary: " << plan.collectives.front() << " (" << plan.source << ")\n"
        << "    created: " << Join(plan.collectives) << "\n";
    // What a composing collective would compose, when AUTO chooses its parts.
    for (const auto& name : plan.collectives) {
      if (!SplitComposite(name).first.empty()) continue;  // "local+cross" names both parts
      const auto entry = registry.FindCollective(name, "chorus-info");
      const chorus_capabilities* caps = entry.api->capabilities;
      if (caps == nullptr || !(caps->flags & CHORUS_CAPABILITY_COMPOSES_BY_HOST) ||
          shape.ranks_per_host <= 0) {
        continue;
      }
      JobShape within = shape, across = shape;
      within.ranks = shape.ranks_per_host;
      within.hosts = 1;
      across.ranks = shape.hosts;
      across.ranks_per_host = 1;
      const auto at = [&](const JobShape& s) {
        const auto ranked = RankCollectives(
            registry, ScoreArgs(CHORUS_OP_ALL_REDUCE, CHORUS_F32, 1 << 20, s, plan.request),
            entry.plugin->name());
        return ranked.empty() || ranked.front().score.value == 0
                   ? std::string("none")
                   : ranked.front().name + " (" + std::to_string(ranked.front().score.value) + ")";
      };
      out << "    " << name << " composes, by AUTO: " << at(within) << " within each host, "
          << at(across) << " across hosts\n";
    }
    if (!plan.variable_rules.empty()) {
      out << "    CHORUS_ALGORITHM: " << DescribeRules(plan.variable_rules) << "\n";
    }
    if (!plan.tuning_rules.empty()) {
      out << "    " << plan.tuning_source << ": " << DescribeRules(plan.tuning_rules) << "\n";
    }
    PrintTable(
        registry.CollectiveNames(),
        {CHORUS_OP_ALL_REDUCE, CHORUS_OP_BROADCAST, CHORUS_OP_ALL_GATHER, CHORUS_OP_REDUCE_SCATTER,
         CHORUS_OP_BARRIER},
        [&](const std::string& name, chorus_collective_op op, uint64_t bytes) {
          const auto entry = registry.FindCollective(name, "chorus-info");
          return ScoreOf(entry.api->capabilities,
                         ScoreArgs(op, bytes ? CHORUS_F32 : CHORUS_U8, bytes, shape, plan.request));
        },
        [&](chorus_collective_op op, uint64_t bytes) {
          const Decision d = Decide(registry, plan, op, bytes ? CHORUS_F32 : CHORUS_U8, bytes);
          return (d.collective.empty() ? std::string("none") : d.collective) + " (" + d.source +
                 ")";
        },
        out);
  } catch (const Error& e) {
    out << "    error: " << e.what() << "\n";
  }
}

void PrintRejected(const Registry& registry, std::ostream& out) {
  out << "\nRejected candidates (" << registry.rejected().size() << "):\n";
  for (const auto& rejection : registry.rejected()) {
    out << "  " << rejection.path << "\n    reason: " << rejection.reason << "\n";
  }
}

}  // namespace chorus::info
