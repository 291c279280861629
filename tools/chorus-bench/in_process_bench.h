// --in-process: cross-device ops (reduction_to_one_device, hierarchical_copy, a plugin's) across
// --replicas devices of this process: virtual cpu devices, or a plugin enumerator's (--devices
// cuda: the nccl plugin's GPUs, where --backends nccl runs): all_reduce, broadcast, all_gather,
// and, on cpu devices, batch_reduce of many small tensors (packed as the core packs them, or
// not).
#ifndef CHORUS_TOOLS_BENCH_IN_PROCESS_BENCH_H_
#define CHORUS_TOOLS_BENCH_IN_PROCESS_BENCH_H_

#include "options.h"

namespace chorus::bench {

// Must run before anything asks for chorus's registry (it sets CHORUS_CPU_DEVICES). Returns the
// exit code: 0, 1 when a result was wrong or an operation failed, 2 for bad input, 77 when the
// --devices enumerator sees no device.
int RunInProcessBench(const BenchOptions& options);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_IN_PROCESS_BENCH_H_
