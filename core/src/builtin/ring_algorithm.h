// The builtin plugin's algorithm "ring" (plugin.h interface 4): ring collectives written only
// against a chorus_p2p, so any transport can carry them, reducing with the host's kernels.
//  - all_reduce: ring reduce-scatter then ring all-gather over `size` chunks;
//  - broadcast: a chain from the root;
//  - all_gather, reduce_scatter: one ring pass each;
//  - barrier: a token passed around the ring twice.
// Every chunk is cut into segments (option "segment_bytes", default 1 MiB) and pipelined: the
// receive of the next segment is posted before the current one is reduced or forwarded.
#ifndef CHORUS_CORE_RING_ALGORITHM_H_
#define CHORUS_CORE_RING_ALGORITHM_H_

#include <chorus/plugin.h>

#include <cstddef>

namespace chorus::internal {

inline constexpr const char* kRingAlgorithmName = "ring";
inline constexpr size_t kRingDefaultSegmentBytes = size_t{1} << 20;

const chorus_algorithm_api* RingAlgorithmTable();

}  // namespace chorus::internal

#endif  // CHORUS_CORE_RING_ALGORITHM_H_
