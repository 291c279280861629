// RegisterConformanceTests: which checks apply to a plugin, from the interfaces it provides.
#include <chorus/conformance.h>

#include "suite.h"

namespace chorus::conformance {

void RegisterConformanceTests(std::shared_ptr<PluginLibrary> plugin) {
  RegisterConformanceTests(std::move(plugin), KitOptions{});
}

void RegisterConformanceTests(std::shared_ptr<PluginLibrary> plugin, const KitOptions& options) {
  // Shared by every registered test; lives until the last one is destroyed at exit.
  auto suite = std::make_shared<const internal::Suite>(std::move(plugin), options);
  internal::RegisterNegotiationTests(suite);
  internal::RegisterLifecycleTests(suite);
  internal::RegisterDeviceEnumeratorTests(suite);
  internal::RegisterCrossDeviceOpsTests(suite);
  internal::RegisterBadArgumentTests(suite);
  internal::RegisterCollectiveTests(suite);
}

std::vector<std::string> Limitations(const PluginLibrary& plugin) {
  std::vector<std::string> lines;
  auto add = [&](const char* interface, const char* name) {
    lines.push_back(std::string(interface) + " '" + name +
                    "': this kit checks its negotiation only (table size, function slots, "
                    "name); its operations are not run");
  };
  if (auto* t = plugin.algorithm()) add("algorithm", t->name);
  if (auto* t = plugin.transport()) add("transport", t->name);
  return lines;
}

}  // namespace chorus::conformance
