// The kit's checks of declared scores (plugin.h's capabilities: collectives and cross-device ops
// 1.1, algorithms and transports 1.3) over a grid of every declared operation x every dtype x
// sizes {0, 1, 4K, 1M, 64M, 1G} x job shapes x every declared memory x requests AUTO, RING and
// NCCL, and the note the kit prints for a table AUTO can never choose. Apart from the Negotiation
// tests that run them, so that the kit's own tests check the messages on capabilities they build.
//
// Only operations in `ops` are asked (plugin.h: score is called for nothing else). The rules:
//  - every score within 0..CHORUS_SCORE_MAX (the core takes a larger one as 0);
//  - the same answer when asked twice (every rank must get the same, from any thread);
//  - a score > 0 only for an operation the table runs: an algorithm's ops within its
//    supported_ops (the core drops the others from its pairs; for collectives and cross-device
//    ops the Negotiation tests check ops against the interface's operations).
#ifndef CHORUS_CONFORMANCE_SCORE_CHECKS_H_
#define CHORUS_CONFORMANCE_SCORE_CHECKS_H_

#include <chorus/plugin.h>
#include <chorus/runtime/plugin_library.h>

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::conformance::internal {

enum class ScoredKind { kCrossDeviceOps, kCollective, kAlgorithm, kTransport };

// "cross-device ops", "collective", "algorithm", "transport".
const char* ScoredKindName(ScoredKind kind);

// What AUTO must beat for a table of its kind to be chosen: the core's reference
// (reduction_to_one_device for cross-device ops; core_ring = ring@tcp for collectives and for the
// pairs of algorithms and transports), and for a pair the core's other half (an algorithm's pairs
// with the core's tcp, a transport's with the core's ring), to show what the pair scores.
struct ScoreReference {
  std::string name;                                   // "core_ring (ring@tcp)"
  const chorus_capabilities* capabilities = nullptr;  // NULL: no note is made
  std::string partner_name;                           // "tcp" or "ring"; "" for no pair
  const chorus_capabilities* partner = nullptr;
};

// The references of the core's builtin plugin `core` for a table of `kind`.
ScoreReference CoreReference(const PluginLibrary& core, ScoredKind kind);

struct ScoreFindings {
  std::vector<std::string> failures;  // each names the rule it breaks
  std::vector<std::string> notes;     // not failures: what the scores mean for AUTO
};

// Checks the scores of the table `name` of `kind` with capabilities `c` (struct_size, memory and
// score already checked). `runs_ops`: the operations it runs, CHORUS_OP_BIT mask (an algorithm's
// supported_ops; ignored for the other kinds).
ScoreFindings CheckScores(ScoredKind kind, const std::string& name, const chorus_capabilities& c,
                          uint32_t runs_ops, const ScoreReference& reference);

// The note for a table without capabilities: chosen by name only.
std::string NoCapabilitiesNote(ScoredKind kind, const std::string& name);

// "0 B", "1 B", "4 KiB", "1 MiB", "64 MiB", "1 GiB".
std::string ScoreSizeName(uint64_t bytes);

}  // namespace chorus::conformance::internal

#endif  // CHORUS_CONFORMANCE_SCORE_CHECKS_H_
