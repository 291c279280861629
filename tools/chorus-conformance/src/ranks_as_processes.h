// The kit's checks with ranks as processes, run from a plain `chorus-conformance --plugin PATH`:
// tests RanksAsProcesses.Ranks2, .Ranks3 and .Ranks4 each start chorus-launch (installed beside
// chorus-conformance) with that many copies of this kit, one rank each (--ranks-from-environment,
// TF_CONFIG from chorus-launch), for the Collective, Transport and Algorithm suites. A plugin that
// works with ranks as threads but not as processes (a store it reads after the leader's process
// ended, memory it assumes is shared) fails here on a vendor's first run.
#ifndef CHORUS_TOOLS_CONFORMANCE_RANKS_AS_PROCESSES_H_
#define CHORUS_TOOLS_CONFORMANCE_RANKS_AS_PROCESSES_H_

#include <chorus/runtime/plugin_library.h>

#include <string>
#include <vector>

namespace chorus::conformance {

// The suites the rank processes run: the ones whose ranks a job spreads over processes.
inline constexpr const char* kRankSuitesFilter = "Collective.*:Transport.*:Algorithm.*";

// Registers the RanksAsProcesses tests when `plugin` has a collective, transport or algorithm.
// `kit_arguments` are this run's own arguments that each rank process gets again (the plugin,
// options, --require, --transport), without GoogleTest's flags.
void RegisterRanksAsProcessesTests(const PluginLibrary& plugin,
                                   const std::vector<std::string>& kit_arguments);

}  // namespace chorus::conformance

#endif  // CHORUS_TOOLS_CONFORMANCE_RANKS_AS_PROCESSES_H_
