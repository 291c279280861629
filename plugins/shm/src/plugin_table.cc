// The exported entry point: the SDK builds the whole table around ShmCommunicator
// (host_collective.hpp); every operation completes before it returns, and abort() may come from
// another thread meanwhile.
#include <chorus/plugin.h>

#include <chorus/host_collective.hpp>
#include <chorus/plugin_sdk.hpp>

#include "shm_communicator.h"

namespace chorus::shm {
namespace {

void CheckHost(const chorus_host& host) {
  if (!CHORUS_HAS_FIELD(&host, chorus_host, reduce_host) || host.reduce_host == nullptr) {
    sdk::Fail(CHORUS_UNSUPPORTED, "shm init: the core offers no reduce_host service");
  }
}

#if CHORUS_ABI_MINOR >= 1
// The fastest collective measured on one machine at every size (README, Benchmarks): a
// specialist for one host. It is no ring, so RING and NCCL requests never get it.
uint32_t Score(const chorus_score_args* args) {
  return args->request == CHORUS_REQUEST_AUTO && args->hosts == 1 ? 80 : 0;
}
const chorus_capabilities kCapabilities =
    sdk::Capabilities(sdk::kHostMemory, CHORUS_SHAPE_ONE_HOST, sdk::kAllCollectiveOps, Score);
#endif

}  // namespace
}  // namespace chorus::shm

extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return chorus::sdk::HostCollectivePlugin<chorus::shm::ShmCommunicator>({
    .plugin_name = "shm", .version = "1.1.0",
    .description = "collective for worker processes on one machine, through shared memory",
#if CHORUS_ABI_MINOR >= 1
    .capabilities = &chorus::shm::kCapabilities,
#endif
    .check_host = chorus::shm::CheckHost,
  });
}
