#include "enumerator_choice.h"

#include <chorus/runtime/registry.h>

#include <stdexcept>

namespace chorus::bench {

std::shared_ptr<DeviceEnumerator> FindEnumerator(const std::string& platform) {
  std::string available;
  for (const auto& e : Registry::Global().DeviceEnumerators()) {
    if (e->platform() == platform) return e;
    available += (available.empty() ? "" : ", ") + e->platform();
  }
  throw std::invalid_argument(
      "--devices " + platform +
      ": no device enumerator of that platform is loaded; available: " + available);
}

}  // namespace chorus::bench
