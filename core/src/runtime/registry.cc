#include <chorus/base/error.h>
#include <chorus/runtime/registry.h>

#include <algorithm>

#include "base/logging.h"
#include "builtin/builtin_plugin.h"

namespace chorus {

Registry::Registry(const LoaderOptions& options) {
  std::string reason;
  auto builtin = PluginLibrary::FromBuiltinTable(internal::BuiltinPluginTable(), &reason);
  if (!builtin) throw Error(CHORUS_INTERNAL, "the builtin plugin was rejected: " + reason);
  plugins_.push_back(builtin);
  auto hierarchical = PluginLibrary::FromBuiltinTable(internal::HierarchicalPluginTable(), &reason);
  if (!hierarchical) throw Error(CHORUS_INTERNAL, "the builtin plugin was rejected: " + reason);
  plugins_.push_back(hierarchical);
  discovery_ = DiscoverPlugins(options);
  for (auto& plugin : discovery_.loaded) {
    if (plugin->name() == kBuiltinPluginName || plugin->name() == hierarchical->name()) {
      discovery_.rejected.push_back({plugin->path(), "the name '" + plugin->name() +
                                                         "' belongs to a plugin builtin to "
                                                         "chorus; rename it"});
      continue;
    }
    plugins_.push_back(plugin);
  }
}

Registry& Registry::Global() {
  static Registry registry(LoaderOptions::FromEnvironment());
  return registry;
}

std::shared_ptr<PluginLibrary> Registry::FindPlugin(std::string_view name) const {
  for (const auto& plugin : plugins_) {
    if (plugin->name() == name) return plugin;
  }
  return nullptr;
}

std::vector<std::string> Registry::CrossDeviceOpsNames() const {
  std::vector<std::string> names;
  for (const auto& plugin : plugins_) {
    if (auto* api = plugin->cross_device_ops()) names.push_back(api->name);
  }
  return names;
}

std::shared_ptr<PluginLibrary> Registry::FindCrossDeviceOps(std::string_view name,
                                                            std::string_view what) const {
  for (const auto& plugin : plugins_) {
    auto* api = plugin->cross_device_ops();
    if (api != nullptr && (name == api->name || name == plugin->name())) return plugin;
  }
  std::string available;
  for (const auto& n : CrossDeviceOpsNames()) available += (available.empty() ? "" : ", ") + n;
  std::string message = std::string(what) + " names cross-device ops '" + std::string(name) +
                        "', which no loaded plugin provides. Available: " + available + ".";
  for (const auto& rejection : rejected()) {
    if (rejection.path.find("libchorus-" + std::string(name) + ".so") != std::string::npos) {
      message += " " + rejection.path + " was rejected: " + rejection.reason;
    }
  }
  throw Error(CHORUS_INVALID_ARGUMENT, message);
}

std::shared_ptr<DeviceEnumerator> Registry::CpuDevices() const {
  DeviceEnumerators();
  return enumerators_.front();
}

std::vector<std::shared_ptr<DeviceEnumerator>> Registry::DeviceEnumerators() const {
  std::call_once(enumerators_once_, [this] {
    std::vector<std::shared_ptr<DeviceEnumerator>> created;
    const uint32_t cpu_count = CpuDeviceCountFromEnvironment();
    created.push_back(
        DeviceEnumerator::Create(plugins_.front(), {{"count", std::to_string(cpu_count)}}));
    for (size_t i = 1; i < plugins_.size(); ++i) {
      if (plugins_[i]->device_enumerator() == nullptr) continue;
      try {
        created.push_back(DeviceEnumerator::Create(plugins_[i]));
      } catch (const Error& e) {
        Log().warn("devices of plugin {} are not used: {}", plugins_[i]->name(), e.what());
      }
    }
    enumerators_ = std::move(created);
  });
  return enumerators_;
}

std::vector<Device> Registry::DefaultDevices() const {
  std::vector<Device> accelerators, cpus;
  for (const auto& enumerator : DeviceEnumerators()) {
    for (uint32_t i = 0; i < enumerator->count(); ++i) {
      const auto kind = enumerator->info(i).kind;
      // One enumerator's accelerators: cross-device ops work within one enumerator.
      const bool same = accelerators.empty() || accelerators.front().enumerator == enumerator;
      if ((kind == CHORUS_DEVICE_GPU || kind == CHORUS_DEVICE_TPU) && same) {
        accelerators.push_back({enumerator, i});
      } else if (enumerator == enumerators_.front()) {
        cpus.push_back({enumerator, i});
      }
    }
  }
  return accelerators.empty() ? cpus : accelerators;
}

}  // namespace chorus
