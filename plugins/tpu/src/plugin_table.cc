// The "tpu" plugin's table: the "pjrt" device enumerator over a PJRT C API plugin's devices, and
// the "tpu" cross-device ops, which run compiled programs on them, and the device programs
// extension, which runs a user's replica step on them.
#include <chorus/plugin.h>

#include <chorus/plugin_sdk.hpp>

#include "device_programs.h"
#include "pjrt_devices.h"
#include "tpu_cross_device_ops.h"

extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  static const chorus_plugin table = [] {
    chorus_plugin t = chorus::sdk::PluginTable(
        "tpu", "0.2.0",
        "devices of a PJRT C API plugin (libtpu, JAX's CUDA plugin, chorus's reference plugin) "
        "and cross-device ops compiled into programs on them");
    t.device_enumerator = chorus::tpu::PjrtDevicesTable();
    t.cross_device_ops = chorus::tpu::TpuCrossDeviceOpsTable();
    t.extensions = &chorus::tpu::PjrtDeviceProgramsExtension()->base;
    return t;
  }();
  return &table;
}
