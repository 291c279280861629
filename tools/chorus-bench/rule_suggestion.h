// --suggest-rules: from one run's measurements, the CHORUS_ALGORITHM rules that give every size
// the backend that was fastest there, so that a job on this machine runs each operation on its
// measured best (the core's AUTO cannot know another machine's figures).
#ifndef CHORUS_TOOLS_BENCH_RULE_SUGGESTION_H_
#define CHORUS_TOOLS_BENCH_RULE_SUGGESTION_H_

#include <string>
#include <vector>

#include "measurement.h"

namespace chorus::bench {

// Per operation that CHORUS_ALGORITHM can route (all_reduce, broadcast, all_gather,
// reduce_scatter), the backend with the lowest median time at each measured size (out of place
// where measured, else in place; a backend with #wrong > 0 never wins). Size s_i's winner covers
// [s_i, s_i+1); the smallest size's from 0, the largest's to inf; neighbours with one winner
// merge. "" when nothing routable was measured. Example: "allreduce:0-256K=shm,256K-inf=gloo".
std::string SuggestAlgorithmRules(const std::vector<Measurement>& rows);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_RULE_SUGGESTION_H_
