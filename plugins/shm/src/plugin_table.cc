// The exported entry point and the plugin table. The collective's C wrappers come from the SDK
// (host_collective.hpp): every operation completes before it returns, and abort() may come from
// another thread meanwhile.
#include <chorus/plugin.h>

#include <chorus/host_collective.hpp>
#include <chorus/plugin_sdk.hpp>

#include "shm_communicator.h"

namespace chorus::shm {
namespace {

using sdk::Fail;

chorus_status Init(const chorus_host* host) {
  return sdk::Guard([&] {
    sdk::RequireHost(host, "shm");
    if (!CHORUS_HAS_FIELD(host, chorus_host, reduce_host) || host->reduce_host == nullptr) {
      Fail(CHORUS_UNSUPPORTED, "shm init: the core offers no reduce_host service");
    }
    sdk::SetHost(host);
  });
}

void Shutdown() { sdk::SetHost(nullptr); }

const char* LastError() { return sdk::LastError(); }

const chorus_collective_api kCollective = sdk::HostCollectiveTable<ShmCommunicator>("shm");

const chorus_plugin kPlugin = {
    .struct_size = sizeof(chorus_plugin),
    .abi_major = CHORUS_ABI_MAJOR,
    .abi_minor = CHORUS_ABI_MINOR,
    .name = "shm",
    .version = "1.0.0",
    .description = "collective for worker processes on one machine, through shared memory",
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
}  // namespace chorus::shm

extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return &chorus::shm::kPlugin;
}
