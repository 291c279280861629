// Pack planning for batch_reduce: which reduces share a pack, where each tensor sits in the
// concatenated per-device buffer, and how that buffer is split into packs. Pure functions.
#ifndef CHORUS_PLUGINS_HIERARCHICAL_PACKING_H_
#define CHORUS_PLUGINS_HIERARCHICAL_PACKING_H_

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace chorus::hierarchical {

// A range of elements of a flat buffer.
struct Pack {
  size_t offset = 0;
  size_t count = 0;
  bool operator==(const Pack&) const = default;
};

// Splits `total` elements into `num_packs` packs as tf.distribute's ConcatAndSplitPacker does:
// every pack holds total / num_packs elements and the last one also takes the remainder. With
// fewer elements than packs there are `total` packs of one element; no elements, no packs.
// num_packs == 0 is treated as 1 (the caller decides what "no packing" means).
std::vector<Pack> PlanPacks(size_t total, size_t num_packs);

// Where consecutive tensors of counts[i] elements start in one flat buffer.
struct FlatLayout {
  std::vector<size_t> offsets;
  size_t total = 0;
};
// Returns std::nullopt when the total does not fit in size_t.
std::optional<FlatLayout> PlanLayout(std::span<const size_t> counts);

// What reduces must share to be packed together.
struct PackKey {
  int dtype = 0;
  int op = 0;
  bool operator==(const PackKey&) const = default;
};

// Groups item indices by key, groups in the order of their first item and items in their
// order. An item without a key (it cannot be packed) forms a group of its own.
std::vector<std::vector<size_t>> GroupByKey(std::span<const std::optional<PackKey>> keys);

}  // namespace chorus::hierarchical

#endif  // CHORUS_PLUGINS_HIERARCHICAL_PACKING_H_
