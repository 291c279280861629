// -n N: chorus-bench starts itself N times as the workers of a job on 127.0.0.1, as
// chorus-launch does (free ports, one TF_CONFIG each), and waits for them. Worker 0 prints the
// results on the shared stdout; every worker's errors go to the shared stderr.
#ifndef CHORUS_TOOLS_BENCH_LOCAL_JOB_H_
#define CHORUS_TOOLS_BENCH_LOCAL_JOB_H_

#include <string>
#include <vector>

namespace chorus::bench {

// Set (to "1") in the environment of the workers RunLocalJob starts.
inline constexpr const char* kWorkerMarker = "CHORUS_BENCH_WORKER";

// Runs `argv` (argv[0] is replaced by this executable) `workers` times with TF_CONFIG and
// kWorkerMarker set; with `hosts` > 1, worker w also gets CHORUS_HOST_ID "bench-host-<h>" with
// h = w / (workers / hosts), so that it plays host h. Returns 0 when every worker succeeds; else
// the first failure's exit code (128 + signal for a signal), after stopping the others; 124 when
// `timeout_seconds` ran out; 127 when a worker could not be started.
int RunLocalJob(const std::vector<std::string>& argv, int workers, int hosts,
                double timeout_seconds);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_LOCAL_JOB_H_
