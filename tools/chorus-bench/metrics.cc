#include "metrics.h"

#include <algorithm>

namespace chorus::bench {

RowLayout LayoutFor(CollectiveKind kind, uint64_t requested_bytes, size_t dtype_size, int ranks) {
  RowLayout layout;
  if (dtype_size == 0 || ranks <= 0) return layout;
  const uint64_t elements = requested_bytes / dtype_size;
  switch (kind) {
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      layout.count = static_cast<size_t>(elements / static_cast<uint64_t>(ranks));
      layout.bytes = uint64_t{layout.count} * static_cast<uint64_t>(ranks) * dtype_size;
      break;
    default:
      layout.count = static_cast<size_t>(elements);
      layout.bytes = elements * dtype_size;
      break;
  }
  return layout;
}

double BusBandwidthFactor(CollectiveKind kind, int ranks) {
  if (ranks <= 0) return 0;
  const double n = ranks;
  switch (kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBatchReduce:
      return 2 * (n - 1) / n;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      return (n - 1) / n;
    case CollectiveKind::kBroadcast:
      return 1;
  }
  return 0;
}

double AlgorithmBandwidthGbps(uint64_t bytes, double time_us) {
  if (time_us <= 0) return 0;
  return static_cast<double>(bytes) / (time_us * 1e3);
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle),
                   values.end());
  const double upper = values[middle];
  if (values.size() % 2 == 1) return upper;
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle));
  return (lower + upper) / 2;
}

double Mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

}  // namespace chorus::bench
