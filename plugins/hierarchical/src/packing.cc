#include "packing.h"

#include <cstdint>

namespace chorus::hierarchical {

std::vector<Pack> PlanPacks(size_t total, size_t num_packs) {
  std::vector<Pack> packs;
  if (total == 0) return packs;
  if (num_packs == 0) num_packs = 1;
  if (num_packs > total) num_packs = total;
  const size_t size = total / num_packs;
  packs.reserve(num_packs);
  for (size_t i = 0; i + 1 < num_packs; ++i) packs.push_back(Pack{i * size, size});
  const size_t last_offset = (num_packs - 1) * size;
  packs.push_back(Pack{last_offset, total - last_offset});
  return packs;
}

std::optional<FlatLayout> PlanLayout(std::span<const size_t> counts) {
  FlatLayout layout;
  layout.offsets.reserve(counts.size());
  for (size_t count : counts) {
    layout.offsets.push_back(layout.total);
    if (count > SIZE_MAX - layout.total) return std::nullopt;
    layout.total += count;
  }
  return layout;
}

std::vector<std::vector<size_t>> GroupByKey(std::span<const std::optional<PackKey>> keys) {
  std::vector<std::vector<size_t>> groups;
  std::vector<PackKey> group_keys;   // key of each keyed group
  std::vector<size_t> keyed_groups;  // index in `groups` of each keyed group
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!keys[i]) {
      groups.push_back({i});
      continue;
    }
    size_t g = 0;
    while (g < group_keys.size() && !(group_keys[g] == *keys[i])) ++g;
    if (g == group_keys.size()) {
      group_keys.push_back(*keys[i]);
      keyed_groups.push_back(groups.size());
      groups.emplace_back();
    }
    groups[keyed_groups[g]].push_back(i);
  }
  return groups;
}

}  // namespace chorus::hierarchical
