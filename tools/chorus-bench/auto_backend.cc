#include "auto_backend.h"

#include <chorus/base/environment.h>
#include <strings.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "sizes.h"

namespace chorus::bench {
namespace {

void AddOnce(std::vector<std::string>& names, const std::string& name) {
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
}

bool IsKeyword(const std::string& name, const char* keyword) {
  return strcasecmp(name.c_str(), keyword) == 0;
}

// Flat collectives scoring above 0 under AUTO or RING for an all_reduce at some size.
std::vector<std::string> Serving(const Registry& registry, const JobShape& shape,
                                 std::string_view exclude_plugin) {
  std::vector<std::string> names;
  for (const auto request : {CHORUS_REQUEST_AUTO, CHORUS_REQUEST_RING}) {
    for (int shift = 10; shift <= 30; shift += 2) {
      const auto args =
          ScoreArgs(CHORUS_OP_ALL_REDUCE, CHORUS_F32, uint64_t{1} << shift, shape, request);
      for (const Ranked& r : RankCollectives(registry, args, exclude_plugin)) {
        if (r.score.value > 0) AddOnce(names, r.name);
      }
    }
  }
  return names;
}

}  // namespace

bool IsAutoBackend(const std::string& name) { return IsKeyword(name, "auto"); }

std::vector<std::string> DefaultBackends() {
  if (const auto value = GetEnv("CHORUS_COMMUNICATION")) {
    return {IsAutoBackend(*value) ? std::string("auto") : *value};
  }
  return {"core_ring"};
}

CollectivePlan PlanForBackend(const Registry& registry, const std::string& name,
                              const JobShape& shape) {
  if (IsAutoBackend(name)) return PlanAuto(registry, shape);
  if (IsKeyword(name, "RING")) return PlanAuto(registry, shape, CHORUS_REQUEST_RING);
  if (IsKeyword(name, "NCCL")) return PlanAuto(registry, shape, CHORUS_REQUEST_NCCL);
  return PlanNamed(registry, name, shape);
}

std::vector<std::string> AutoCandidates(const Registry& registry, const JobShape& shape,
                                        bool under_mpirun) {
  std::vector<std::string> names = Serving(registry, shape, {});
  if (shape.hosts > 1 && shape.ranks_per_host > 1) {
    try {
      const auto composing = ComposingCollective(registry, "--auto");
      const JobShape local = shape.WithinOneHost();
      const std::string exclude = composing.plugin->name();
      // The best within a host, by AUTO's score for 1 MiB.
      const auto within = RankCollectives(
          registry,
          ScoreArgs(CHORUS_OP_ALL_REDUCE, CHORUS_F32, 1 << 20, local, CHORUS_REQUEST_AUTO),
          exclude);
      if (!within.empty() && within.front().score.value > 0) {
        for (const auto& across : Serving(registry, shape.OnePerHost(), exclude)) {
          AddOnce(names, CanonicalCollectiveName(registry, within.front().name + "+" + across));
        }
      }
    } catch (const std::exception&) {
      // No collective composes by host: the flat ones are every candidate.
    }
  }
  if (!under_mpirun) {
    std::erase_if(names, [&](const std::string& name) {
      return registry.FindCollective(name.substr(0, name.find('+')), "--auto").plugin->name() ==
                 "mpi" ||
             name.find("+mpi") != std::string::npos;
    });
  }
  return names;
}

std::vector<RegretRow> RegretRows(
    const std::vector<Measurement>& rows,
    const std::function<std::string(CollectiveKind, uint64_t)>& runs_on) {
  // (op, bytes) -> AUTO's row and the fastest other one, of the placement that decides.
  struct Pair {
    const Measurement* automatic = nullptr;
    const Measurement* fastest = nullptr;
  };
  std::map<std::pair<CollectiveKind, uint64_t>, Pair> pairs;
  for (const Measurement& m : rows) {
    const bool decides = m.op == CollectiveKind::kBroadcast ? m.in_place : !m.in_place;
    if (!decides || m.wrong > 0) continue;
    Pair& pair = pairs[{m.op, m.bytes}];
    if (IsAutoBackend(m.backend)) {
      pair.automatic = &m;
    } else if (pair.fastest == nullptr || m.time_us < pair.fastest->time_us) {
      pair.fastest = &m;
    }
  }
  std::vector<RegretRow> out;
  for (const auto& [key, pair] : pairs) {
    if (pair.automatic == nullptr || pair.fastest == nullptr) continue;
    RegretRow row;
    row.op = key.first;
    row.bytes = key.second;
    row.auto_runs_on = runs_on(key.first, key.second);
    row.auto_us = pair.automatic->time_us;
    row.fastest = pair.fastest->backend;
    row.fastest_us = pair.fastest->time_us;
    out.push_back(row);
  }
  return out;
}

std::string RegretTable(const std::vector<RegretRow>& rows) {
  if (rows.empty()) return "";
  std::string text =
      "#\n# AUTO against every other backend measured (regret = AUTO's time / the fastest's; "
      "out of place,\n# broadcast in place; 1.00: AUTO ran the fastest, below 1: within the "
      "noise)\n";
  char line[256];
  std::snprintf(line, sizeof line, "# %-14s %8s  %-24s %10s  %-24s %10s %7s\n", "op", "size",
                "auto runs on", "auto (us)", "fastest other", "(us)", "regret");
  text += line;
  // Per operation: the worst regret where AUTO ran another collective than the fastest, and
  // how many sizes it ran the fastest one, where the regret is two rows of one collective: noise.
  struct Summary {
    const RegretRow* worst = nullptr;
    int same = 0;
    double noise_lo = 0, noise_hi = 0;
  };
  std::map<CollectiveKind, Summary> summaries;
  for (const RegretRow& r : rows) {
    std::snprintf(line, sizeof line, "  %-14s %8s  %-24s %10.2f  %-24s %10.2f %7.2f%s\n",
                  CollectiveName(r.op), FormatSize(r.bytes).c_str(), r.auto_runs_on.c_str(),
                  r.auto_us, r.fastest.c_str(), r.fastest_us, r.regret(),
                  r.auto_runs_on == r.fastest ? "  (same)" : "");
    text += line;
    Summary& s = summaries[r.op];
    if (r.auto_runs_on == r.fastest) {
      s.noise_lo = s.same == 0 ? r.regret() : std::min(s.noise_lo, r.regret());
      s.noise_hi = s.same == 0 ? r.regret() : std::max(s.noise_hi, r.regret());
      ++s.same;
    } else if (s.worst == nullptr || r.regret() > s.worst->regret()) {
      s.worst = &r;
    }
  }
  for (const auto& [op, s] : summaries) {
    if (s.same > 0) {
      std::snprintf(line, sizeof line,
                    "# %s: AUTO ran the fastest collective at %d size(s) (its regret there, "
                    "%.2f-%.2f, is the noise between two rows of one collective)\n",
                    CollectiveName(op), s.same, s.noise_lo, s.noise_hi);
      text += line;
    }
    if (s.worst != nullptr) {
      std::snprintf(line, sizeof line,
                    "# worst regret of %s: %.2f at %s (AUTO ran %s, %s was faster)\n",
                    CollectiveName(op), s.worst->regret(), FormatSize(s.worst->bytes).c_str(),
                    s.worst->auto_runs_on.c_str(), s.worst->fastest.c_str());
    } else {
      std::snprintf(line, sizeof line,
                    "# worst regret of %s: none (AUTO ran the fastest collective at every size)\n",
                    CollectiveName(op));
    }
    text += line;
  }
  return text;
}

std::string RegretCsv(const std::vector<RegretRow>& rows) {
  std::string text = "op,bytes,auto_runs_on,auto_us,fastest,fastest_us,regret\n";
  char line[256];
  for (const RegretRow& r : rows) {
    std::snprintf(line, sizeof line, "%s,%llu,%s,%.3f,%s,%.3f,%.4f\n", CollectiveName(r.op),
                  static_cast<unsigned long long>(r.bytes), r.auto_runs_on.c_str(), r.auto_us,
                  r.fastest.c_str(), r.fastest_us, r.regret());
    text += line;
  }
  return text;
}

}  // namespace chorus::bench
