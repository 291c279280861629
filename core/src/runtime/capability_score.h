// What a table's capabilities (plugin.h 1.1) score for an operation: the filter by ops, memory
// and job shape, then the table's own score function. Here, below the registry, because the
// registry's algorithm@transport pairs score with it (algorithm_pairs.h); selection
// (chorus/collective/selection.h, ScoreValue and ScoreOf) is built on it.
#ifndef CHORUS_CORE_RUNTIME_CAPABILITY_SCORE_H_
#define CHORUS_CORE_RUNTIME_CAPABILITY_SCORE_H_

#include <chorus/plugin.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace chorus::internal {

// Whether a capability's memory kind serves the job's: "*" serves all; the cpu enumerator's
// memory is host memory.
bool Serves(std::string_view declared, std::string_view wanted);

// The plugin's own score, unclamped; nullopt when its score function threw.
std::optional<uint32_t> DeclaredScore(const chorus_capabilities* capabilities,
                                      const chorus_score_args& args);

// a x b / CHORUS_SCORE_MAX, the score of a pair algorithm@transport from its halves': 0 when
// either is 0, CHORUS_SCORE_UNKNOWN when either is unknown.
uint32_t PairProduct(uint32_t a, uint32_t b);

// 0 when `capabilities` is NULL or does not serve `args` (op, memory, shape), and for a declared
// score above CHORUS_SCORE_MAX (other than CHORUS_SCORE_UNKNOWN) or a score function that threw;
// else the declared score. The score function gets args.context = capabilities->context (1.6).
uint32_t CapabilityScore(const chorus_capabilities* capabilities, const chorus_score_args& args);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_RUNTIME_CAPABILITY_SCORE_H_
