// The "tpu" plugin's table: the "pjrt" device enumerator over a PJRT C API plugin's devices.
#include <chorus/plugin.h>

#include <chorus/plugin_sdk.hpp>

#include "pjrt_devices.h"

extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  static const chorus_plugin table = [] {
    chorus_plugin t = chorus::sdk::PluginTable(
        "tpu", "0.1.0",
        "devices of a PJRT C API plugin (libtpu, JAX's CUDA plugin, chorus's reference plugin)");
    t.device_enumerator = chorus::tpu::PjrtDevicesTable();
    return t;
  }();
  return &table;
}
