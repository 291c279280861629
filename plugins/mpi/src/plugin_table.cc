// The exported entry point and the plugin table. The collective's C wrappers come from the SDK
// (host_collective.hpp): every operation completes before it returns, and abort() may come from
// another thread meanwhile.
#include <chorus/plugin.h>

#include <chorus/host_collective.hpp>
#include <chorus/plugin_sdk.hpp>

#include "mpi_communicator.h"

namespace chorus::mpi {
namespace {

using sdk::Fail;

chorus_status Init(const chorus_host* host) {
  return sdk::Guard([&] {
    sdk::RequireHost(host, "mpi");
    if (!CHORUS_HAS_FIELD(host, chorus_host, reduce_host) || host->reduce_host == nullptr) {
      Fail(CHORUS_UNSUPPORTED, "mpi init: the core offers no reduce_host service");
    }
    sdk::SetHost(host);
  });
}

void Shutdown() { sdk::SetHost(nullptr); }

const char* LastError() { return sdk::LastError(); }

const chorus_collective_api kCollective = sdk::HostCollectiveTable<MpiCommunicator>("mpi");

const chorus_plugin kPlugin = {
    .struct_size = sizeof(chorus_plugin),
    .abi_major = CHORUS_ABI_MAJOR,
    .abi_minor = CHORUS_ABI_MINOR,
    .name = "mpi",
    .version = "1.0.0",
    .description = "collective over Open MPI (MPI_COMM_WORLD of a job started by mpirun or srun)",
    .init = Init,
    .shutdown = Shutdown,
    .last_error = LastError,
    .request_test = sdk::NoRequestTest,
    .request_wait = sdk::NoRequestWait,
    .request_free = sdk::NoRequestFree,
    .device_enumerator = nullptr,
    .cross_device_ops = nullptr,
    .collective = &kCollective,
    .algorithm = nullptr,
    .transport = nullptr,
};

}  // namespace
}  // namespace chorus::mpi

extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return &chorus::mpi::kPlugin;
}
