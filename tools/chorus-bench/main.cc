// chorus-bench: nccl-tests' figures (time, algbw, busbw, #wrong) for chorus collectives across
// worker processes, and for cross-device ops across the devices of one process.
//   chorus-bench -n N ...           starts N workers on 127.0.0.1 (itself, with TF_CONFIG)
//   chorus-bench ...                one worker of a job under TF_CONFIG or mpirun (or alone)
//   chorus-bench --in-process ...   cross-device ops across --replicas devices (cpu, --devices)
//   chorus-bench --kernels ...      a device enumerator's copy and reduce kernels (--devices)
//   chorus-bench --transports ...   transports point to point between 2 workers (with -n 2 ...)
#include <cstdlib>
#include <iostream>

#include "in_process_bench.h"
#include "kernel_bench.h"
#include "local_job.h"
#include "multi_worker_bench.h"
#include "options.h"
#include "transport_bench.h"
#include "worker_job.h"

int main(int argc, char** argv) {
  using namespace chorus::bench;
  BenchOptions options;
  if (const auto code = ParseOptions(argc, argv, &options)) return *code;
  if (options.kernels) return RunKernelBench(options);
  if (options.in_process) return RunInProcessBench(options);
  const bool started_as_worker = std::getenv(kWorkerMarker) != nullptr || StartedByMpirun();
  if (options.workers > 0 && !started_as_worker) {
    try {  // check once here rather than in every worker
      if (options.transports.empty()) {
        CheckCollectiveBackends(options.backends);
      } else {
        CheckTransportNames(options.transports);
      }
    } catch (const std::exception& e) {
      std::cerr << "chorus-bench: " << e.what() << "\n";
      return 2;
    }
    return RunLocalJob(options.argv, options.workers, options.hosts, options.job_timeout_seconds);
  }
  if (!options.transports.empty()) return RunTransportBench(options);
  return RunMultiWorkerBench(options);
}
