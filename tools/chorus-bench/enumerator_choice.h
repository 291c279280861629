// --devices: the device enumerator of a platform ("cpu", "cuda", ...) among those loaded.
#ifndef CHORUS_TOOLS_BENCH_ENUMERATOR_CHOICE_H_
#define CHORUS_TOOLS_BENCH_ENUMERATOR_CHOICE_H_

#include <chorus/runtime/device.h>

#include <memory>
#include <string>

namespace chorus::bench {

// Exit code for "the enumerator sees no device here" (a cuda enumerator without a GPU).
inline constexpr int kNoDeviceExitCode = 77;

// The loaded enumerator of `platform`. Throws std::invalid_argument listing the platforms
// available when none is.
std::shared_ptr<DeviceEnumerator> FindEnumerator(const std::string& platform);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_ENUMERATOR_CHOICE_H_
