// TPUStrategy and the TPU system, as tf.distribute.TPUStrategy and
// tf.tpu.experimental.initialize_tpu_system: the replicas are the devices of the PJRT plugin
// chorus loaded (the tpu plugin's "pjrt" devices: CHORUS_PJRT_PLUGIN, else TPU_LIBRARY_PATH,
// else libtpu.so), or of any enumerator whose devices are TPUs.
#ifndef CHORUS_TPU_STRATEGY_H_
#define CHORUS_TPU_STRATEGY_H_

#include <chorus/cluster_resolver/tpu_cluster_resolver.h>
#include <chorus/distribute/multi_worker_mirrored_strategy.h>
#include <chorus/distribute/strategy.h>

#include <string>
#include <string_view>
#include <vector>

namespace chorus {

// The platform of device enumerators whose buffers are PJRT handles (the SDK guide, section 10).
inline constexpr std::string_view kPjrtPlatform = "pjrt";

// What InitializeTpuSystem found, as tf.tpu.experimental.Topology.
struct Topology {
  std::vector<Device> devices;  // this host's devices, in the enumerator's order
  // Per coordinate the devices have (chorus_device_info.coords, up to 4): the largest plus one.
  // Empty when the devices have no coordinates.
  std::vector<int> mesh_shape;
  // Each device's coordinates (as many as mesh_shape has).
  std::vector<std::vector<int>> device_coordinates;
  int num_tasks = 1;
  int num_tpus_per_task = 0;
};

// Finds the TPU system of `resolver` in this process: the devices of the first enumerator whose
// devices are TPUs, else those of the "pjrt" enumerator (a PJRT plugin for another accelerator,
// or chorus's reference plugin). Throws Error(NOT_FOUND) when there are none, saying which
// variables choose a PJRT plugin. With a resolver of several workers (one process per host),
// `devices` are this host's and `num_tasks` the workers.
Topology InitializeTpuSystem(const TPUClusterResolver& resolver);

// One replica per device of InitializeTpuSystem(resolver) on every worker of the resolver's
// cluster, variables mirrored on every device. Within a host the gradients are summed by the
// cross-device ops (the argument, else CHORUS_CROSS_DEVICE_OPS, else AUTO: the tpu plugin's
// compiled programs on PJRT devices), across hosts by the collective `options` or
// CHORUS_COMMUNICATION choose, as MultiWorkerMirroredStrategy does: worker 0 serves the
// rendezvous at its address in the resolver's cluster, every worker needs as many devices.
class TPUStrategy : public MultiWorkerMirroredStrategy {
 public:
  explicit TPUStrategy(const TPUClusterResolver& resolver, std::string_view cross_device_ops = "",
                       const CommunicationOptions& options = {});
  // This host's devices alone.
  explicit TPUStrategy(Topology topology, std::string_view cross_device_ops = "",
                       const CommunicationOptions& options = {});

  std::string name() const override { return "TPUStrategy"; }
  const Topology& topology() const { return topology_; }

 private:
  TPUStrategy(const TPUClusterResolver& resolver, Topology topology,
              std::string_view cross_device_ops, const CommunicationOptions& options);
  Topology topology_;
};

}  // namespace chorus

#endif  // CHORUS_TPU_STRATEGY_H_
