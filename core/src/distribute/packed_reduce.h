// The fused batch reduce behind ReplicaContext::all_reduce and the optimizers: tensors of every
// replica grouped into packs (same dtype, at most bytes_per_pack bytes; 0 = one pack per dtype),
// each pack concatenated on its replica's device (by each replica's thread), all packs reduced in
// one batch_reduce call (in the replicas' rendezvous), and the results handed back as views into
// the packs. A tensor of kSoloPackBytes or more is a pack of its own and is not copied: it is
// reduced out of place, straight from its storage into its pack.
#ifndef CHORUS_CORE_PACKED_REDUCE_H_
#define CHORUS_CORE_PACKED_REDUCE_H_

#include <chorus/collective/cross_device_ops.h>
#include <chorus/runtime/tensor.h>

#include <vector>

namespace chorus::internal {

// Packing makes few large reduces out of many small tensors; a tensor this large is one already,
// and copying it into a pack and out again would cost two passes over its bytes for nothing.
inline constexpr int64_t kSoloPackBytes = int64_t{64} << 10;

// Indices of `tensors` per pack, in order.
std::vector<std::vector<size_t>> PlanPacks(const std::vector<Tensor>& tensors,
                                           int64_t bytes_per_pack);

// One replica's packs: what the reduce reads and where it writes, per pack. A pack of several
// tensors is their concatenation, reduced in place (input == output); a pack of one tensor reads
// the tensor itself and writes a new buffer.
struct ReplicaPacks {
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
};

// Checks that every replica passes the same dtypes and shapes (inputs[r][t]: replica r's tensor t).
void CheckSameLayout(const std::vector<std::vector<Tensor>>& inputs);

// One replica's part, run on its own thread: its tensors concatenated per pack on `device`.
ReplicaPacks PackTensors(const std::vector<Tensor>& tensors,
                         const std::vector<std::vector<size_t>>& packs, const Device& device);
// Every replica's packs (replicas[r]) reduced in one batch_reduce call.
void ReducePacks(CrossDeviceOps& ops, chorus_reduce_op op,
                 const std::vector<const ReplicaPacks*>& replicas);
// One replica's part again: its reduced packs (`outputs`) split into tensors shaped like
// `tensors` (views that share the packs' storage).
std::vector<Tensor> UnpackTensors(const std::vector<Tensor>& outputs,
                                  const std::vector<Tensor>& tensors,
                                  const std::vector<std::vector<size_t>>& packs);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_PACKED_REDUCE_H_
