// MoreRanksThanCpus: the rule by which a plugin's waits sleep at once instead of spinning. A rank
// that spins while its host runs more of the job's ranks than this process may run on holds the
// core the rank it waits for needs (sched_yield hands it over only sometimes). The core's tcp
// transport and the ucx, ofi and shm plugins use it. Header-only, C++17, Linux.
#ifndef CHORUS_SDK_HOST_CPUS_HPP_
#define CHORUS_SDK_HOST_CPUS_HPP_

#include <sched.h>

namespace chorus::sdk {

// Whether `ranks_on_this_host` (this process's rank among them) outnumber the cpus this process
// may run on (sched_getaffinity). False when the affinity cannot be read.
inline bool MoreRanksThanCpus(long ranks_on_this_host) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  return sched_getaffinity(0, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) < ranks_on_this_host;
}

}  // namespace chorus::sdk

#endif  // CHORUS_SDK_HOST_CPUS_HPP_
