#include <chorus/base/error.h>
#include <chorus/distribute/tpu_strategy.h>
#include <chorus/runtime/registry.h>

#include <algorithm>
#include <memory>
#include <utility>

namespace chorus {
namespace {

std::vector<Device> DevicesOf(const std::shared_ptr<DeviceEnumerator>& enumerator) {
  std::vector<Device> devices;
  for (uint32_t i = 0; i < enumerator->count(); ++i) devices.push_back({enumerator, i});
  return devices;
}

std::vector<Device> TpuSystemDevices() {
  const auto enumerators = Registry::Global().DeviceEnumerators();
  for (const auto& enumerator : enumerators) {
    if (enumerator->count() > 0 && enumerator->info(0).kind == CHORUS_DEVICE_TPU) {
      return DevicesOf(enumerator);
    }
  }
  for (const auto& enumerator : enumerators) {
    if (enumerator->platform() == kPjrtPlatform && enumerator->count() > 0) {
      return DevicesOf(enumerator);
    }
  }
  return {};
}

}  // namespace

Topology InitializeTpuSystem(const TPUClusterResolver& resolver) {
  int workers = 1;
  for (const auto& [job, tasks] : resolver.cluster_spec()) {
    if (job == resolver.job_name()) workers = std::max(1, static_cast<int>(tasks.size()));
  }
  Topology topology;
  topology.devices = TpuSystemDevices();
  if (topology.devices.empty()) {
    throw Error(CHORUS_NOT_FOUND,
                "InitializeTpuSystem: this process has no TPU or PJRT devices: set "
                "CHORUS_PJRT_PLUGIN to a PJRT plugin's path (or 'reference' for chorus's "
                "reference plugin), or TPU_LIBRARY_PATH to libtpu's, with chorus's tpu plugin "
                "loaded (chorus-info lists the plugins, their devices and why a device "
                "enumerator was not used)");
  }
  size_t dimensions = 0;
  for (const Device& device : topology.devices) {
    const auto& coords = device.info().coords;
    while (dimensions < coords.size() && coords[dimensions] >= 0) ++dimensions;
  }
  topology.mesh_shape.assign(dimensions, 0);
  for (const Device& device : topology.devices) {
    std::vector<int> coordinates;
    for (size_t d = 0; d < dimensions; ++d) {
      const int c = std::max(0, device.info().coords[d]);
      coordinates.push_back(c);
      topology.mesh_shape[d] = std::max(topology.mesh_shape[d], c + 1);
    }
    topology.device_coordinates.push_back(std::move(coordinates));
  }
  topology.num_tasks = workers;
  topology.num_tpus_per_task = static_cast<int>(topology.devices.size());
  return topology;
}

TPUStrategy::TPUStrategy(const TPUClusterResolver& resolver, std::string_view cross_device_ops,
                         const CommunicationOptions& options)
    : TPUStrategy(resolver, InitializeTpuSystem(resolver), cross_device_ops, options) {}

TPUStrategy::TPUStrategy(Topology topology, std::string_view cross_device_ops,
                         const CommunicationOptions& options)
    : TPUStrategy(TPUClusterResolver("local"), std::move(topology), cross_device_ops, options) {}

TPUStrategy::TPUStrategy(const TPUClusterResolver& resolver, Topology topology,
                         std::string_view cross_device_ops, const CommunicationOptions& options)
    : MultiWorkerMirroredStrategy(std::make_shared<TPUClusterResolver>(resolver), options,
                                  topology.devices, cross_device_ops),
      topology_(std::move(topology)) {}

}  // namespace chorus
