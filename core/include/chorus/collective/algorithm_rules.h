// Per-operation, per-size choice of the collective that runs an operation: the rules of
// CHORUS_ALGORITHM, e.g. "allreduce:0-64K=shm,64K-inf=gloo;broadcast:0-inf=core_ring".
//
// Grammar: rules for one operation are `op:range=name[,range=name...]`; operations are separated
// by ';'. op is allreduce, broadcast, allgather or reducescatter (all_reduce etc. too). A range is
// `lo-hi` in bytes, lo included and hi excluded, with K, M, G suffixes (powers of 1024) and `inf`
// for no upper end. The bytes of an operation are those of its whole buffer, as nccl-tests counts
// them: all_reduce and broadcast count × dtype size; all_gather the gathered output; reduce_scatter
// the scattered input. An operation or a size no rule covers runs on the communicator's own
// collective. `AUTO` (or an empty value) means no rules.
#ifndef CHORUS_ALGORITHM_RULES_H_
#define CHORUS_ALGORITHM_RULES_H_

#include <chorus/plugin.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chorus {

struct AlgorithmRule {
  chorus_collective_op op = CHORUS_OP_ALL_REDUCE;
  uint64_t min_bytes = 0;           // included
  uint64_t max_bytes = UINT64_MAX;  // excluded; UINT64_MAX = no upper end
  std::string collective;           // a collective's name, as CHORUS_COMMUNICATION takes it
};

// Parses the grammar above. Throws Error(INVALID_ARGUMENT) naming `source` (e.g.
// "CHORUS_ALGORITHM") and the offending part: an unknown operation, a malformed or empty range,
// a bad suffix, two ranges of one operation that overlap.
std::vector<AlgorithmRule> ParseAlgorithmRules(const std::string& text,
                                               const std::string& source = "CHORUS_ALGORITHM");

// The rules of CHORUS_ALGORITHM; empty when it is unset or AUTO.
std::vector<AlgorithmRule> AlgorithmRulesFromEnvironment();

// The collective a rule names for `op` of `bytes`, or nullopt when no rule covers it.
std::optional<std::string> RouteFor(const std::vector<AlgorithmRule>& rules,
                                    chorus_collective_op op, uint64_t bytes);

// A size as the rules write it: "64K", "1M", "4097", "inf" (UINT64_MAX).
std::string RuleBytesText(uint64_t bytes);

// "allreduce:0-64K=shm,64K-inf=gloo" (the canonical form of the rules).
std::string DescribeRules(const std::vector<AlgorithmRule>& rules);

}  // namespace chorus

#endif  // CHORUS_ALGORITHM_RULES_H_
