// The "pjrt" device enumerator: the addressable devices of a PJRT plugin's client, with memory
// whose buffers are PJRT handles (handle_memory.h) and kernels that run on them.
#ifndef CHORUS_PLUGINS_TPU_PJRT_DEVICES_H_
#define CHORUS_PLUGINS_TPU_PJRT_DEVICES_H_

#include <chorus/plugin.h>

namespace chorus::tpu {

// The enumerator's table (platform "pjrt"). Its create loads the PJRT plugin the variables name
// (ChoosePjrtPlugin) and creates its client with CHORUS_PJRT_OPTIONS; where no PJRT plugin is
// found it has no devices, and a named plugin that fails to load or refuses an option fails
// create with the plugin's words.
const chorus_device_enumerator_api* PjrtDevicesTable();

}  // namespace chorus::tpu

#endif  // CHORUS_PLUGINS_TPU_PJRT_DEVICES_H_
