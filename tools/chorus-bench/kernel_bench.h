// --kernels: a device enumerator's own kernels on one of its devices, against its copy: a copy
// from one device buffer to another (2 x size bytes moved) and the reduce kernel dst = a op b
// (3 x size), the work every cross-device ops calls on that device, checked against the exact
// answer. On the cpu enumerator it measures the host kernels; on cuda (the nccl plugin's) the GPU
// kernels against the device's copy bandwidth.
#ifndef CHORUS_TOOLS_BENCH_KERNEL_BENCH_H_
#define CHORUS_TOOLS_BENCH_KERNEL_BENCH_H_

#include <chorus/plugin.h>

#include <cstdint>
#include <string>

#include "options.h"

namespace chorus::bench {

// One size's figures.
struct KernelFigures {
  uint64_t bytes = 0;
  double copy_us = 0, copy_gbps = 0;      // median; 2 x bytes / time
  double reduce_us = 0, reduce_gbps = 0;  // median; 3 x bytes / time
  uint64_t wrong = 0;                     // reduce result elements that differ from a op b
};

// A table line for `f` (with the header before the first).
std::string KernelTableHeader();
std::string KernelTableRow(const KernelFigures& f, chorus_dtype dtype, chorus_reduce_op op);

// Returns the exit code: 0; 1 when a result was wrong; 2 for bad input; 77 when the enumerator
// has no device here (a cuda enumerator without a GPU), saying so.
int RunKernelBench(const BenchOptions& options);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_KERNEL_BENCH_H_
