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

const chorus_plugin& Table() {
  static const chorus_plugin table = [] {
    chorus_plugin t =
        sdk::PluginTable("nccl", "1.1.0 (NCCL " CHORUS_NCCL_VERSION_TEXT ")",
                         "CUDA devices and kernels, NCCL cross-device ops and NCCL collective");
    t.request_test = CrossDeviceOpsRequestTest;  // the collective hands out no requests
    t.request_wait = CrossDeviceOpsRequestWait;
    t.request_free = CrossDeviceOpsRequestFree;
    t.device_enumerator = CudaDevicesTable();
    t.cross_device_ops = NcclCrossDeviceOpsTable();
    t.collective = NcclCollectiveTable();
    return t;
  }();
  return table;
}

}  // namespace
}  // namespace chorus::nccl

extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return &chorus::nccl::Table();
}
