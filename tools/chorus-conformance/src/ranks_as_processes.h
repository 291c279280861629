// The kit's checks with ranks as processes, run from a plain `chorus-conformance --plugin PATH`:
// tests RanksAsProcesses.Ranks2, .Ranks3 and .Ranks4 each start chorus-launch (installed beside
// chorus-conformance) with that many copies of this kit, one rank each (--ranks-from-environment,
// TF_CONFIG from chorus-launch), for the Collective, Transport and Algorithm checks that this
// run's --gtest_filter selects (all of them when it selects none). chorus-launch runs them with
// --keep-going: a rank that fails or dies does not stop the others, which report what they saw.
// A plugin that works with ranks as threads but not as processes (a store it reads after the
// leader's process ended, memory it assumes is shared) fails here on a vendor's first run.
#ifndef CHORUS_TOOLS_CONFORMANCE_RANKS_AS_PROCESSES_H_
#define CHORUS_TOOLS_CONFORMANCE_RANKS_AS_PROCESSES_H_

#include <chorus/runtime/plugin_library.h>

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::conformance {

// The suites the rank processes run: the ones whose ranks a job spreads over processes.
inline constexpr const char* kRankSuitesFilter = "Collective.*:Transport.*:Algorithm.*";

// Registers the RanksAsProcesses tests when `plugin` has a collective, transport or algorithm.
// `kit_arguments` are this run's own arguments that each rank process gets again (the plugin,
// options, --require, --transport), without GoogleTest's flags; each also gets --timeout of
// `timeout_ms`, the kit's time-out.
void RegisterRanksAsProcessesTests(const PluginLibrary& plugin,
                                   const std::vector<std::string>& kit_arguments,
                                   int64_t timeout_ms = 60000);

}  // namespace chorus::conformance

#endif  // CHORUS_TOOLS_CONFORMANCE_RANKS_AS_PROCESSES_H_
