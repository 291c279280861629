// The operations chorus-bench measures, their names on the command line and in the output.
#ifndef CHORUS_TOOLS_BENCH_COLLECTIVE_KIND_H_
#define CHORUS_TOOLS_BENCH_COLLECTIVE_KIND_H_

#include <string>
#include <string_view>
#include <vector>

namespace chorus::bench {

enum class CollectiveKind { kAllReduce, kAllGather, kBroadcast, kReduceScatter, kBatchReduce };

// "all_reduce", "all_gather", "broadcast", "reduce_scatter", "batch_reduce".
const char* CollectiveName(CollectiveKind kind);
// Inverse of CollectiveName; throws std::invalid_argument listing the valid names.
CollectiveKind ParseCollective(std::string_view name);
// A comma list of names ("all_reduce,broadcast"); throws as ParseCollective, or on an empty list.
std::vector<CollectiveKind> ParseCollectiveList(std::string_view list);
// Splits "a,b,c" into its non-empty items.
std::vector<std::string> SplitCommaList(std::string_view list);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_COLLECTIVE_KIND_H_
