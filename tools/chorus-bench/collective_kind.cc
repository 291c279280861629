#include "collective_kind.h"

#include <chorus/names.hpp>
#include <stdexcept>

namespace chorus::bench {

namespace {
constexpr CollectiveKind kAll[] = {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                                   CollectiveKind::kBroadcast, CollectiveKind::kReduceScatter,
                                   CollectiveKind::kBatchReduce};
}  // namespace

const char* CollectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return sdk::CollectiveOpName(CHORUS_OP_ALL_REDUCE);
    case CollectiveKind::kAllGather:
      return sdk::CollectiveOpName(CHORUS_OP_ALL_GATHER);
    case CollectiveKind::kBroadcast:
      return sdk::CollectiveOpName(CHORUS_OP_BROADCAST);
    case CollectiveKind::kReduceScatter:
      return sdk::CollectiveOpName(CHORUS_OP_REDUCE_SCATTER);
    case CollectiveKind::kBatchReduce:
      return "batch_reduce";  // the cross-device ops' batch_reduce: no collective of its own
  }
  return "?";
}

CollectiveKind ParseCollective(std::string_view name) {
  std::string valid;
  for (CollectiveKind kind : kAll) {
    if (name == CollectiveName(kind)) return kind;
    valid += valid.empty() ? "" : ", ";
    valid += CollectiveName(kind);
  }
  throw std::invalid_argument("unknown operation '" + std::string(name) + "'; valid: " + valid);
}

std::vector<std::string> SplitCommaList(std::string_view list) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (comma > start) items.emplace_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

std::vector<CollectiveKind> ParseCollectiveList(std::string_view list) {
  std::vector<CollectiveKind> kinds;
  for (const auto& name : SplitCommaList(list)) kinds.push_back(ParseCollective(name));
  if (kinds.empty()) throw std::invalid_argument("no operation given (e.g. --ops all_reduce)");
  return kinds;
}

}  // namespace chorus::bench
