// The figures nccl-tests prints, with its conventions: which byte count a row stands for, the
// algorithm bandwidth (bytes / time) and the bus bandwidth (algbw times a per-operation factor
// that makes it comparable with the hardware's link bandwidth), and the median of the timings.
#ifndef CHORUS_TOOLS_BENCH_METRICS_H_
#define CHORUS_TOOLS_BENCH_METRICS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collective_kind.h"

namespace chorus::bench {

// What one row of a sweep runs. nccl-tests' size is the all-reduce's and broadcast's buffer,
// all_gather's whole output (n blocks) and reduce_scatter's whole input (n blocks).
struct RowLayout {
  size_t count = 0;    // elements each rank passes to the operation (per rank for ag and rs)
  uint64_t bytes = 0;  // the row's size as nccl-tests counts it (count rounded down to fit)
};
RowLayout LayoutFor(CollectiveKind kind, uint64_t requested_bytes, size_t dtype_size, int ranks);

// busbw / algbw: all_reduce (and batch_reduce) 2(n-1)/n, all_gather and reduce_scatter (n-1)/n,
// broadcast 1. For n = 1 every reducing operation moves nothing over a bus: 0.
double BusBandwidthFactor(CollectiveKind kind, int ranks);

// bytes / time in GB/s (1e9 bytes per second, as nccl-tests); 0 when time_us is 0.
double AlgorithmBandwidthGbps(uint64_t bytes, double time_us);

// The middle value (the mean of the two middle ones for an even count); 0 for none.
double Median(std::vector<double> values);
// The arithmetic mean; 0 for none.
double Mean(const std::vector<double>& values);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_METRICS_H_
