// The programs the tpu plugin compiles for PJRT devices: StableHLO in MLIR text, and the compile
// options that go with them.
//
// Device memory holds bytes (handle_memory.h: an allocation's contents are one u8 array), so every
// program takes and returns u8 arrays of whole allocations; an all-reduce reinterprets its bytes
// as the dtype's values (reshape + bitcast_convert, which move no data) and back. A program's text
// is its cache key: two calls that need the same program produce the same text.
#ifndef CHORUS_PLUGINS_TPU_STABLEHLO_PROGRAMS_H_
#define CHORUS_PLUGINS_TPU_STABLEHLO_PROGRAMS_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::tpu {

// A serialized xla.CompileOptionsProto: executable_build_options { device_ordinal: -1,
// num_replicas, num_partitions: 1 }, and compile_portable_executable for a one-device program
// that runs on whichever device it is given; hand-encoded (no protobuf dependency for four
// integers).
// With `device_ids` (PJRT device ids, one per replica), also executable_build_options'
// device_assignment (field 9: xla.DeviceAssignmentProto {replica_count, computation_count 1,
// computation_devices {replica_device_ids}}), so that replica r runs on device_ids[r].
std::string CompileOptionsProto(int num_replicas, bool portable = false,
                                const std::vector<int64_t>& device_ids = {});

// The StableHLO element type of a dtype: "f32", "bf16", "i32", "ui8", ...
const char* StablehloElementType(chorus_dtype dtype);

// The replicas taking part, in the order the operation combines them (a reduction's summation
// order, a gather's concatenation order, a broadcast's source first).
using ReplicaGroup = std::vector<int>;

// One reduction of an all-reduce program: `count` values of `dtype` per replica.
struct AllReducePart {
  chorus_dtype dtype = CHORUS_F32;
  chorus_reduce_op op = CHORUS_REDUCE_SUM;  // never MEAN
  size_t count = 0;                         // > 0
  ReplicaGroup group;
  bool donate = false;  // the argument's buffer may become the result's (an in-place reduce)
};

// Argument i of every replica is part i's bytes; result i is their reduction over the group.
std::string AllReduceProgram(const std::vector<AllReducePart>& parts, int num_replicas);
// Argument 0 of every replica is count * group.size() values of `dtype`; the result of the
// replica at position k of the group is values [k * count, (k + 1) * count) of their reduction
// over the group (stablehlo.reduce_scatter, scatter_dimension 0).
std::string ReduceScatterProgram(chorus_dtype dtype, chorus_reduce_op op, size_t count,
                                 const ReplicaGroup& group, int num_replicas);
// One device's kernels (one replica, run on any device): the result is arg0 `op` arg1 element by
// element, and arg0 divided by `divisor` (integers truncated toward zero).
std::string ReduceKernelProgram(chorus_dtype dtype, chorus_reduce_op op, size_t count);
std::string DivideKernelProgram(chorus_dtype dtype, size_t count, uint64_t divisor);

// Every replica's result is the `bytes` of group.front()'s argument.
std::string BroadcastProgram(size_t bytes, const ReplicaGroup& group, int num_replicas);
// Every replica's result is the group's arguments (`bytes` each) concatenated in group order.
std::string AllGatherProgram(size_t bytes, const ReplicaGroup& group, int num_replicas);

// A tensor type of a user's program: element type ("f32", "i32", ...) and dimensions.
struct TensorType {
  std::string element;
  std::vector<int64_t> dims;
  size_t elements() const;
  size_t bytes() const;      // Throws Error(INVALID_ARGUMENT) for an element type without a size
  std::string text() const;  // "tensor<16x784xf32>", "tensor<f32>"
};

// The signature of a module's public function @main: its argument and result types.
struct MainSignature {
  std::vector<TensorType> arguments;
  std::vector<TensorType> results;
};

// Reads @main's signature from a StableHLO module (`func.func public @main(%x: tensor<...>, ...)
// -> (tensor<...>, ...)`). Throws Error(INVALID_ARGUMENT) naming what it cannot read.
MainSignature ReadMainSignature(const std::string& mlir);

// A replica program for the device programs extension: the user's module with its @main renamed
// @chorus_replica_step, under a new @main that takes every argument as whole allocations' bytes,
// calls the step `steps` times (its first `num_carried` results are the next step's first
// arguments) and returns the carried values after the last step, then every step's other
// results, as bytes. Throws Error(INVALID_ARGUMENT) when a carried result's type is not its
// argument's, or the module has no public @main.
// With `donate_carried`, carried argument i is donated to result i (tf.aliasing_output), for a
// run that writes each carried value over its argument's allocation.
std::string ReplicaStepProgram(const std::string& user_module, const MainSignature& signature,
                               uint32_t steps, uint32_t num_carried, int num_replicas,
                               bool donate_carried = false);

}  // namespace chorus::tpu

#endif  // CHORUS_PLUGINS_TPU_STABLEHLO_PROGRAMS_H_
