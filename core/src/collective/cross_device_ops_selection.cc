#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/collective/cross_device_ops.h>

namespace chorus {

CrossDeviceOpsSelection SelectCrossDeviceOps(const Registry& registry,
                                             std::string_view constructor_arg,
                                             const std::vector<Device>& devices) {
  if (!constructor_arg.empty()) {
    registry.FindCrossDeviceOps(constructor_arg, "the cross_device_ops argument");
    return {std::string(constructor_arg), "constructor argument"};
  }
  if (auto name = GetEnv("CHORUS_CROSS_DEVICE_OPS")) {
    auto plugin = registry.FindCrossDeviceOps(*name, "CHORUS_CROSS_DEVICE_OPS");
    return {plugin->cross_device_ops()->name, "CHORUS_CROSS_DEVICE_OPS"};
  }
  // tf.distribute's rule: NCCL when every device is a GPU and NCCL is there.
  bool all_gpus = !devices.empty();
  for (const auto& device : devices) all_gpus &= device.info().kind == CHORUS_DEVICE_GPU;
  if (all_gpus) {
    for (const auto& name : registry.CrossDeviceOpsNames()) {
      if (name == "nccl") return {"nccl", "default rule (every device is a GPU)"};
    }
    return {kReductionToOneDevice, "default rule (GPUs, but no nccl plugin is loaded)"};
  }
  return {kReductionToOneDevice, "default rule (not every device is a GPU)"};
}

}  // namespace chorus
