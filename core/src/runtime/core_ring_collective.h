// The builtin plugin's collective "core_ring" (plugin.h interface 3): the core's reference
// collective across workers, always available. It is the algorithm@transport engine
// (algorithm_collective.h) running builtin tables, so it lives here, beside the engine, and not
// in builtin/, whose tables know the SDK and base only. A communicator is a tcp endpoint
// (tcp_endpoint.h) from the rendezvous store, with the ring algorithm (ring_algorithm.h) run over
// it through a CollectiveP2p. Operations run on the calling thread, one at a time per communicator,
// and complete before they return (*request = NULL). Host memory only.
//
// Options: "host" (the tcp transport's address; default the create args' address, the cluster
// spec's, else 127.0.0.1) and "segment_bytes" (the ring's pipelining unit, default 1 MiB);
// others are ignored (logged at debug level).
//
// A failed operation (a lost peer, a time-out, a size mismatch) aborts the endpoint, which tells
// the neighbours, so every rank fails instead of waiting; the communicator then fails every
// later operation and must be recreated.
#ifndef CHORUS_CORE_CORE_RING_COLLECTIVE_H_
#define CHORUS_CORE_CORE_RING_COLLECTIVE_H_

#include <chorus/plugin.h>

namespace chorus::internal {

const chorus_collective_api* CoreRingCollectiveTable();

// The table of the plugin "core" the registry loads: the builtin plugin's (builtin_plugin.h) with
// core_ring as its collective.
const chorus_plugin* CorePluginTable();

}  // namespace chorus::internal

#endif  // CHORUS_CORE_CORE_RING_COLLECTIVE_H_
