// The registry: the core's builtin plugin plus every plugin the loader accepted, and the
// selection of backends by name (constructor argument > environment variable > default rule).
#ifndef CHORUS_REGISTRY_H_
#define CHORUS_REGISTRY_H_

#include <chorus/runtime/device.h>
#include <chorus/runtime/loader.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

// Names of the core's builtin backends.
inline constexpr const char* kBuiltinPluginName = "core";
inline constexpr const char* kCpuPlatform = "cpu";
inline constexpr const char* kReductionToOneDevice = "reduction_to_one_device";

class Registry {
 public:
  // Loads plugins as `options` say. The builtin plugin is always first.
  explicit Registry(const LoaderOptions& options);

  // The process-wide registry, from the environment, built on first use.
  static Registry& Global();

  const std::vector<std::shared_ptr<PluginLibrary>>& plugins() const { return plugins_; }
  const std::vector<Rejection>& rejected() const { return discovery_.rejected; }
  const std::vector<std::string>& searched_dirs() const { return discovery_.searched_dirs; }

  // Plugin by its name, or nullptr.
  std::shared_ptr<PluginLibrary> FindPlugin(std::string_view name) const;

  // Names of every cross-device ops available (builtin first).
  std::vector<std::string> CrossDeviceOpsNames() const;
  // The plugin providing the cross-device ops called `name` (its interface name, or its plugin's
  // name). Throws Error(INVALID_ARGUMENT) naming `what` and listing the available names.
  std::shared_ptr<PluginLibrary> FindCrossDeviceOps(std::string_view name,
                                                    std::string_view what) const;

  // The cpu device context (CHORUS_CPU_DEVICES devices) and, lazily, one context per plugin
  // enumerator. An enumerator whose create fails is left out with a logged reason.
  std::shared_ptr<DeviceEnumerator> CpuDevices() const;
  std::vector<std::shared_ptr<DeviceEnumerator>> DeviceEnumerators() const;

  // Default devices: every accelerator (GPU/TPU) when there is one, else the cpu devices.
  std::vector<Device> DefaultDevices() const;

 private:
  Discovery discovery_;
  std::vector<std::shared_ptr<PluginLibrary>> plugins_;
  mutable std::vector<std::shared_ptr<DeviceEnumerator>> enumerators_;
  mutable std::once_flag enumerators_once_;
};

}  // namespace chorus

#endif  // CHORUS_REGISTRY_H_
