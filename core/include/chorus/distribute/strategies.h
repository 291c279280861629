// The single-process strategies of tf.distribute.
#ifndef CHORUS_STRATEGIES_H_
#define CHORUS_STRATEGIES_H_

#include <chorus/distribute/strategy.h>

namespace chorus {

// Everything on one device; one replica.
class OneDeviceStrategy : public Strategy {
 public:
  explicit OneDeviceStrategy(Device device);
  std::string name() const override { return "OneDeviceStrategy"; }
  VariableKind PlacementFor(VariableSynchronization synchronization) const override;
};

// One replica per device, variables mirrored on every device, gradients summed with the
// cross-device ops: the constructor argument (a name; empty = CHORUS_CROSS_DEVICE_OPS, else
// tf.distribute's default rule). Devices: empty = the registry's default devices (every
// accelerator, else CHORUS_CPU_DEVICES cpu devices).
class MirroredStrategy : public Strategy {
 public:
  explicit MirroredStrategy(std::vector<Device> devices = {},
                            std::string_view cross_device_ops = "",
                            const CommunicationOptions& options = {});
  std::string name() const override { return "MirroredStrategy"; }
  VariableKind PlacementFor(VariableSynchronization synchronization) const override;
};

// One replica per compute device; every (ON_WRITE) variable has one copy on the parameter
// device, which the replicas read and to which their gradients are reduced.
class CentralStorageStrategy : public Strategy {
 public:
  // compute_devices empty = the registry's default devices; parameter_device unset = the cpu
  // device CPU:0 when there is more than one compute device, else the one compute device.
  explicit CentralStorageStrategy(std::vector<Device> compute_devices = {},
                                  std::optional<Device> parameter_device = {});
  std::string name() const override { return "CentralStorageStrategy"; }
  VariableKind PlacementFor(VariableSynchronization synchronization) const override;
  std::vector<Device> DevicesFor(VariableKind kind) const override;
  Device parameter_device() const override { return parameter_device_; }

 private:
  Device parameter_device_;
};

}  // namespace chorus

#endif  // CHORUS_STRATEGIES_H_
