// The builtin "hierarchical" collective: two collectives composed by host. Ranks on one host
// (HostIdentity) talk through the `local` collective (shm: shared memory), and ranks with the same
// local rank on different hosts through the `cross` one (gloo, core_ring, ring_grpc, mpi, ...):
//
//   all_reduce      reduce-scatter within the host, all-reduce of the 1/L shard across hosts (each
//                   local rank its own shard, in parallel), all-gather within the host; below
//                   kSplitBytes, all-reduce within the host then across hosts (fewer steps);
//   broadcast       across hosts among the root's local rank, then within every host;
//   all_gather      within the host, then the host blocks across hosts;
//   reduce_scatter  within the host over blocks ordered by local rank, then across hosts;
//   barrier         within, across, within.
//
// Options: local=<collective> and cross=<collective> (required), host=<id> (default HostIdentity),
// and local.<key>=<value> / cross.<key>=<value> passed on to the one collective. Every host must
// run as many ranks. The name "shm+gloo" anywhere a collective is named (CHORUS_COMMUNICATION,
// CHORUS_ALGORITHM, chorus-bench --backends) means this collective with local=shm, cross=gloo.
//
// It lives in the core, not in a plugin, because composing collectives needs the loader: a plugin
// sees only plugin.h, which cannot open another plugin.
#ifndef CHORUS_CORE_HIERARCHICAL_COLLECTIVE_H_
#define CHORUS_CORE_HIERARCHICAL_COLLECTIVE_H_

#include <chorus/plugin.h>

#include <cstddef>

namespace chorus::internal {

inline constexpr const char* kHierarchicalName = "hierarchical";
// Below this many bytes an all_reduce reduces whole within the host and then across hosts.
inline constexpr size_t kSplitBytes = 32 * 1024;

// The collective's table (the builtin plugin "core_hierarchical" of builtin_plugin.h holds it).
const chorus_collective_api* HierarchicalCollectiveTable();

}  // namespace chorus::internal

#endif  // CHORUS_CORE_HIERARCHICAL_COLLECTIVE_H_
