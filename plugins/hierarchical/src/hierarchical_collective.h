// The "hierarchical" collective: two collectives composed by host, which the core creates for it
// (plugin.h 1.1 host collectives). Ranks on one host (equal host_id in the create args) talk
// through the `local` collective (shm: shared memory), and ranks with the same local rank on
// different hosts through the `cross` one (gloo, core_ring, ring_grpc, mpi, ...):
//
//   all_reduce      reduce-scatter within the host, all-reduce of the 1/L shard across hosts (each
//                   local rank its own shard, in parallel), all-gather within the host; below
//                   kSplitBytes, all-reduce within the host then across hosts (fewer steps);
//   broadcast       across hosts among the root's local rank, then within every host;
//   all_gather      within the host, then the host blocks across hosts;
//   reduce_scatter  within the host over blocks ordered by local rank, then across hosts;
//   barrier         within, across, within.
//
// Options: local=<collective> and cross=<collective> (each defaults to AUTO: the core's best by
// scores for one host of L ranks, and for H hosts of one rank), host=<id> (default: the create
// args' host_id; ranks without one count as one host), and local.<key>=<value> /
// cross.<key>=<value> passed on to the one collective. Every host must run as many ranks. The
// name "shm+gloo" anywhere a collective is named (CHORUS_COMMUNICATION, CHORUS_ALGORITHM,
// chorus-bench --backends) means this collective with local=shm, cross=gloo.
//
// Its score (AUTO): on several hosts of several ranks, one more than the best collective across
// hosts when a collective scores higher within one host than across (shm on a host): then the
// composition beats every flat collective; otherwise 0.
#ifndef CHORUS_PLUGINS_HIERARCHICAL_HIERARCHICAL_COLLECTIVE_H_
#define CHORUS_PLUGINS_HIERARCHICAL_HIERARCHICAL_COLLECTIVE_H_

#include <chorus/plugin.h>

#include <cstddef>

namespace chorus::hierarchical {

inline constexpr const char* kHierarchicalName = "hierarchical";
// Below this many bytes an all_reduce reduces whole within the host and then across hosts.
inline constexpr size_t kSplitBytes = 32 * 1024;

// The collective's table.
const chorus_collective_api* HierarchicalCollectiveTable();

}  // namespace chorus::hierarchical

#endif  // CHORUS_PLUGINS_HIERARCHICAL_HIERARCHICAL_COLLECTIVE_H_
