#include "runtime/core_ring_collective.h"

#include <chorus/runtime/registry.h>

#include <chorus/plugin_sdk.hpp>

#include "builtin/builtin_plugin.h"
#include "builtin/ring_algorithm.h"
#include "builtin/tcp_transport.h"
#include "runtime/algorithm_collective.h"

namespace chorus::internal {
namespace {

// The core's ring over the core's tcp: the pair "ring@tcp", under the name it always had.
const AlgorithmOverTransport& CoreRing() {
  static const AlgorithmOverTransport what{kCoreRingName,
                                           BuiltinPluginTable(),
                                           RingAlgorithmTable(),
                                           BuiltinPluginTable(),
                                           TcpTransportTable(),
                                           nullptr,
                                           nullptr};
  return what;
}

chorus_status Create(const chorus_communicator_create_args* args, chorus_communicator** out) {
  return sdk::Guard([&] { CreateAlgorithmCommunicator(CoreRing(), args, out); });
}

// The reference across workers: host memory, any shape, every operation. AUTO takes it where no
// other collective scores higher; a RING request takes it when ring_grpc is not there. These are
// the ring's scores (50, 100) times the tcp transport's (10, 50) / 100, as for any pair.
uint32_t CoreRingScore(const chorus_score_args* args) {
  switch (args->request) {
    case CHORUS_REQUEST_AUTO:
      return 5;
    case CHORUS_REQUEST_RING:
      return 50;
    default:
      return 0;
  }
}

}  // namespace

const chorus_collective_api* CoreRingCollectiveTable() {
  static const chorus_capabilities capabilities =
      sdk::Capabilities(sdk::kHostMemory, CHORUS_SHAPE_ANY, sdk::kAllCollectiveOps, CoreRingScore);
  static const chorus_collective_api table =
      AlgorithmCollectiveTable(kCoreRingName, Create, &capabilities);
  return &table;
}

const chorus_plugin* CorePluginTable() {
  static const chorus_plugin table = [] {
    chorus_plugin t = *BuiltinPluginTable();
    t.collective = CoreRingCollectiveTable();
    return t;
  }();
  return &table;
}

}  // namespace chorus::internal
