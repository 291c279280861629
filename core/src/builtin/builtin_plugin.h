// The core's builtin plugin "core": the cpu device enumerator, the ReductionToOneDevice
// cross-device ops, the tcp transport and the ring algorithm, exposed through the same C tables
// as any plugin so that everything above (strategies, chorus-info, the conformance kit) treats
// them alike. Its collective core_ring, the ring over the tcp, is run by the core's
// algorithm@transport engine: the registry adds it (runtime/core_ring_collective.h).
#ifndef CHORUS_CORE_BUILTIN_PLUGIN_H_
#define CHORUS_CORE_BUILTIN_PLUGIN_H_

#include <chorus/plugin.h>

namespace chorus::internal {

const chorus_plugin* BuiltinPluginTable();
const chorus_device_enumerator_api* CpuDeviceEnumeratorTable();
const chorus_cross_device_ops_api* ReductionToOneDeviceTable();

}  // namespace chorus::internal

#endif  // CHORUS_CORE_BUILTIN_PLUGIN_H_
