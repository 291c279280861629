// One measured row: a backend running one operation on one size, in place or not.
#ifndef CHORUS_TOOLS_BENCH_MEASUREMENT_H_
#define CHORUS_TOOLS_BENCH_MEASUREMENT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "collective_kind.h"

namespace chorus::bench {

struct Measurement {
  std::string backend;
  CollectiveKind op = CollectiveKind::kAllReduce;
  uint64_t bytes = 0;     // nccl-tests' size (see metrics.h)
  size_t count = 0;       // elements per rank passed to the operation
  std::string dtype;      // "f32"
  std::string reduce_op;  // "sum", or "" for operations that do not reduce
  int root = -1;          // broadcast's root, else -1
  bool in_place = false;
  double time_us = 0;  // median over the iterations
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  uint64_t wrong = 0;  // elements that differ from the expected result, summed over ranks
};

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_MEASUREMENT_H_
