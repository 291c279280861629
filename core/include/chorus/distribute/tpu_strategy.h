// TPUStrategy and the TPU system, as tf.distribute.TPUStrategy and
// tf.tpu.experimental.initialize_tpu_system: the replicas are the devices of the PJRT plugin
// chorus loaded (the tpu plugin's "pjrt" devices: CHORUS_PJRT_PLUGIN, else TPU_LIBRARY_PATH,
// else libtpu.so), or of any enumerator whose devices are TPUs.
#ifndef CHORUS_TPU_STRATEGY_H_
#define CHORUS_TPU_STRATEGY_H_

#include <chorus/cluster_resolver/tpu_cluster_resolver.h>
#include <chorus/distribute/multi_worker_mirrored_strategy.h>
#include <chorus/distribute/strategy.h>
#include <chorus/distribute/values.h>
#include <chorus/distribute/variable.h>

#include <memory>
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

// As tf.tpu.experimental.shutdown_tpu_system: releases the TPU system's device context (for the
// tpu plugin: the PJRT client, its buffers and its compiled programs); the next
// InitializeTpuSystem creates a new one. Throws Error(UNAVAILABLE) while a strategy,
// variable or tensor still holds its devices (destroy them first), and NOT_FOUND when there is
// no TPU system.
void ShutdownTpuSystem();

// As tf.tpu.experimental.DeviceAssignment with one core per replica: the device of the TPU
// system (this host's) each replica runs on. Programs over these replicas carry the assignment
// in their compile options, so any devices in any order work.
class DeviceAssignment {
 public:
  // Replica r on the device whose coordinates (Topology::device_coordinates) are
  // core_assignment[r]. Throws Error(INVALID_ARGUMENT) for no replicas, coordinates no device
  // has (or devices without coordinates) and a device given twice.
  DeviceAssignment(Topology topology, const std::vector<std::vector<int>>& core_assignment);
  // As DeviceAssignment.build(topology, num_replicas=...): the first num_replicas devices in the
  // topology's order (all of them for -1).
  static DeviceAssignment Build(const Topology& topology, int num_replicas = -1);

  const Topology& topology() const { return topology_; }
  int num_replicas() const { return static_cast<int>(replica_devices_.size()); }
  int num_cores_per_replica() const { return 1; }
  // The replica's device: its coordinates, and its index among this host's devices.
  const std::vector<int>& coordinates(int replica, int logical_core = 0) const;
  int tpu_ordinal(int replica, int logical_core = 0) const;
  std::vector<Device> devices() const;

 private:
  DeviceAssignment() = default;
  int Check(int replica, int logical_core) const;
  Topology topology_;
  std::vector<int> replica_devices_;  // indices into topology_.devices
};

// A replica's training step as one program, as TPUStrategy compiles a step function: StableHLO
// (MLIR text) whose public function @main takes the step's parameters, then its inputs (a
// replica's batch), and returns the new parameters, then its outputs (a loss, say). The
// gradients' all-reduce is inside the program (stablehlo.all_reduce over every replica), so a
// step needs nothing from chorus between its start and its end.
struct ReplicaProgram {
  std::string stablehlo;
  int num_parameters = 0;  // @main's first arguments, and its first results of the same types
  // Steps per dispatch, as Keras's steps_per_execution: one run() of the compiled step performs
  // this many steps on the devices, each on its own inputs.
  int steps_per_execution = 1;
  // The element type of each output, so that run() returns typed tensors (a loss as F32); an
  // output without one comes back as its bytes (U8).
  std::vector<chorus_dtype> output_dtypes;
};

class DeviceProgram;

// A ReplicaProgram compiled for a strategy's replicas (TPUStrategy::Compile).
class CompiledStep {
 public:
  const ReplicaProgram& program() const { return program_; }
  // Per replica, the bytes of each parameter and of each step input and output.
  const std::vector<uint64_t>& parameter_bytes() const { return parameter_bytes_; }
  const std::vector<uint64_t>& input_bytes() const { return input_bytes_; }
  const std::vector<uint64_t>& output_bytes() const { return output_bytes_; }

 private:
  friend class TPUStrategy;
  ReplicaProgram program_;
  std::shared_ptr<const DeviceProgram> device_program_;
  std::vector<uint64_t> parameter_bytes_, input_bytes_, output_bytes_;
};

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
  // As TPUStrategy(tpu_cluster_resolver, experimental_device_assignment): the replicas are the
  // assignment's devices, on every host of the resolver's cluster.
  TPUStrategy(const TPUClusterResolver& resolver, const DeviceAssignment& device_assignment,
              std::string_view cross_device_ops = "", const CommunicationOptions& options = {});
  // This host's devices alone.
  explicit TPUStrategy(Topology topology, std::string_view cross_device_ops = "",
                       const CommunicationOptions& options = {});

  std::string name() const override { return "TPUStrategy"; }
  const Topology& topology() const { return topology_; }

  // Compiles `program` for this strategy's replicas through the device programs of their
  // plugin (the tpu plugin's, over any PJRT plugin). Throws Error(UNSUPPORTED) for devices that
  // do not run programs and for a strategy over several hosts (a program's all-reduce spans one
  // PJRT client's devices), and the compiler's error, naming the line, for a program it refuses.
  CompiledStep Compile(const ReplicaProgram& program) const;

  // One dispatch of `step`: program().steps_per_execution steps on every replica at once.
  // `parameters` are variables created in this strategy's scope, one per program parameter (each
  // replica's copy is read, and replaced by the copy after the last step); inputs[s][k] is input
  // k of step s, a PerReplica whose tensors are on the replicas' devices or on the host (copied
  // to the devices first). Returns outputs[s][j], output j of step s on every replica. Throws
  // Error(INVALID_ARGUMENT) naming the first count, size or device that differs.
  std::vector<std::vector<PerReplica>> run(const CompiledStep& step,
                                           const std::vector<Variable>& parameters,
                                           const std::vector<std::vector<PerReplica>>& inputs);
  using MultiWorkerMirroredStrategy::run;

 private:
  TPUStrategy(const TPUClusterResolver& resolver, Topology topology,
              std::string_view cross_device_ops, const CommunicationOptions& options);
  Topology topology_;
};

}  // namespace chorus

#endif  // CHORUS_TPU_STRATEGY_H_
