// RegisterConformanceTests: which checks apply to a plugin, from the interfaces it provides.
#include <chorus/conformance.h>

#include "declarations.h"
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
  internal::RegisterTransportTests(suite);
  internal::RegisterAlgorithmTests(suite);
}

std::vector<std::string> Limitations(const PluginLibrary& plugin, const KitOptions& options) {
  using internal::DeclaresOnHost;
  std::vector<std::string> lines;
  const std::string unrequired = " (what it answers UNSUPPORTED or UNAVAILABLE there is skipped";
  for (const auto* t : plugin.collectives()) {
    bool host = false;
    for (int op = CHORUS_OP_ALL_REDUCE; op <= CHORUS_OP_BARRIER; ++op) {
      host = host || DeclaresOnHost(*t, static_cast<chorus_collective_op>(op));
    }
    if (!host) {
      lines.push_back(std::string("collective '") + t->name +
                      "' declares no host memory; this kit runs collectives on host memory" +
                      unrequired + ", even with --require)");
    }
  }
  for (const auto* t : plugin.cross_device_ops_list()) {
    if (internal::DeclaresAnyOnCpuDevices(*t)) continue;
    std::string own;  // an enumerator of the plugin whose memory the ops declare
    for (const auto* enumerator : plugin.device_enumerators()) {
      for (int op : {CHORUS_OP_ALL_REDUCE, CHORUS_OP_BROADCAST, CHORUS_OP_ALL_GATHER,
                     CHORUS_OP_REDUCE_SCATTER}) {
        if (own.empty() && internal::DeclaresOnMemory(*t, static_cast<chorus_collective_op>(op),
                                                      enumerator->platform)) {
          own = enumerator->platform;
        }
      }
    }
    lines.push_back(std::string("cross-device ops '") + t->name +
                    "' declare neither host nor cpu memory; " +
                    (own.empty() ? std::string("this kit runs them on the core's cpu devices")
                                 : "the CrossDeviceOps sweep runs them on this plugin's '" + own +
                                       "' devices, the lifecycle and bad-argument checks on the "
                                       "core's cpu devices") +
                    unrequired + ", even with --require)");
  }
  if (!plugin.algorithms().empty() && options.transport_plugin == nullptr) {
    lines.push_back(
        "algorithms run over the core's tcp transport only; --transport PATH adds the transports "
        "of another plugin");
  }
  return lines;
}

std::vector<std::string> Limitations(const PluginLibrary& plugin) {
  return Limitations(plugin, KitOptions{});
}

}  // namespace chorus::conformance
