// The exported entry point and the plugin table: the cuda device enumerator, the nccl
// cross-device ops and the nccl collective. init() touches neither CUDA nor NCCL, so listing the
// plugin (chorus-info) costs nothing on a machine without GPUs.
#include <chorus/plugin.h>

#include <chorus/plugin_sdk.hpp>

#include "cuda_devices.h"
#include "nccl_collective.h"
#include "nccl_cross_device_ops.h"

namespace chorus::nccl {
namespace {

using sdk::Fail;

chorus_status Init(const chorus_host* host) {
  return sdk::Guard([&] {
    sdk::RequireHost(host, "nccl");
    sdk::SetHost(host);
  });
}

void Shutdown() { sdk::SetHost(nullptr); }

const char* LastError() { return sdk::LastError(); }

const chorus_plugin& Table() {
  static const chorus_plugin table = {
      .struct_size = sizeof(chorus_plugin),
      .abi_major = CHORUS_ABI_MAJOR,
      .abi_minor = CHORUS_ABI_MINOR,
      .name = "nccl",
      .version = "1.0.0 (NCCL " CHORUS_NCCL_VERSION_TEXT ")",
      .description = "CUDA devices and kernels, NCCL cross-device ops and NCCL collective",
      .init = Init,
      .shutdown = Shutdown,
      .last_error = LastError,
      .request_test = CrossDeviceOpsRequestTest,  // the collective hands out no requests
      .request_wait = CrossDeviceOpsRequestWait,
      .request_free = CrossDeviceOpsRequestFree,
      .device_enumerator = CudaDevicesTable(),
      .cross_device_ops = NcclCrossDeviceOpsTable(),
      .collective = NcclCollectiveTable(),
      .algorithm = nullptr,
      .transport = nullptr,
  };
  return table;
}

}  // namespace
}  // namespace chorus::nccl

extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return &chorus::nccl::Table();
}
