// The backend `auto` (the communicator AUTO makes for the job, as a trainer gets it), the
// candidates --auto measures beside it, and AUTO's regret per size.
#ifndef CHORUS_TOOLS_BENCH_AUTO_BACKEND_H_
#define CHORUS_TOOLS_BENCH_AUTO_BACKEND_H_

#include <chorus/collective/selection.h>
#include <chorus/runtime/registry.h>

#include <functional>
#include <string>
#include <vector>

#include "measurement.h"

namespace chorus::bench {

// "auto" in any case.
bool IsAutoBackend(const std::string& name);

// The backends measured when --backends names none: CHORUS_COMMUNICATION's value when it is set
// (AUTO as `auto`, RING and NCCL as the plan that request makes), else the core's core_ring.
std::vector<std::string> DefaultBackends();

// How the communicator of backend `name` is planned for a job of `shape`: `auto` as AUTO plans it
// without CHORUS_COMMUNICATION and CHORUS_ALGORITHM (the tuning file and autotuning variables
// apply, as they would for a trainer), RING and NCCL as those requests, any other name as
// that collective.
CollectivePlan PlanForBackend(const Registry& registry, const std::string& name,
                              const JobShape& shape);

// Every collective that can serve an all_reduce for a job of `shape` (a score above 0 under AUTO
// or RING at some size from 1K to 1G), and on several hosts of several ranks the best collective
// within a host composed with each of those across hosts ("shm+core_ring"). The mpi collective
// only when mpirun started the job.
std::vector<std::string> AutoCandidates(const Registry& registry, const JobShape& shape,
                                        bool under_mpirun);

// One row of the regret table.
struct RegretRow {
  CollectiveKind op = CollectiveKind::kAllReduce;
  uint64_t bytes = 0;
  std::string auto_runs_on;  // the collective AUTO ran it on
  double auto_us = 0;
  std::string fastest;  // the fastest other backend
  double fastest_us = 0;
  double regret() const { return fastest_us > 0 ? auto_us / fastest_us : 0; }
};

// AUTO's rows against the fastest other backend's, per operation and size (out-of-place rows;
// broadcast's in-place ones). `runs_on(op, bytes)` names the collective AUTO ran.
std::vector<RegretRow> RegretRows(
    const std::vector<Measurement>& rows,
    const std::function<std::string(CollectiveKind, uint64_t)>& runs_on);
// The table printed after the run, with the worst regret per operation.
std::string RegretTable(const std::vector<RegretRow>& rows);
// The same as CSV: op,bytes,auto_runs_on,auto_us,fastest,fastest_us,regret.
std::string RegretCsv(const std::vector<RegretRow>& rows);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_AUTO_BACKEND_H_
