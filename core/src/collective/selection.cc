#include <chorus/base/dtype.h>
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/collective/selection.h>
#include <strings.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "base/logging.h"
#include "base/variable_file.h"
#include "collective/autotune.h"
#include "collective/current_registry.h"
#include "runtime/capability_score.h"

namespace chorus {
namespace {

std::string Join(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

std::string Trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") - begin + 1);
}

constexpr uint32_t kEveryOp =
    CHORUS_OP_BIT(CHORUS_OP_ALL_REDUCE) | CHORUS_OP_BIT(CHORUS_OP_BROADCAST) |
    CHORUS_OP_BIT(CHORUS_OP_ALL_GATHER) | CHORUS_OP_BIT(CHORUS_OP_REDUCE_SCATTER) |
    CHORUS_OP_BIT(CHORUS_OP_BARRIER);

// Once per implementation and process: a broken score is a plugin bug its user should see.
void WarnOfInvalidScore(const Ranked& ranked) {
  static auto* mutex = new std::mutex();
  static auto* warned = new std::set<std::string>();
  std::lock_guard<std::mutex> lock(*mutex);
  if (!warned->insert(ranked.plugin + "/" + ranked.name).second) return;
  Log().warn("plugin {}: '{}' {}", ranked.plugin, ranked.name, ranked.score.reason);
}

template <typename Entry>
std::vector<Ranked> Rank(const Registry& registry, const std::vector<Entry>& entries,
                         const chorus_score_args& args, std::string_view exclude_plugin) {
  internal::RegistryScope scope(registry);  // a composing plugin's score asks the host
  std::vector<Ranked> ranked;
  for (const auto& entry : entries) {
    if (!exclude_plugin.empty() && entry.plugin->name() == exclude_plugin) continue;
    ranked.push_back(
        {entry.api->name, entry.plugin->name(), ScoreOf(entry.api->capabilities, args)});
    if (ranked.back().score.invalid) WarnOfInvalidScore(ranked.back());
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const Ranked& a, const Ranked& b) { return RanksAbove(a.score, b.score); });
  return ranked;
}

std::string DescribeRanking(const std::vector<Ranked>& ranked) {
  std::vector<std::string> parts;
  for (const auto& r : ranked) {
    if (r.score.value > 0) parts.push_back(r.name + " " + r.score.Text());
  }
  return Join(parts);
}

// The first positive integer or "*" (0) of a section key.
int SectionNumber(const std::string& value, const std::string& where) {
  if (value == "*") return 0;
  try {
    size_t used = 0;
    const int number = std::stoi(value, &used);
    if (used == value.size() && number > 0) return number;
  } catch (const std::exception&) {
  }
  throw Error(CHORUS_INVALID_ARGUMENT, where + ": '" + value + "' is not a positive number or *");
}

// How a section of the tuning file names the job shape it is for: "[workers=2 hosts=*]".
std::string SectionName(int workers, int hosts) {
  const auto number = [](int n) { return n != 0 ? std::to_string(n) : std::string("*"); };
  return "[workers=" + number(workers) + " hosts=" + number(hosts) + "]";
}

}  // namespace

// ---- Job shape --------------------------------------------------------------------------------

JobShape JobShape::FromHostIds(const std::vector<std::string>& host_of_rank, std::string memory) {
  std::map<std::string, int> per_host;
  std::map<std::string, uint32_t> number;
  JobShape shape;
  for (const auto& host : host_of_rank) {
    ++per_host[host];
    const auto [it, added] = number.emplace(host, static_cast<uint32_t>(number.size()));
    shape.host_of_rank.push_back(it->second);
  }
  shape.ranks = static_cast<int>(host_of_rank.size());
  shape.hosts = static_cast<int>(per_host.size());
  shape.ranks_per_host = per_host.empty() ? 0 : per_host.begin()->second;
  for (const auto& [host, count] : per_host) {
    if (count != shape.ranks_per_host) shape.ranks_per_host = 0;
  }
  shape.memory = std::move(memory);
  return shape;
}

std::string JobShape::Describe() const {
  std::string text = std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks");
  if (hosts == 1) {
    text += " on 1 host";
  } else if (ranks_per_host > 0) {
    text += " on " + std::to_string(hosts) + " hosts of " + std::to_string(ranks_per_host);
  } else {
    text += " on " + std::to_string(hosts) + " hosts (uneven)";
  }
  return text + ", " + memory + " memory";
}

JobShape JobShape::WithinOneHost() const {
  JobShape local = *this;
  local.ranks = ranks_per_host;
  local.hosts = 1;
  local.host_of_rank.assign(static_cast<size_t>(std::max(0, ranks_per_host)), 0);
  return local;
}

JobShape JobShape::OnePerHost() const {
  JobShape cross = *this;
  cross.ranks = hosts;
  cross.ranks_per_host = 1;
  cross.host_of_rank.clear();
  for (int h = 0; h < hosts; ++h) cross.host_of_rank.push_back(static_cast<uint32_t>(h));
  return cross;
}

// ---- Scores -----------------------------------------------------------------------------------

chorus_implementation_request RequestOf(CommunicationImplementation implementation) {
  switch (implementation) {
    case CommunicationImplementation::kRing:
      return CHORUS_REQUEST_RING;
    case CommunicationImplementation::kNccl:
      return CHORUS_REQUEST_NCCL;
    default:
      return CHORUS_REQUEST_AUTO;
  }
}

const char* RequestName(chorus_implementation_request request) {
  switch (request) {
    case CHORUS_REQUEST_RING:
      return "RING";
    case CHORUS_REQUEST_NCCL:
      return "NCCL";
    default:
      return "AUTO";
  }
}

chorus_score_args ScoreArgs(chorus_collective_op op, chorus_dtype dtype, uint64_t bytes,
                            const JobShape& shape, chorus_implementation_request request) {
  chorus_score_args args{};
  args.struct_size = sizeof(args);
  args.op = op;
  args.dtype = dtype;
  args.bytes = bytes;
  args.ranks = shape.ranks;
  args.hosts = shape.hosts;
  args.ranks_per_host = shape.ranks_per_host;
  args.memory = shape.memory.c_str();
  args.request = request;
  if (shape.host_of_rank.size() == static_cast<size_t>(shape.ranks) && shape.ranks > 0) {
    args.host_of_rank = shape.host_of_rank.data();
  }
  return args;
}

std::string Score::Text() const { return unknown ? "unknown" : std::to_string(value); }

bool RanksAbove(const Score& a, const Score& b) {
  if (a.value != b.value) return a.value > b.value;
  return !a.unknown && b.unknown;
}

uint32_t ScoreValue(const chorus_capabilities* capabilities, const chorus_score_args& args) {
  const uint32_t value = internal::CapabilityScore(capabilities, args);
  return value == CHORUS_SCORE_UNKNOWN ? 1 : value;
}

Score ScoreOf(const chorus_capabilities* capabilities, const chorus_score_args& args) {
  const uint32_t value = internal::CapabilityScore(capabilities, args);
  if (value == CHORUS_SCORE_UNKNOWN) return {1, "", false, true};
  if (value > 0) return {value, ""};
  // Why it is 0, in the order ScoreValue looked.
  if (capabilities == nullptr) {
    return {0,
            "declares no capabilities (an ABI 1.0 table, or unusable ones): chosen by name "
            "only"};
  }
  if (args.op < 0 || args.op > CHORUS_OP_BARRIER ||
      (capabilities->ops & CHORUS_OP_BIT(args.op)) == 0) {
    return {0, std::string("does not implement ") + CollectiveOpName(args.op)};
  }
  const std::string memory = args.memory != nullptr ? args.memory : "host";
  bool served = false;
  std::vector<std::string> kinds;
  for (const char* const* m = capabilities->memory; m != nullptr && *m != nullptr; ++m) {
    served = served || internal::Serves(*m, memory);
    kinds.push_back(*m);
  }
  if (!served) {
    return {0, "does not serve " + memory + " memory (it serves " + Join(kinds) + ")"};
  }
  if (capabilities->shape == CHORUS_SHAPE_ONE_HOST && args.hosts != 1) {
    return {
        0, "serves ranks on one host only (this job has " + std::to_string(args.hosts) + " hosts)"};
  }
  if (capabilities->shape == CHORUS_SHAPE_UNIFORM && args.ranks_per_host <= 0) {
    return {0, "needs as many ranks on every host"};
  }
  const std::string operation =
      std::string(CollectiveOpName(args.op)) + " of " + std::to_string(args.bytes) + " bytes";
  const std::optional<uint32_t> declared = internal::DeclaredScore(capabilities, args);
  if (!declared) {
    return {0,
            "its score function threw an exception across the C ABI for " + operation +
                ": taken as 0 (a plugin bug; report it to the plugin's vendor)",
            true};
  }
  if (*declared > CHORUS_SCORE_MAX && *declared != CHORUS_SCORE_UNKNOWN) {
    return {0,
            "declares the score " + std::to_string(*declared) + " for " + operation +
                ", outside 0.." + std::to_string(CHORUS_SCORE_MAX) +
                " (a negative number or an overflow?): taken as 0, so it cannot win AUTO (a "
                "plugin bug; report it to the plugin's vendor)",
            true};
  }
  return {0, std::string("scores 0 for ") + CollectiveOpName(args.op) + " (" +
                 RequestName(args.request) + " request)"};
}

std::vector<Ranked> RankCollectives(const Registry& registry, const chorus_score_args& args,
                                    std::string_view exclude_plugin) {
  return Rank(registry, registry.collectives(), args, exclude_plugin);
}

std::vector<Ranked> RankCrossDeviceOps(const Registry& registry, const chorus_score_args& args) {
  return Rank(registry, registry.cross_device_ops(), args, {});
}

std::vector<GridPoint> SelectionGrid(uint32_t ops) {
  std::vector<GridPoint> grid;
  for (int op = CHORUS_OP_ALL_REDUCE; op <= CHORUS_OP_BARRIER; ++op) {
    const auto o = static_cast<chorus_collective_op>(op);
    if ((ops & CHORUS_OP_BIT(o)) == 0) continue;
    if (o == CHORUS_OP_BARRIER) {
      grid.push_back({o, CHORUS_U8, 0});
      continue;
    }
    for (chorus_dtype dtype : AllDtypes()) {
      for (int k = 0; k <= 36; ++k) grid.push_back({o, dtype, uint64_t{1} << k});
    }
  }
  return grid;
}

// ---- Names ------------------------------------------------------------------------------------

std::pair<std::string, std::string> SplitComposite(const std::string& name) {
  const auto plus = name.find('+');
  if (plus == std::string::npos) return {};
  return {name.substr(0, plus), name.substr(plus + 1)};
}

Registry::CollectiveImplementation ComposingCollective(const Registry& registry,
                                                       const std::string& what) {
  for (const auto& entry : registry.collectives()) {
    const chorus_capabilities* capabilities = entry.api->capabilities;
    if (capabilities != nullptr && (capabilities->flags & CHORUS_CAPABILITY_COMPOSES_BY_HOST)) {
      return entry;
    }
  }
  throw Error(CHORUS_INVALID_ARGUMENT,
              what +
                  ": a name local+cross needs a collective that composes two by host "
                  "(CHORUS_CAPABILITY_COMPOSES_BY_HOST, as plugins/hierarchical's), and none "
                  "is loaded. Available: " +
                  Join(registry.CollectiveNames()) + ".");
}

std::string CanonicalCollectiveName(const Registry& registry, const std::string& name,
                                    const std::string& what) {
  const auto [local, cross] = SplitComposite(name);
  if (local.empty() && cross.empty()) return registry.FindCollective(name, what).api->name;
  if (local.empty() || cross.empty() || cross.find('+') != std::string::npos) {
    throw Error(CHORUS_INVALID_ARGUMENT, what + " '" + name +
                                             "' is not a composite name: it takes the form "
                                             "local+cross with two collectives, e.g. shm+gloo");
  }
  ComposingCollective(registry, what);
  return CanonicalCollectiveName(registry, local, what) + "+" +
         CanonicalCollectiveName(registry, cross, what);
}

// ---- Tuning file ------------------------------------------------------------------------------

TuningFile TuningFile::Parse(const std::string& text, const std::string& path) {
  TuningFile file;
  file.path = path;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  std::string pending;  // rule lines of the current section, joined with ';'
  int pending_line = 0;
  // Where the section of each job shape (workers, hosts) began. Two sections for one shape would
  // leave it to their order which rules win; the rules before any section are every job's.
  std::map<std::pair<int, int>, int> section_at;
  int every_job_rules_at = 0;  // the line of the first rule before any section
  auto flush = [&] {
    if (pending.empty()) return;
    if (file.sections.empty()) {
      file.sections.push_back({});
      section_at[{0, 0}] = pending_line;
      every_job_rules_at = pending_line;
    }
    file.sections.back().rules = ParseAlgorithmRules(
        pending, path + " (rules from line " + std::to_string(pending_line) + ")");
    pending.clear();
  };
  while (std::getline(lines, line)) {
    ++number;
    const std::string content = Trim(line.substr(0, line.find('#')));
    if (content.empty()) continue;
    const std::string where = path + ":" + std::to_string(number);
    if (content.front() == '[') {
      if (content.back() != ']') {
        throw Error(CHORUS_INVALID_ARGUMENT, where + ": a section is [workers=N hosts=N]");
      }
      flush();
      Section section;
      section.line = number;
      std::istringstream keys(content.substr(1, content.size() - 2));
      std::string pair;
      std::set<std::string> keys_seen;
      while (keys >> pair) {
        const auto equals = pair.find('=');
        const std::string key = pair.substr(0, equals);
        const std::string value = equals == std::string::npos ? "" : pair.substr(equals + 1);
        if (key == "workers") {
          section.workers = SectionNumber(value, where + ": workers");
        } else if (key == "hosts") {
          section.hosts = SectionNumber(value, where + ": hosts");
        } else {
          throw Error(CHORUS_INVALID_ARGUMENT,
                      where + ": unknown key '" + key + "' in a section (known: workers, hosts)");
        }
        if (!keys_seen.insert(key).second) {
          throw Error(CHORUS_INVALID_ARGUMENT,
                      where + ": '" + key + "' appears twice in one section; give it once");
        }
      }
      const auto [first, added] =
          section_at.emplace(std::pair{section.workers, section.hosts}, number);
      if (!added) {
        const std::string shape = SectionName(section.workers, section.hosts);
        if (first->second == every_job_rules_at) {
          throw Error(CHORUS_INVALID_ARGUMENT,
                      where + ": a section " + shape +
                          " for every job, but the rules before the first section (from " + path +
                          ":" + std::to_string(every_job_rules_at) +
                          ") already apply to every job; merge the two");
        }
        throw Error(CHORUS_INVALID_ARGUMENT,
                    where + ": a second section " + shape +
                        " for the same job shape as the one at " + path + ":" +
                        std::to_string(first->second) +
                        ", whose rules would silently come first; merge the two sections");
      }
      file.sections.push_back(section);
      continue;
    }
    if (pending.empty()) pending_line = number;
    pending += (pending.empty() ? "" : ";") + content;
  }
  flush();
  return file;
}

TuningFile TuningFile::Load(const std::string& path) {
  return Parse(
      ReadVariableFile("CHORUS_TUNING_FILE", path,
                       "point it at a tuning file (chorus-bench --tuning-file writes one), "
                       "or unset the variable"),
      path);
}

TuningFile TuningFile::FromEnvironment() {
  const auto path = GetEnv("CHORUS_TUNING_FILE");
  if (!path || path->empty()) return {};
  return Load(*path);
}

std::vector<AlgorithmRule> TuningFile::RulesFor(const JobShape& shape,
                                                std::string* sections_used) const {
  std::vector<const Section*> matching;
  for (const auto& section : sections) {
    if ((section.workers == 0 || section.workers == shape.ranks) &&
        (section.hosts == 0 || section.hosts == shape.hosts)) {
      matching.push_back(&section);
    }
  }
  const auto specificity = [](const Section* s) {
    return (s->workers != 0 ? 1 : 0) + (s->hosts != 0 ? 1 : 0);
  };
  std::stable_sort(matching.begin(), matching.end(), [&](const Section* a, const Section* b) {
    return specificity(a) > specificity(b);
  });
  std::vector<AlgorithmRule> rules;
  std::vector<std::string> names;
  for (const Section* section : matching) {
    if (section->rules.empty()) continue;
    rules.insert(rules.end(), section->rules.begin(), section->rules.end());
    names.push_back(section->line == 0 ? std::string("(every job)")
                                       : SectionName(section->workers, section->hosts));
  }
  if (sections_used != nullptr) *sections_used = Join(names, " ");
  return rules;
}

std::string TuningFile::Write(int workers, int hosts, const std::vector<AlgorithmRule>& rules,
                              const std::string& comment) {
  std::string text = "# chorus tuning file (CHORUS_TUNING_FILE)\n";
  std::istringstream lines(comment);
  for (std::string line; std::getline(lines, line);) text += "# " + line + "\n";
  text += "[workers=" + std::to_string(workers) + " hosts=" + std::to_string(hosts) + "]\n";
  text += DescribeRules(rules) + "\n";
  return text;
}

// ---- Plans ------------------------------------------------------------------------------------

namespace {

void AddOnce(std::vector<std::string>& list, const std::string& name) {
  if (std::find(list.begin(), list.end(), name) == list.end()) list.push_back(name);
}

// The best of `names` (collectives of `registry`, flat or "local+cross") for `args`, with the
// ranking; "" when none scores above 0.
std::string BestNamed(const Registry& registry, const std::vector<std::string>& names,
                      const chorus_score_args& args, std::vector<Ranked>* ranking) {
  std::vector<Ranked> ranked;
  for (const auto& name : names) {
    // A "local+cross" name is scored as the collective that composes it, as Route does.
    const auto entry = SplitComposite(name).first.empty()
                           ? registry.FindCollective(name, "the plan")
                           : ComposingCollective(registry, "the plan");
    ranked.push_back({name, entry.plugin->name(), ScoreOf(entry.api->capabilities, args)});
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const Ranked& a, const Ranked& b) { return RanksAbove(a.score, b.score); });
  if (ranking != nullptr) *ranking = ranked;
  return !ranked.empty() && ranked.front().score.value > 0 ? ranked.front().name : "";
}

// Every collective named by `rules`, in canonical form; an unknown name names `source`.
void AddRuleCollectives(const Registry& registry, std::vector<AlgorithmRule>& rules,
                        const std::string& source, std::vector<std::string>& collectives) {
  for (auto& rule : rules) {
    rule.collective = CanonicalCollectiveName(registry, rule.collective, source);
    AddOnce(collectives, rule.collective);
  }
}

// The tuning file (under AUTO only: a RING or NCCL request outranks it), autotuning's
// candidates (AUTO only), then the scores, into `plan`, whose source already says who asked. The
// primary collective is the one that serves an all_reduce of 1 MiB of f32 (the tuning file's
// choice where it covers it, else the best score).
// The candidates autotuning times (CHORUS_AUTOTUNE=1): the best few by score for an all_reduce
// at sizes across the bands, and on several hosts of several ranks also the best collective
// within a host composed with each of the best few across hosts ("shm+core_ring"), since which
// pair is fastest is what scores know least.
void AddAutotuneCandidates(const Registry& registry, CollectivePlan& plan) {
  const auto settings = internal::AutotuneSettings::FromEnvironment();
  if (!settings.enabled || plan.shape.ranks < 2) return;
  const auto best_few = [&](const JobShape& shape, std::string_view exclude_plugin) {
    std::vector<std::string> names;
    for (int shift = 10; shift <= 26; shift += 4) {
      const auto ranked =
          RankCollectives(registry,
                          ScoreArgs(CHORUS_OP_ALL_REDUCE, CHORUS_F32, uint64_t{1} << shift, shape,
                                    CHORUS_REQUEST_AUTO),
                          exclude_plugin);
      for (size_t i = 0; i < ranked.size() && i < static_cast<size_t>(settings.candidates_per_size);
           ++i) {
        if (ranked[i].score.value > 0) AddOnce(names, ranked[i].name);
      }
      // Only a measurement can place an unknown score: every one is a candidate.
      for (const auto& r : ranked) {
        if (r.score.unknown) AddOnce(names, r.name);
      }
    }
    return names;
  };
  std::vector<std::string> candidates = best_few(plan.shape, {});
  if (plan.shape.hosts > 1 && plan.shape.ranks_per_host > 1) {
    std::optional<Registry::CollectiveImplementation> composing;
    try {
      composing = ComposingCollective(registry, "autotuning");
    } catch (const Error&) {
    }
    if (composing) {
      const std::string exclude = composing->plugin->name();
      const auto within = best_few(plan.shape.WithinOneHost(), exclude);
      if (!within.empty()) {
        for (const auto& across : best_few(plan.shape.OnePerHost(), exclude)) {
          AddOnce(candidates,
                  CanonicalCollectiveName(registry, within.front() + "+" + across, "autotuning"));
        }
      }
    }
  }
  if (candidates.size() < 2) return;  // nothing to choose between
  for (const auto& name : candidates) AddOnce(plan.collectives, name);
  plan.autotune_candidates = candidates;
  plan.autotune_samples = settings.samples;
  plan.autotune_cache = settings.cache_path;
}

void PlanFromTuningAndScores(const Registry& registry, CollectivePlan& plan) {
  std::vector<std::string> from_rules;
  if (plan.request == CHORUS_REQUEST_AUTO) {
    const TuningFile tuning = TuningFile::FromEnvironment();
    std::string sections;
    plan.tuning_rules = tuning.RulesFor(plan.shape, &sections);
    if (!plan.tuning_rules.empty()) {
      plan.tuning_source = "CHORUS_TUNING_FILE=" + tuning.path + " " + sections;
    }
    AddRuleCollectives(registry, plan.tuning_rules, "CHORUS_TUNING_FILE=" + tuning.path,
                       from_rules);
  }
  AddRuleCollectives(registry, plan.variable_rules, "CHORUS_ALGORITHM", from_rules);

  CollectivePlan scored;
  try {
    scored = PlanByScores(registry, plan.shape, plan.request);
  } catch (const Error& e) {
    throw Error(e.status(), plan.source + ": " + e.what() +
                                ". Available: " + Join(registry.CollectiveNames()) + ".");
  }
  if (const auto routed = RouteFor(plan.tuning_rules, CHORUS_OP_ALL_REDUCE, uint64_t{1} << 20)) {
    plan.collectives.push_back(*routed);
    plan.source += ": " + plan.tuning_source;
  } else {
    plan.collectives.push_back(scored.collectives.front());
    plan.source += ": " + scored.source;
  }
  for (const auto& name : from_rules) AddOnce(plan.collectives, name);
  for (const auto& name : scored.collectives) AddOnce(plan.collectives, name);
  if (plan.request == CHORUS_REQUEST_AUTO) AddAutotuneCandidates(registry, plan);
}

}  // namespace

CollectivePlan PlanNamed(const Registry& registry, const std::string& name, const JobShape& shape,
                         std::vector<AlgorithmRule> rules) {
  CollectivePlan plan;
  plan.shape = shape;
  plan.fixed = CanonicalCollectiveName(registry, name, "the communicator");
  plan.source = "named " + plan.fixed;
  plan.collectives.push_back(plan.fixed);
  plan.variable_rules = std::move(rules);
  AddRuleCollectives(registry, plan.variable_rules, "CHORUS_ALGORITHM", plan.collectives);
  return plan;
}

CollectivePlan PlanCollectives(const Registry& registry, CommunicationImplementation implementation,
                               const JobShape& shape) {
  CollectivePlan plan;
  plan.shape = shape;
  plan.variable_rules = AlgorithmRulesFromEnvironment();
  if (implementation != CommunicationImplementation::kAuto) {
    plan.request = RequestOf(implementation);
    plan.source = std::string("CommunicationOptions ") + RequestName(plan.request);
    // The constructor argument outranks every variable, CHORUS_ALGORITHM's rules included.
    if (!plan.variable_rules.empty()) {
      Log().warn("CHORUS_ALGORITHM={} is not used: {} outranks it",
                 DescribeRules(plan.variable_rules), plan.source);
      plan.variable_rules.clear();
    }
  } else if (const auto value = GetEnv("CHORUS_COMMUNICATION"); value && !value->empty()) {
    plan.source = "CHORUS_COMMUNICATION=" + *value;
    // tf.distribute's CommunicationImplementation values, in any case.
    const auto is = [&](const char* keyword) { return strcasecmp(value->c_str(), keyword) == 0; };
    if (is("AUTO")) {
      plan.request = CHORUS_REQUEST_AUTO;
    } else if (is("RING")) {
      plan.request = CHORUS_REQUEST_RING;
    } else if (is("NCCL")) {
      plan.request = CHORUS_REQUEST_NCCL;
    } else {
      try {
        plan.fixed = CanonicalCollectiveName(registry, *value, plan.source);
      } catch (const Error& e) {
        throw Error(e.status(), std::string(e.what()) +
                                    " CHORUS_COMMUNICATION also takes AUTO, "
                                    "RING and NCCL.");
      }
    }
  } else {
    plan.source = "AUTO";
  }
  if (!plan.fixed.empty()) {
    plan.collectives.push_back(plan.fixed);
    AddRuleCollectives(registry, plan.variable_rules, "CHORUS_ALGORITHM", plan.collectives);
    return plan;
  }

  PlanFromTuningAndScores(registry, plan);
  return plan;
}

CollectivePlan PlanAuto(const Registry& registry, const JobShape& shape,
                        chorus_implementation_request request) {
  CollectivePlan plan;
  plan.shape = shape;
  plan.request = request;
  plan.source = RequestName(request);
  PlanFromTuningAndScores(registry, plan);
  return plan;
}

std::string DescribeTuningCache(const std::string& path) {
  return internal::DescribeTuningCacheFile(path);
}

CollectivePlan PlanByScores(const Registry& registry, const JobShape& shape,
                            chorus_implementation_request request,
                            std::string_view exclude_plugin) {
  CollectivePlan plan;
  plan.shape = shape;
  plan.request = request;
  // The primary is the best for an all_reduce of 1 MiB of f32.
  const auto ranked = RankCollectives(
      registry, ScoreArgs(CHORUS_OP_ALL_REDUCE, CHORUS_F32, uint64_t{1} << 20, shape, request),
      exclude_plugin);
  if (ranked.empty() || ranked.front().score.value == 0) {
    std::vector<std::string> why;
    for (const auto& r : ranked) why.push_back(r.name + " " + r.score.reason);
    throw Error(request == CHORUS_REQUEST_AUTO ? CHORUS_UNSUPPORTED : CHORUS_INVALID_ARGUMENT,
                std::string("no loaded collective answers ") + RequestName(request) +
                    " requests for a job of " + shape.Describe() +
                    (request == CHORUS_REQUEST_NCCL
                         ? " (collectives that answer NCCL serve GPU memory; build chorus with "
                           "CUDA and NCCL, or choose AUTO or RING)"
                         : "") +
                    " (" + Join(why, "; ") + ")");
  }
  plan.collectives.push_back(ranked.front().name);
  plan.source = ranked.front().name + " scores " + ranked.front().score.Text() + " for a job of " +
                shape.Describe() + " (best of: " + DescribeRanking(ranked) + ")";
  // Every collective that wins an operation and size somewhere in the grid.
  for (const GridPoint& point : SelectionGrid(kEveryOp)) {
    const auto best = RankCollectives(
        registry, ScoreArgs(point.op, point.dtype, point.bytes, shape, request), exclude_plugin);
    if (!best.empty() && best.front().score.value > 0) AddOnce(plan.collectives, best.front().name);
  }
  return plan;
}

Decision Decide(const Registry& registry, const CollectivePlan& plan, chorus_collective_op op,
                chorus_dtype dtype, uint64_t bytes) {
  if (auto routed = RouteFor(plan.variable_rules, op, bytes)) {
    return {*routed, "CHORUS_ALGORITHM"};
  }
  if (!plan.fixed.empty()) return {plan.fixed, plan.source};
  if (auto routed = RouteFor(plan.tuning_rules, op, bytes)) {
    return {*routed, plan.tuning_source};
  }
  std::vector<Ranked> ranking;
  const auto args = ScoreArgs(op, dtype, bytes, plan.shape, plan.request);
  const std::string best = BestNamed(registry, plan.collectives, args, &ranking);
  if (best.empty()) {
    std::vector<std::string> why;
    for (const auto& r : ranking) why.push_back(r.name + ": " + r.score.reason);
    return {"", "no collective of the plan serves it (" + Join(why, "; ") + ")"};
  }
  return {best, "score " + ranking.front().score.Text() + " (" + DescribeRanking(ranking) + ")"};
}

}  // namespace chorus
