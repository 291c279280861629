// The devices a strategy replicates over when its constructor is given none.
#ifndef CHORUS_CORE_DISTRIBUTE_DEFAULT_DEVICES_H_
#define CHORUS_CORE_DISTRIBUTE_DEFAULT_DEVICES_H_

#include <chorus/runtime/registry.h>

#include <vector>

namespace chorus::internal {

// `devices`, or every accelerator of the process (else its cpu devices) when it is empty.
inline std::vector<Device> OrDefaultDevices(std::vector<Device> devices) {
  return devices.empty() ? Registry::Global().DefaultDevices() : devices;
}

}  // namespace chorus::internal

#endif  // CHORUS_CORE_DISTRIBUTE_DEFAULT_DEVICES_H_
