// chorus-bench --transports: transports (plugin.h interface 5) measured point to point between
// the 2 workers of a job, each endpoint created through the core's TransportEndpoint over the
// job's store; worker 0 prints a line per size with the transports side by side.
#ifndef CHORUS_TOOLS_BENCH_TRANSPORT_BENCH_H_
#define CHORUS_TOOLS_BENCH_TRANSPORT_BENCH_H_

#include <string>
#include <vector>

#include "options.h"

namespace chorus::bench {

// Throws for an empty list, a name given twice (std::invalid_argument), and a name no loaded
// plugin provides as a transport (chorus::Error INVALID_ARGUMENT from the registry, listing the
// transports available).
void CheckTransportNames(const std::vector<std::string>& names);

// This process as one of the 2 workers of the job its environment describes. Returns the exit
// code: 0, 1 when a byte arrived wrong or a transport failed, 2 for bad input (an unknown
// transport, a job of other than 2 workers).
int RunTransportBench(const BenchOptions& options);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_TRANSPORT_BENCH_H_
