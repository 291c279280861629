// The exported entry point: the SDK builds the whole table around MpiCommunicator
// (host_collective.hpp); every operation completes before it returns, and abort() may come from
// another thread meanwhile.
#include <chorus/plugin.h>

#include <chorus/host_collective.hpp>
#include <chorus/plugin_sdk.hpp>

#include "mpi_communicator.h"

namespace chorus::mpi {
namespace {

void CheckHost(const chorus_host& host) {
  if (!CHORUS_HAS_FIELD(&host, chorus_host, reduce_host) || host.reduce_host == nullptr) {
    sdk::Fail(CHORUS_UNSUPPORTED, "mpi init: the core offers no reduce_host service");
  }
}

// Open MPI's blocking MPI_Allreduce: slower than shm on one host (README, Figures), so AUTO keeps
// it below the core's reference; it is chorus-bench's baseline, chosen by name
// (CHORUS_COMMUNICATION=mpi) in jobs mpirun starts.
uint32_t Score(const chorus_score_args* args) {
  return args->request == CHORUS_REQUEST_AUTO ? 2 : 0;
}
const chorus_capabilities kCapabilities =
    sdk::Capabilities(sdk::kHostMemory, CHORUS_SHAPE_ANY, sdk::kAllCollectiveOps, Score);

}  // namespace
}  // namespace chorus::mpi

extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return chorus::sdk::HostCollectivePlugin<chorus::mpi::MpiCommunicator>({
      .plugin_name = "mpi",
      .version = "1.2.0",
      .description = "collective over Open MPI (MPI_COMM_WORLD of a job started by mpirun or srun)",
      .capabilities = &chorus::mpi::kCapabilities,
      .check_host = chorus::mpi::CheckHost,
  });
}
