// The device programs extension (ABI 1.4) of the "pjrt" enumerator: a user's StableHLO replica
// step compiled for the replicas' devices and run several steps per dispatch, its arguments and
// results whole allocations of the enumerator's handle memory.
#ifndef CHORUS_PLUGINS_TPU_DEVICE_PROGRAMS_H_
#define CHORUS_PLUGINS_TPU_DEVICE_PROGRAMS_H_

#include <chorus/plugin.h>

namespace chorus::tpu {

const chorus_device_programs_extension* PjrtDeviceProgramsExtension();

}  // namespace chorus::tpu

#endif  // CHORUS_PLUGINS_TPU_DEVICE_PROGRAMS_H_
