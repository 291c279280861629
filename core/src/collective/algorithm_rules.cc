#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/collective/algorithm_rules.h>

#include <algorithm>
#include <cctype>
#include <chorus/names.hpp>
#include <limits>

namespace chorus {
namespace {

// The rule's name of an operation; its SDK name (sdk::CollectiveOpName) is taken as well.
struct OpName {
  const char* name;
  chorus_collective_op op;
};

constexpr OpName kOps[] = {
    {"allreduce", CHORUS_OP_ALL_REDUCE},
    {"broadcast", CHORUS_OP_BROADCAST},
    {"allgather", CHORUS_OP_ALL_GATHER},
    {"reducescatter", CHORUS_OP_REDUCE_SCATTER},
};

[[noreturn]] void Fail(const std::string& source, const std::string& text,
                       const std::string& problem) {
  throw Error(CHORUS_INVALID_ARGUMENT,
              source + "='" + text + "': " + problem +
                  ". The form is op:lo-hi=name[,lo-hi=name...][;op:...], e.g. "
                  "allreduce:0-64K=shm,64K-inf=gloo; op is allreduce, broadcast, allgather or "
                  "reducescatter; sizes in bytes with K, M, G suffixes, `inf` for no upper end");
}

std::string Trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

chorus_collective_op ParseOp(const std::string& word, const std::string& source,
                             const std::string& text) {
  for (const auto& op : kOps) {
    if (word == op.name || word == sdk::CollectiveOpName(op.op)) return op.op;
  }
  Fail(source, text, "'" + word + "' is not an operation");
}

const char* NameOf(chorus_collective_op op) {
  for (const auto& entry : kOps) {
    if (entry.op == op) return entry.name;
  }
  return "?";
}

uint64_t ParseBytes(const std::string& word, const std::string& source, const std::string& text) {
  if (word == "inf") return UINT64_MAX;
  size_t digits = 0;
  while (digits < word.size() && std::isdigit(static_cast<unsigned char>(word[digits]))) ++digits;
  if (digits == 0) Fail(source, text, "'" + word + "' is not a size");
  const std::string suffix = word.substr(digits);
  uint64_t scale = 1;
  if (suffix == "K" || suffix == "k") {
    scale = uint64_t{1} << 10;
  } else if (suffix == "M" || suffix == "m") {
    scale = uint64_t{1} << 20;
  } else if (suffix == "G" || suffix == "g") {
    scale = uint64_t{1} << 30;
  } else if (!suffix.empty()) {
    Fail(source, text, "'" + word + "' has an unknown suffix '" + suffix + "' (use K, M or G)");
  }
  if (digits > 15) Fail(source, text, "'" + word + "' is too large");
  const uint64_t value = std::stoull(word.substr(0, digits));
  if (value > std::numeric_limits<uint64_t>::max() / scale) {
    Fail(source, text, "'" + word + "' is too large");
  }
  return value * scale;
}

}  // namespace

std::string RuleBytesText(uint64_t bytes) {
  if (bytes == UINT64_MAX) return "inf";
  for (const auto& [shift, suffix] : {std::pair{30, "G"}, {20, "M"}, {10, "K"}}) {
    const uint64_t unit = uint64_t{1} << shift;
    if (bytes != 0 && bytes % unit == 0) return std::to_string(bytes / unit) + suffix;
  }
  return std::to_string(bytes);
}

std::vector<AlgorithmRule> ParseAlgorithmRules(const std::string& text, const std::string& source) {
  std::vector<AlgorithmRule> rules;
  const std::string trimmed = Trim(text);
  if (trimmed.empty() || trimmed == "AUTO" || trimmed == "auto") return rules;
  for (const std::string& group : SplitList(trimmed, ';')) {
    const auto colon = group.find(':');
    if (colon == std::string::npos) Fail(source, text, "'" + group + "' has no 'op:'");
    const chorus_collective_op op = ParseOp(Trim(group.substr(0, colon)), source, text);
    const auto ranges = SplitList(group.substr(colon + 1), ',');
    if (ranges.empty())
      Fail(source, text, "operation '" + Trim(group.substr(0, colon)) + "' has no range=name");
    for (const std::string& part : ranges) {
      const auto equals = part.find('=');
      const auto dash = part.find('-');
      if (equals == std::string::npos || dash == std::string::npos || dash > equals) {
        Fail(source, text, "'" + part + "' is not lo-hi=name");
      }
      AlgorithmRule rule;
      rule.op = op;
      rule.min_bytes = ParseBytes(Trim(part.substr(0, dash)), source, text);
      rule.max_bytes = ParseBytes(Trim(part.substr(dash + 1, equals - dash - 1)), source, text);
      rule.collective = Trim(part.substr(equals + 1));
      if (rule.collective.empty()) Fail(source, text, "'" + part + "' names no collective");
      if (rule.min_bytes >= rule.max_bytes) {
        Fail(source, text, "the range of '" + part + "' is empty (lo must be below hi)");
      }
      for (const AlgorithmRule& other : rules) {
        if (other.op == op && rule.min_bytes < other.max_bytes &&
            other.min_bytes < rule.max_bytes) {
          Fail(source, text,
               "the ranges " + RuleBytesText(other.min_bytes) + "-" +
                   RuleBytesText(other.max_bytes) + " and " + RuleBytesText(rule.min_bytes) + "-" +
                   RuleBytesText(rule.max_bytes) + " of " + NameOf(op) + " overlap");
        }
      }
      rules.push_back(rule);
    }
  }
  return rules;
}

std::vector<AlgorithmRule> AlgorithmRulesFromEnvironment() {
  const auto value = GetEnv("CHORUS_ALGORITHM");
  return value ? ParseAlgorithmRules(*value) : std::vector<AlgorithmRule>{};
}

std::optional<std::string> RouteFor(const std::vector<AlgorithmRule>& rules,
                                    chorus_collective_op op, uint64_t bytes) {
  for (const AlgorithmRule& rule : rules) {
    if (rule.op == op && bytes >= rule.min_bytes && bytes < rule.max_bytes) return rule.collective;
  }
  return std::nullopt;
}

std::string DescribeRules(const std::vector<AlgorithmRule>& rules) {
  std::string text;
  for (const auto& entry : kOps) {
    std::string group;
    for (const AlgorithmRule& rule : rules) {
      if (rule.op != entry.op) continue;
      group += (group.empty() ? "" : ",") + RuleBytesText(rule.min_bytes) + "-" +
               RuleBytesText(rule.max_bytes) + "=" + rule.collective;
    }
    if (!group.empty()) text += (text.empty() ? "" : ";") + std::string(entry.name) + ":" + group;
  }
  return text;
}

}  // namespace chorus
