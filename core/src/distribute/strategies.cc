#include <chorus/base/error.h>
#include <chorus/distribute/strategies.h>

#include "distribute/default_devices.h"
#include "distribute/replicated_placement.h"

namespace chorus {
namespace {

using internal::OrDefaultDevices;
using internal::ReplicatedPlacement;

}  // namespace

OneDeviceStrategy::OneDeviceStrategy(Device device)
    : Strategy({std::move(device)}, kReductionToOneDevice, {}) {}

VariableKind OneDeviceStrategy::PlacementFor(VariableSynchronization) const {
  return VariableKind::kMirrored;  // one device: a mirrored variable of one copy
}

MirroredStrategy::MirroredStrategy(std::vector<Device> devices, std::string_view cross_device_ops,
                                   const CommunicationOptions& options)
    : Strategy(OrDefaultDevices(std::move(devices)), cross_device_ops, options) {}

VariableKind MirroredStrategy::PlacementFor(VariableSynchronization synchronization) const {
  return ReplicatedPlacement(synchronization);
}

namespace {

Device DefaultParameterDevice(const std::vector<Device>& compute) {
  if (compute.size() == 1) return compute.front();
  return Device{Registry::Global().CpuDevices(), 0};
}

}  // namespace

CentralStorageStrategy::CentralStorageStrategy(std::vector<Device> compute_devices,
                                               std::optional<Device> parameter_device)
    : Strategy(OrDefaultDevices(std::move(compute_devices)), kReductionToOneDevice, {}),
      parameter_device_(parameter_device ? *parameter_device : DefaultParameterDevice(devices())) {}

VariableKind CentralStorageStrategy::PlacementFor(VariableSynchronization synchronization) const {
  return synchronization == VariableSynchronization::kOnRead ? VariableKind::kSyncOnRead
                                                             : VariableKind::kCentral;
}

std::vector<Device> CentralStorageStrategy::DevicesFor(VariableKind kind) const {
  if (kind == VariableKind::kCentral) return {parameter_device_};
  return devices();
}

}  // namespace chorus
