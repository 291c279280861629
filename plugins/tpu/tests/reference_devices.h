// The registry of the tpu plugin's tests (libchorus-tpu.so from the build tree) and the "pjrt"
// enumerator over chorus's reference PJRT plugin.
#ifndef CHORUS_PLUGINS_TPU_TESTS_REFERENCE_DEVICES_H_
#define CHORUS_PLUGINS_TPU_TESTS_REFERENCE_DEVICES_H_

#include <chorus/chorus.h>

#include <memory>
#include <string>

#include "scoped_variable.h"

namespace chorus::tpu::test {

inline Registry& TpuRegistry() {
  static Registry registry(LoaderOptions{{}, std::string(CHORUS_TPU_PLUGIN_PATH)});
  return registry;
}

// The pjrt enumerator over the reference plugin with `device_count` devices.
inline std::shared_ptr<DeviceEnumerator> ReferenceDevices(int device_count = 3) {
  chorus::test::ScopedVariable plugin("CHORUS_PJRT_PLUGIN", "reference");
  const std::string count = "device_count=" + std::to_string(device_count);
  chorus::test::ScopedVariable options("CHORUS_PJRT_OPTIONS", count.c_str());
  return DeviceEnumerator::Create(TpuRegistry().FindPlugin("tpu"));
}

}  // namespace chorus::tpu::test

#endif  // CHORUS_PLUGINS_TPU_TESTS_REFERENCE_DEVICES_H_
