// The measurements across worker processes: every operation, size, backend and placement,
// timed between barriers, checked, and gathered on worker 0, which prints them.
#ifndef CHORUS_TOOLS_BENCH_MULTI_WORKER_BENCH_H_
#define CHORUS_TOOLS_BENCH_MULTI_WORKER_BENCH_H_

#include <string>
#include <vector>

#include "options.h"

namespace chorus::bench {

// Throws std::invalid_argument for a name that is not a collective (listing those available)
// and for `mpi` in a process mpirun did not start.
void CheckCollectiveBackends(const std::vector<std::string>& backends);

// This process as one worker of the job its environment describes (or alone). Returns the exit
// code: 0, 1 when a result was wrong or an operation failed, 2 for bad input (unknown backend,
// a dtype or op a backend does not support).
int RunMultiWorkerBench(const BenchOptions& options);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_MULTI_WORKER_BENCH_H_
