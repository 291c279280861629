#include "report.h"

#include <chorus/base/dtype.h>
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/collective/cross_device_ops.h>
#include <chorus/collective/selection.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

namespace chorus::info {

namespace {

constexpr size_t kColumns = 100;
constexpr uint64_t kSizes[] = {4096, 65536, 1 << 20, 16 << 20, 64 << 20};

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

std::string SizeName(uint64_t bytes) {
  if (bytes >= (1 << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

// `first` then `text`, broken at spaces into lines of at most kColumns; continuation lines start
// with `indent` spaces. A word longer than a line (a path) stays whole.
void Wrap(std::ostream& out, const std::string& first, const std::string& text, size_t indent) {
  std::string line = first;
  std::istringstream words(text);
  std::string word;
  bool fresh = true;  // nothing of `text` on this line yet
  while (words >> word) {
    if (!fresh && line.size() + 1 + word.size() > kColumns) {
      out << line << "\n";
      line = std::string(indent, ' ') + word;
    } else {
      line += (fresh ? "" : " ") + word;
    }
    fresh = false;
  }
  out << line << "\n";
}

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

// ---- What the core makes of a declared score ---------------------------------------------------

// One candidate's score in one row as the core takes it, and what the core changed of what the
// plugin declared.
struct Cell {
  Score score;
  std::string how;        // a pair's "ring 50 x ucx 30 / 100"
  std::string discarded;  // "scores 250 for all_reduce of 1 MiB: above 100, taken as 0"
  bool by_name_only = false;
};

// "all_reduce of 1 MiB", "barrier".
std::string OperationText(const chorus_score_args& args) {
  if (args.op == CHORUS_OP_BARRIER) return "barrier";
  return std::string(CollectiveOpName(args.op)) + " of " + SizeName(args.bytes);
}

// What the core discarded of the score `capabilities` declare for `args` (Score::invalid: above
// CHORUS_SCORE_MAX, or a score function that threw); "" when it took the score as declared.
std::string Discarded(const chorus_capabilities* capabilities, const chorus_score_args& args,
                      const Score& score) {
  if (!score.invalid || capabilities == nullptr) return "";
  const std::string max = std::to_string(CHORUS_SCORE_MAX);
  try {  // asked again for the figure: the core's reason has it only in its text
    chorus_score_args with_context = args;
    with_context.context = capabilities->context;
    const uint32_t declared = capabilities->score(&with_context);
    if (declared > CHORUS_SCORE_MAX) {
      return "scores " + std::to_string(declared) + " for " + OperationText(args) + ": above " +
             max + ", taken as 0";
    }
  } catch (...) {
    return "its score function threw for " + OperationText(args) + ": taken as 0";
  }
  return score.reason;  // a score that changed between the calls
}

Cell PlainCell(const chorus_capabilities* capabilities, const chorus_score_args& args) {
  Cell cell{ScoreOf(capabilities, args), {}, {}, capabilities == nullptr};
  cell.discarded = Discarded(capabilities, args, cell.score);
  return cell;
}

// The algorithm and the transport a collective is made of.
struct Halves {
  const chorus_algorithm_api* algorithm = nullptr;
  const chorus_transport_api* transport = nullptr;
};

// For a pair the registry made, and core_ring (ring@tcp); nullopt for any other collective.
std::optional<Halves> HalvesOf(const Registry& registry,
                               const Registry::CollectiveImplementation& entry) {
  std::string name = entry.api->name;
  if (entry.plugin->builtin() && name == kCoreRingName) {
    name = kCoreRingPairName;
  } else if (entry.parts.size() != 2) {
    return std::nullopt;
  }
  const auto at = name.find('@');
  if (at == std::string::npos) return std::nullopt;
  Halves halves;
  for (const auto& a : registry.algorithms()) {
    if (name.compare(0, at, a.api->name) == 0 && std::strlen(a.api->name) == at) {
      halves.algorithm = a.api;
    }
  }
  for (const auto& t : registry.transports()) {
    if (name.substr(at + 1) == t.api->name) halves.transport = t.api;
  }
  if (halves.algorithm == nullptr || halves.transport == nullptr) return std::nullopt;
  return halves;
}

// A pair's score, with each half's: the core scores a pair algorithm x transport / 100, both
// asked with the same args (a transport's ops ignored), and 0 when a half declares no
// capabilities or a score the core discards.
Cell PairCell(const Halves& halves, const chorus_capabilities* pair,
              const chorus_score_args& args) {
  Cell cell;
  cell.score = ScoreOf(pair, args);
  const char* algorithm = halves.algorithm->name;
  const char* transport = halves.transport->name;
  const chorus_capabilities* algorithm_capabilities = halves.algorithm->capabilities;
  if (algorithm_capabilities == nullptr || halves.transport->capabilities == nullptr) {
    cell.by_name_only = true;
    cell.score.reason = algorithm_capabilities == nullptr
                            ? std::string("its algorithm ") + algorithm +
                                  " declares no capabilities: chosen by name only"
                            : std::string("its transport ") + transport +
                                  " declares no capabilities: chosen by name only";
    return cell;
  }
  chorus_capabilities transport_capabilities = *halves.transport->capabilities;
  transport_capabilities.ops = (1u << (CHORUS_OP_BARRIER + 1)) - 1;  // ignored: every op
  const Score a = ScoreOf(algorithm_capabilities, args);
  const Score t = ScoreOf(&transport_capabilities, args);
  if (cell.score.unknown && (a.unknown || t.unknown)) {
    cell.how = std::string(algorithm) + " " + a.Text() + " x " + transport + " " + t.Text() +
               ": unknown until measured";
  } else if (a.value * t.value / CHORUS_SCORE_MAX == cell.score.value) {
    cell.how = std::string(algorithm) + " " + std::to_string(a.value) + " x " + transport + " " +
               std::to_string(t.value) + " / " + std::to_string(CHORUS_SCORE_MAX);
  }
  // The core asks the transport only where the algorithm scores above 0.
  if (a.invalid) {
    cell.discarded = std::string("its algorithm ") + algorithm + " " +
                     Discarded(algorithm_capabilities, args, a);
  } else if (a.value > 0 && t.invalid) {
    cell.discarded = std::string("its transport ") + transport + " " +
                     Discarded(&transport_capabilities, args, t);
  }
  // Why a pair scores 0: the half that does, or what the core discarded.
  if (cell.score.value == 0 && !cell.discarded.empty()) {
    cell.score.reason = cell.discarded;
  } else if (cell.score.value == 0 && !cell.how.empty() &&
             cell.score.reason.rfind("scores 0", 0) == 0) {
    cell.score.reason += " (= " + cell.how + ")";
  }
  return cell;
}

// Fills the rows of `table` for `ops` at every size; `cell_at` scores a name, `choice` gives
// {chosen, why}.
template <typename CellAt, typename Choice>
void FillTable(const std::vector<chorus_collective_op>& ops, CellAt&& cell_at, Choice&& choice,
               ScoreTable* table) {
  std::map<std::string, std::string> zero_reasons;  // name -> a reason it scored 0
  std::map<std::string, std::string> discarded;     // name -> the first score taken as 0
  std::set<std::string> by_name_only;
  for (chorus_collective_op op : ops) {
    const bool sized = op != CHORUS_OP_BARRIER;
    for (uint64_t bytes : kSizes) {
      if (!sized && bytes != kSizes[0]) break;
      ScoreRow row;
      row.op = op;
      row.bytes = sized ? bytes : 0;
      for (const auto& name : table->names) {
        const Cell cell = cell_at(name, op, row.bytes);
        if (cell.score.value == 0 && !zero_reasons.count(name)) {
          zero_reasons[name] = cell.score.reason;
        }
        if (!cell.discarded.empty() && !discarded.count(name)) discarded[name] = cell.discarded;
        if (cell.by_name_only) by_name_only.insert(name);
        row.scores.push_back(cell.score.unknown ? CHORUS_SCORE_UNKNOWN : cell.score.value);
        row.how.push_back(cell.how);
      }
      std::tie(row.chosen, row.why) = choice(op, row.bytes);
      table->rows.push_back(std::move(row));
    }
  }
  for (auto& [name, reason] : zero_reasons) table->excluded.emplace_back(name, reason);
  for (const auto& name : table->names) {  // in the registry's order
    if (discarded.count(name)) table->discarded.emplace_back(name, discarded[name]);
    if (by_name_only.count(name)) table->by_name_only.push_back(name);
  }
}

void BuildCrossDeviceOpsScores(const Registry& registry, ScoreTable* table) {
  try {
    const auto devices = registry.DefaultDevices();
    const JobShape local = LocalShape(devices);
    table->title = "cross-device ops over the default devices (" + local.Describe() + ")";
    const auto selection = SelectCrossDeviceOps(registry, "", devices);
    table->names = registry.CrossDeviceOpsNames();
    auto ops = CrossDeviceOps::Create(registry, selection.names, devices);
    const auto score_at = [&](const std::string& name, chorus_collective_op op, uint64_t bytes) {
      const auto entry = registry.FindCrossDeviceOps(name, "chorus-info");
      return PlainCell(entry.api->capabilities,
                       ScoreArgs(op, CHORUS_F32, bytes, local, CHORUS_REQUEST_AUTO));
    };
    FillTable(
        {CHORUS_OP_ALL_REDUCE, CHORUS_OP_BROADCAST, CHORUS_OP_ALL_GATHER}, score_at,
        [&](chorus_collective_op op, uint64_t bytes) {
          const std::string& chosen = ops->BackendFor(op, CHORUS_F32, bytes);
          const bool by_score = selection.source.rfind("AUTO", 0) == 0;
          return std::make_pair(chosen, by_score ? std::string("best score") : selection.source);
        },
        table);
  } catch (const Error& e) {
    table->error = e.what();
  }
}

void BuildCollectiveScores(const Registry& registry, const JobDescription& job, ScoreTable* table) {
  const JobShape shape = ShapeOf(job);
  table->title = "collectives for a job of " + shape.Describe() + " (CommunicationOptions " +
                 job.implementation + ")";
  try {
    const CollectivePlan plan = PlanCollectives(registry, ImplementationOf(job), shape);
    table->notes.push_back("created: " + Join(plan.collectives));
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
                   : ranked.front().name + " (" + ranked.front().score.Text() + ")";
      };
      table->notes.push_back(name + " composes, by AUTO: " + at(within) + " within each host, " +
                             at(across) + " across hosts");
    }
    if (!plan.variable_rules.empty()) {
      table->notes.push_back("CHORUS_ALGORITHM: " + DescribeRules(plan.variable_rules));
    }
    if (!plan.tuning_rules.empty()) {
      table->notes.push_back(plan.tuning_source + ": " + DescribeRules(plan.tuning_rules));
    }
    table->names = registry.CollectiveNames();
    FillTable(
        {CHORUS_OP_ALL_REDUCE, CHORUS_OP_BROADCAST, CHORUS_OP_ALL_GATHER, CHORUS_OP_REDUCE_SCATTER,
         CHORUS_OP_BARRIER},
        [&](const std::string& name, chorus_collective_op op, uint64_t bytes) {
          const auto entry = registry.FindCollective(name, "chorus-info");
          const chorus_score_args args =
              ScoreArgs(op, bytes ? CHORUS_F32 : CHORUS_U8, bytes, shape, plan.request);
          const auto halves = HalvesOf(registry, entry);
          return halves ? PairCell(*halves, entry.api->capabilities, args)
                        : PlainCell(entry.api->capabilities, args);
        },
        [&](chorus_collective_op op, uint64_t bytes) {
          const Decision d = Decide(registry, plan, op, bytes ? CHORUS_F32 : CHORUS_U8, bytes);
          // AUTO's source is "score N (...)": the summary says it in two words.
          const bool by_score = d.source.rfind("score ", 0) == 0;
          return std::make_pair(d.collective.empty() ? std::string("none") : d.collective,
                                by_score ? std::string("best score") : d.source);
        },
        table);
  } catch (const Error& e) {
    table->error = e.what();
  }
}

// The plugin's tables that declare no capabilities: "collective(x)", "algorithm(y)".
std::vector<std::string> ByNameOnly(const PluginLibrary& plugin) {
  std::vector<std::string> tables;
  const auto add = [&](const char* interface, const auto& list) {
    for (const auto* api : list) {
      if (api->capabilities == nullptr)
        tables.push_back(std::string(interface) + "(" + api->name + ")");
    }
  };
  add("cross_device_ops", plugin.cross_device_ops_list());
  add("collective", plugin.collectives());
  add("algorithm", plugin.algorithms());
  add("transport", plugin.transports());
  return tables;
}

void PrintHeader(const Registry& registry, const Report& report, std::ostream& out) {
  out << "chorus core ABI " << CHORUS_ABI_MAJOR << "." << CHORUS_ABI_MINOR << "\n";
  out << "Plugin folders, in search order:\n";
  for (const auto& [dir, state] : report.search_dirs) Wrap(out, "  " + dir + "  ", state, 4);
  out << "CHORUS_PLUGINS: " << report.plugin_filter << "\n";
  out << "\nPlugins loaded (" << registry.plugins().size() << "):\n";
  for (const auto& plugin : registry.plugins()) {
    out << "  " << plugin->name() << "  ABI " << plugin->abi_major() << "." << plugin->abi_minor()
        << "  version " << plugin->version() << "\n";
    Wrap(out, "    path:     ", plugin->path(), 14);
    Wrap(out, "    provides: ", Join(plugin->Provides()), 14);
    if (const auto by_name = ByNameOnly(*plugin); !by_name.empty()) {
      // An algorithm's or transport's pairs then have no score either.
      const bool pairs = std::any_of(by_name.begin(), by_name.end(), [](const std::string& t) {
        return t.rfind("algorithm(", 0) == 0 || t.rfind("transport(", 0) == 0;
      });
      Wrap(out, "    by name:  ",
           Join(by_name) + (by_name.size() == 1 ? " declares" : " declare") +
               " no capabilities: only a name selects " + (by_name.size() == 1 ? "it" : "them") +
               (pairs ? " (and the pairs ALGORITHM@TRANSPORT made of them)" : "") + ", never AUTO",
           14);
    }
    if (!plugin->description().empty()) Wrap(out, "    about:    ", plugin->description(), 14);
    for (const auto& note : plugin->notes()) Wrap(out, "    note:     ", note, 14);
  }
  if (report.plugins_only) return;
  out << "\nDevices:\n";
  try {
    for (const auto& enumerator : registry.DeviceEnumerators()) {
      out << "  platform " << enumerator->platform() << " (plugin " << enumerator->library().name()
          << "): " << enumerator->count() << " device(s)\n";
      if (!enumerator->description().empty()) {
        out << "    about: " << enumerator->description() << "\n";
      }
      for (uint32_t i = 0; i < enumerator->count(); ++i) {
        const DeviceInfo& info = enumerator->info(i);
        out << "    [" << i << "] " << info.name << "  kind " << DeviceKindName(info.kind)
            << "  memory " << Bytes(info.memory_bytes);
        if (info.numa_node >= 0) out << "  numa " << info.numa_node;
        if (!info.pci_bus_id.empty()) out << "  pci " << info.pci_bus_id;
        if (info.coords[0] >= 0) {
          out << "  coords (";
          for (size_t c = 0; c < info.coords.size() && info.coords[c] >= 0; ++c) {
            out << (c > 0 ? "," : "") << info.coords[c];
          }
          out << ")";
        }
        out << "\n";
      }
      // What AUTO would reduce with across this platform's devices, when they are not the
      // default devices (those are under "Selected by the current variables").
      if (enumerator->count() > 1 && enumerator != registry.CpuDevices()) {
        std::vector<Device> devices;
        for (uint32_t i = 0; i < enumerator->count(); ++i) devices.push_back({enumerator, i});
        try {
          const auto selection = SelectCrossDeviceOps(registry, "", devices);
          Wrap(out, "    cross-device ops over them: " + selection.name + "  ",
               "(" + selection.source + ")", 6);
        } catch (const Error& e) {
          Wrap(out, "    cross-device ops over them: ", std::string("none: ") + e.what(), 6);
        }
      }
    }
  } catch (const Error& e) {
    Wrap(out, "  error: ", e.what(), 4);
  }
  out << "\nSelected by the current variables:\n";
  Wrap(out, "  default devices:  ", Join(report.default_devices), 4);
  // "name  (why)": the two blanks stay, as scripts match them.
  if (report.cross_device_ops.empty()) {
    Wrap(out, "  cross-device ops: ", "error: " + report.cross_device_ops_source, 4);
  } else {
    Wrap(out, "  cross-device ops: " + report.cross_device_ops + "  ",
         "(" + report.cross_device_ops_source + ")", 4);
  }
  Wrap(out, "  available cross-device ops: ", Join(report.available_cross_device_ops), 4);
  const std::string collective = "  collective (" + report.job_shape + "): ";
  if (report.collective.empty()) {
    Wrap(out, collective, "error: " + report.collective_source, 4);
  } else {
    Wrap(out, collective + report.collective + "  ", "(" + report.collective_source + ")", 4);
  }
  Wrap(out, "  available collectives: ", Join(report.available_collectives), 4);
}

void PrintRejected(const Registry& registry, std::ostream& out) {
  out << "\nRejected candidates (" << registry.rejected().size() << "):\n";
  for (const auto& rejection : registry.rejected()) {
    Wrap(out, "  ", rejection.path, 4);
    Wrap(out, "    reason: ", rejection.reason, 12);
  }
}

// A row's score as printed: CHORUS_SCORE_UNKNOWN is "unknown" (the core ranks it as 1).
std::string ScoreText(uint32_t score) {
  return score == CHORUS_SCORE_UNKNOWN ? "unknown" : std::to_string(score);
}
uint32_t RankValue(uint32_t score) { return score == CHORUS_SCORE_UNKNOWN ? 1 : score; }

std::string Scored(const std::string& name, uint32_t score) {
  return name + " " + ScoreText(score);
}

// `text` padded to `width`, or followed by one blank when it is as wide or wider (a long name).
std::string Column(const std::string& text, size_t width) {
  return text.size() < width ? text + std::string(width - text.size(), ' ') : text + " ";
}

// Per operation, the sizes that share a pick, a runner-up and a why make one line.
void PrintPicks(const ScoreTable& table, std::ostream& out) {
  Wrap(out, "  ", table.title + ":", 4);
  if (!table.error.empty()) {
    Wrap(out, "    error: ", table.error, 6);
    return;
  }
  for (const auto& note : table.notes) Wrap(out, "    ", note, 6);
  out << "    " << std::left << std::setw(15) << "operation" << std::setw(17) << "sizes"
      << std::setw(27) << "pick (score)" << std::setw(27) << "runner-up"
      << "why\n";
  struct Line {
    chorus_collective_op op;
    uint64_t from, to;
    std::string pick, runner_up, why;
  };
  std::vector<Line> lines;
  // How the pairs among the picks and runners-up score: "ring@ucx 15 (= ring 50 x ucx 30 / 100)".
  std::vector<std::string> pairs;
  const auto add_pair = [&](size_t i, const ScoreRow& row) {
    if (i >= row.how.size() || row.how[i].empty() || row.scores[i] == 0) return;
    const std::string pair = Scored(table.names[i], row.scores[i]) + " (= " + row.how[i] + ")";
    if (std::find(pairs.begin(), pairs.end(), pair) == pairs.end()) pairs.push_back(pair);
  };
  for (const ScoreRow& row : table.rows) {
    uint32_t chosen_score = 0;
    std::string runner_up = "-";
    uint32_t runner_score = 0;
    size_t chosen = table.names.size(), runner = table.names.size();
    for (size_t i = 0; i < table.names.size(); ++i) {
      if (table.names[i] == row.chosen) {
        chosen_score = row.scores[i];
        chosen = i;
      } else if (RankValue(row.scores[i]) > runner_score) {
        runner_score = RankValue(row.scores[i]);
        runner_up = Scored(table.names[i], row.scores[i]);
        runner = i;
      }
    }
    add_pair(chosen, row);
    add_pair(runner, row);
    const std::string pick = chosen_score ? Scored(row.chosen, chosen_score) : row.chosen;
    if (!lines.empty() && lines.back().op == row.op && lines.back().pick == pick &&
        lines.back().runner_up == runner_up && lines.back().why == row.why) {
      lines.back().to = row.bytes;
    } else {
      lines.push_back({row.op, row.bytes, row.bytes, pick, runner_up, row.why});
    }
  }
  for (const Line& line : lines) {
    const std::string sizes = line.from == 0 ? "-"
                              : line.from == line.to
                                  ? SizeName(line.from)
                                  : SizeName(line.from) + " - " + SizeName(line.to);
    std::ostringstream start;
    start << "    " << Column(CollectiveOpName(line.op), 15) << Column(sizes, 17)
          << Column(line.pick, 27) << Column(line.runner_up, 27);
    // A long why (a variable's rule, the tuning file's line) goes on lines of its own.
    if (start.str().size() + line.why.size() <= kColumns) {
      out << start.str() << line.why << "\n";
    } else {
      std::string text = start.str();
      text.erase(text.find_last_not_of(' ') + 1);
      out << text << "\n";
      Wrap(out, "      why: ", line.why, 11);
    }
  }
  // What the core made of the declared scores, where it changed them.
  if (!pairs.empty()) {
    Wrap(out, "    pairs score algorithm x transport / " + std::to_string(CHORUS_SCORE_MAX) + ": ",
         Join(pairs), 6);
  }
  for (const auto& [name, what] : table.discarded) {
    Wrap(out, "    " + name + ": ", what + " (a plugin bug: report it to its vendor)", 6);
  }
  if (!table.by_name_only.empty()) {
    Wrap(out, "    chosen by name only (no capabilities): ", Join(table.by_name_only), 6);
  }
  if (!table.excluded.empty()) {
    out << "    (" << table.excluded.size()
        << " more score 0 or cannot serve some of these; --all says why)\n";
  }
}

// The full matrix: a column per implementation (as wide as the names need).
void PrintMatrix(const ScoreTable& table, std::ostream& out) {
  out << "  " << table.title << ":\n";
  if (!table.error.empty()) {
    out << "    error: " << table.error << "\n";
    return;
  }
  for (const auto& note : table.notes) out << "    " << note << "\n";
  size_t width = 6;
  for (const auto& name : table.names) width = std::max(width, name.size() + 2);
  out << "    " << std::left << std::setw(16) << "operation" << std::setw(9) << "size";
  for (const auto& name : table.names) out << std::setw(static_cast<int>(width)) << name;
  out << "chosen (why)\n";
  for (const ScoreRow& row : table.rows) {
    out << "    " << std::setw(16) << CollectiveOpName(row.op) << std::setw(9)
        << (row.bytes ? SizeName(row.bytes) : "-");
    for (uint32_t score : row.scores) {
      out << std::setw(static_cast<int>(width)) << (score ? ScoreText(score) : "-");
    }
    out << row.chosen << " (" << row.why << ")\n";
  }
  for (const auto& [name, reason] : table.excluded)
    out << "    (- " << name << ": " << reason << ")\n";
  // How each pair's scores are made, every distinct one: "(rhd@ucx 12 = rhd 40 x ucx 30 / 100;
  // 18 = rhd 60 x ucx 30 / 100)". (A score taken as 0 is in the lines above: its reason.)
  for (size_t i = 0; i < table.names.size(); ++i) {
    std::vector<std::string> ways;
    for (const ScoreRow& row : table.rows) {
      if (i >= row.how.size() || row.how[i].empty() || row.scores[i] == 0) continue;
      const std::string way = ScoreText(row.scores[i]) + " = " + row.how[i];
      if (std::find(ways.begin(), ways.end(), way) == ways.end()) ways.push_back(way);
    }
    std::string text;
    for (const auto& way : ways) text += (text.empty() ? "" : "; ") + way;
    if (!text.empty()) out << "    (" << table.names[i] << " " << text << ")\n";
  }
}

nlohmann::json TableJson(const ScoreTable& table) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ScoreRow& row : table.rows) {
    nlohmann::json scores = nlohmann::json::object();
    nlohmann::json how = nlohmann::json::object();  // the pairs': "ring 50 x ucx 30 / 100"
    for (size_t i = 0; i < table.names.size(); ++i) {
      if (row.scores[i] == CHORUS_SCORE_UNKNOWN) {
        scores[table.names[i]] = "unknown";
      } else {
        scores[table.names[i]] = row.scores[i];
      }
      if (i < row.how.size() && !row.how[i].empty()) how[table.names[i]] = row.how[i];
    }
    rows.push_back({{"operation", CollectiveOpName(row.op)},
                    {"bytes", row.bytes},
                    {"scores", scores},
                    {"how", how},
                    {"chosen", row.chosen},
                    {"why", row.why}});
  }
  nlohmann::json excluded = nlohmann::json::object();
  for (const auto& [name, reason] : table.excluded) excluded[name] = reason;
  nlohmann::json discarded = nlohmann::json::object();
  for (const auto& [name, what] : table.discarded) discarded[name] = what;
  nlohmann::json json = {{"title", table.title},   {"notes", table.notes},
                         {"rows", rows},           {"excluded", excluded},
                         {"discarded", discarded}, {"by_name_only", table.by_name_only}};
  if (!table.error.empty()) json["error"] = table.error;
  return json;
}

}  // namespace

Report BuildReport(const Registry& registry, const JobDescription& job, bool plugins_only) {
  Report report;
  report.plugins_only = plugins_only;
  for (const auto& dir : registry.searched_dirs()) {
    const auto& unreadable = registry.unreadable_dirs();
    const auto skipped = std::find_if(unreadable.begin(), unreadable.end(),
                                      [&](const Rejection& folder) { return folder.path == dir; });
    std::error_code ec;
    if (skipped != unreadable.end()) {
      report.search_dirs.emplace_back(dir, "(skipped: " + skipped->reason + ")");
    } else if (!std::filesystem::is_directory(dir, ec)) {
      report.search_dirs.emplace_back(dir, "(does not exist)");
    } else {
      report.search_dirs.emplace_back(dir, "");
    }
  }
  const auto filter = GetEnv("CHORUS_PLUGINS");
  report.plugin_filter = filter ? *filter : "(unset: load every plugin found)";
  if (plugins_only) return report;

  try {
    const auto devices = registry.DefaultDevices();
    for (const auto& device : devices) report.default_devices.push_back(device.name());
    const auto selection = SelectCrossDeviceOps(registry, "", devices);
    report.cross_device_ops = selection.name;
    report.cross_device_ops_source = selection.source;
  } catch (const Error& e) {
    report.cross_device_ops_source = e.what();
    report.errors.push_back(e.what());
  }
  report.available_cross_device_ops = registry.CrossDeviceOpsNames();
  const JobShape shape = ShapeOf(job);
  report.job_shape = shape.Describe();
  try {
    const CollectivePlan plan = PlanCollectives(registry, ImplementationOf(job), shape);
    report.collective = plan.collectives.front();
    report.collective_source = plan.source;
  } catch (const Error& e) {
    report.collective_source = e.what();
    report.errors.push_back(e.what());
  }
  report.available_collectives = registry.CollectiveNames();
  BuildCrossDeviceOpsScores(registry, &report.cross_device_ops_scores);
  BuildCollectiveScores(registry, job, &report.collective_scores);
  return report;
}

void PrintSummary(const Registry& registry, const Report& report, std::ostream& out) {
  PrintHeader(registry, report, out);
  if (!report.plugins_only) {
    out << "\nWhat AUTO picks per operation and size (f32; --all: every score, --json: for "
           "tools):\n";
    PrintPicks(report.cross_device_ops_scores, out);
    PrintPicks(report.collective_scores, out);
  }
  PrintRejected(registry, out);
}

void PrintAll(const Registry& registry, const Report& report, std::ostream& out) {
  PrintHeader(registry, report, out);
  if (!report.plugins_only) {
    out << "\nScores (AUTO takes the highest per operation and size, f32):\n";
    PrintMatrix(report.cross_device_ops_scores, out);
    PrintMatrix(report.collective_scores, out);
  }
  PrintRejected(registry, out);
}

void PrintJson(const Registry& registry, const Report& report, std::ostream& out) {
  nlohmann::json plugins = nlohmann::json::array();
  for (const auto& plugin : registry.plugins()) {
    plugins.push_back(
        {{"name", plugin->name()},
         {"abi", std::to_string(plugin->abi_major()) + "." + std::to_string(plugin->abi_minor())},
         {"version", plugin->version()},
         {"path", plugin->path()},
         {"provides", plugin->Provides()},
         {"about", plugin->description()},
         {"by_name_only", ByNameOnly(*plugin)},
         {"notes", plugin->notes()}});
  }
  nlohmann::json rejected = nlohmann::json::array();
  for (const auto& rejection : registry.rejected()) {
    rejected.push_back({{"path", rejection.path}, {"reason", rejection.reason}});
  }
  nlohmann::json folders = nlohmann::json::array();
  for (const auto& [dir, state] : report.search_dirs) {
    folders.push_back({{"path", dir}, {"state", state}});
  }
  nlohmann::json json = {
      {"abi", std::to_string(CHORUS_ABI_MAJOR) + "." + std::to_string(CHORUS_ABI_MINOR)},
      {"plugin_folders", folders},
      {"plugin_filter", report.plugin_filter},
      {"plugins", plugins},
      {"rejected", rejected}};
  if (!report.plugins_only) {
    nlohmann::json platforms = nlohmann::json::array();
    try {
      for (const auto& enumerator : registry.DeviceEnumerators()) {
        nlohmann::json devices = nlohmann::json::array();
        for (uint32_t i = 0; i < enumerator->count(); ++i) {
          const DeviceInfo& info = enumerator->info(i);
          nlohmann::json coords = nlohmann::json::array();
          for (size_t c = 0; c < info.coords.size() && info.coords[c] >= 0; ++c) {
            coords.push_back(info.coords[c]);
          }
          devices.push_back({{"name", info.name},
                             {"kind", DeviceKindName(info.kind)},
                             {"memory_bytes", info.memory_bytes},
                             {"numa_node", info.numa_node},
                             {"pci_bus_id", info.pci_bus_id},
                             {"coords", coords}});
        }
        platforms.push_back({{"platform", enumerator->platform()},
                             {"plugin", enumerator->library().name()},
                             {"about", enumerator->description()},
                             {"devices", devices}});
      }
    } catch (const Error& e) {
      json["devices_error"] = e.what();
    }
    json["devices"] = platforms;
    json["selection"] = {
        {"default_devices", report.default_devices},
        {"cross_device_ops",
         {{"name", report.cross_device_ops}, {"why", report.cross_device_ops_source}}},
        {"collective",
         {{"job", report.job_shape},
          {"name", report.collective},
          {"why", report.collective_source}}},
        {"available_cross_device_ops", report.available_cross_device_ops},
        {"available_collectives", report.available_collectives},
        {"errors", report.errors}};
    json["scores"] = {{"cross_device_ops", TableJson(report.cross_device_ops_scores)},
                      {"collectives", TableJson(report.collective_scores)}};
  }
  out << json.dump(2) << "\n";
}

}  // namespace chorus::info
