// A collective made of an algorithm (plugin.h interface 4) run over a transport (interface 5):
// what the core's core_ring is (its ring over its tcp), and what every "algorithm@transport" the
// registry makes of the algorithms and transports it has loaded is (algorithm_pairs.h), whichever
// plugins they come from.
//
// A communicator is one endpoint of the transport, created over the communicator's store, with
// the algorithm run over it through a CollectiveP2p. Operations run on the calling thread, one at
// a time per communicator, and complete before they return (*request = NULL). Host memory only.
// An operation the algorithm does not implement (its supported_ops) runs on the core's ring over
// the same endpoint, so every pair serves every operation.
//
// Options: "transport.KEY=VALUE" goes to the transport's create as KEY=VALUE, and so does "host"
// (the core's tcp's address, the option core_ring always took); every other option goes to the
// algorithm's run (the ring's "segment_bytes", the torus' "grid").
//
// A failed operation (a lost peer, a time-out, a size mismatch) aborts the endpoint, which tells
// the neighbours, so every rank fails instead of waiting; the communicator then fails every
// later operation and must be recreated.
#ifndef CHORUS_CORE_ALGORITHM_COLLECTIVE_H_
#define CHORUS_CORE_ALGORITHM_COLLECTIVE_H_

#include <chorus/plugin.h>
#include <chorus/runtime/plugin_library.h>

#include <memory>
#include <string>

namespace chorus::internal {

// What a communicator runs: borrowed tables, which outlive every communicator made of them.
struct AlgorithmOverTransport {
  std::string name;  // the collective's name, in every message: "core_ring", "rhd@ucx"
  const chorus_plugin* algorithm_plugin = nullptr;  // for last_error
  const chorus_algorithm_api* algorithm = nullptr;
  const chorus_plugin* transport_plugin = nullptr;  // for its requests and last_error
  const chorus_transport_api* transport = nullptr;
  // Keep the plugins loaded while a communicator lives (null for the core's own tables).
  std::shared_ptr<PluginLibrary> algorithm_library, transport_library;
};

// The create of such a collective; the other functions of its table come from
// AlgorithmCollectiveTable. Called inside sdk::Guard by the table's create.
chorus_status CreateAlgorithmCommunicator(const AlgorithmOverTransport& what,
                                          const chorus_communicator_create_args* args,
                                          chorus_communicator** out);

// A collective table whose create is `create` (which calls CreateAlgorithmCommunicator) and whose
// operations run the communicator's algorithm.
chorus_collective_api AlgorithmCollectiveTable(
    const char* name,
    chorus_status (*create)(const chorus_communicator_create_args*, chorus_communicator**),
    const chorus_capabilities* capabilities);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_ALGORITHM_COLLECTIVE_H_
