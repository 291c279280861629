#include "rule_suggestion.h"

#include <map>
#include <optional>

#include "sizes.h"

namespace chorus::bench {
namespace {

// CHORUS_ALGORITHM's name of an operation; nullopt for those it does not route.
std::optional<std::string> RuleName(CollectiveKind op) {
  switch (op) {
    case CollectiveKind::kAllReduce:
      return "allreduce";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kAllGather:
      return "allgather";
    case CollectiveKind::kReduceScatter:
      return "reducescatter";
    case CollectiveKind::kBatchReduce:
      break;
  }
  return std::nullopt;
}

}  // namespace

std::string SuggestAlgorithmRules(const std::vector<Measurement>& rows) {
  // op -> bytes -> the best (time, backend), out of place (false) preferred over in place.
  struct Best {
    bool in_place = true;
    double time_us = 0;
    std::string backend;
  };
  std::map<CollectiveKind, std::map<uint64_t, Best>> best;
  for (const Measurement& m : rows) {
    if (!RuleName(m.op) || m.wrong > 0) continue;
    auto [it, fresh] = best[m.op].try_emplace(m.bytes, Best{m.in_place, m.time_us, m.backend});
    Best& b = it->second;
    if (fresh) continue;
    if (b.in_place && !m.in_place) {
      b = Best{m.in_place, m.time_us, m.backend};  // out of place rows decide
    } else if (b.in_place == m.in_place && m.time_us < b.time_us) {
      b = Best{m.in_place, m.time_us, m.backend};
    }
  }
  std::string rules;
  for (const auto& [op, by_size] : best) {
    std::vector<std::pair<uint64_t, std::string>> runs;  // start, backend
    for (const auto& [bytes, b] : by_size) {
      if (runs.empty() || runs.back().second != b.backend) runs.emplace_back(bytes, b.backend);
    }
    if (runs.empty()) continue;
    std::string text = *RuleName(op) + ":";
    for (size_t i = 0; i < runs.size(); ++i) {
      const std::string lo = i == 0 ? "0" : FormatSize(runs[i].first);
      const std::string hi = i + 1 == runs.size() ? "inf" : FormatSize(runs[i + 1].first);
      text += (i == 0 ? "" : ",") + lo + "-" + hi + "=" + runs[i].second;
    }
    rules += (rules.empty() ? "" : ";") + text;
  }
  return rules;
}

}  // namespace chorus::bench
