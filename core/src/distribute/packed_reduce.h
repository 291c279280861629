// The fused batch reduce behind ReplicaContext::all_reduce and the optimizers: tensors of every
// replica grouped into packs (same dtype, at most bytes_per_pack bytes; 0 = one pack per dtype),
// each pack concatenated on its replica's device (by each replica's thread), all packs reduced in
// one batch_reduce call (in the replicas' rendezvous), and the results split back (by each
// replica's thread again).
#ifndef CHORUS_CORE_PACKED_REDUCE_H_
#define CHORUS_CORE_PACKED_REDUCE_H_

#include <chorus/collective/cross_device_ops.h>
#include <chorus/runtime/tensor.h>

#include <vector>

namespace chorus::internal {

// Indices of `tensors` per pack, in order.
std::vector<std::vector<size_t>> PlanPacks(const std::vector<Tensor>& tensors,
                                           int64_t bytes_per_pack);

// Checks that every replica passes the same dtypes and shapes (inputs[r][t]: replica r's tensor t).
void CheckSameLayout(const std::vector<std::vector<Tensor>>& inputs);

// One replica's part, run on its own thread: its tensors concatenated per pack on `device`.
std::vector<Tensor> PackTensors(const std::vector<Tensor>& tensors,
                                const std::vector<std::vector<size_t>>& packs,
                                const Device& device);
// Every replica's packs (flats[r][p]) reduced in place, in one batch_reduce call.
void ReducePacks(CrossDeviceOps& ops, chorus_reduce_op op,
                 const std::vector<std::vector<Tensor>>& flats);
// One replica's part again: its reduced packs split into tensors shaped like `tensors`.
std::vector<Tensor> UnpackTensors(const std::vector<Tensor>& flats,
                                  const std::vector<Tensor>& tensors,
                                  const std::vector<std::vector<size_t>>& packs,
                                  const Device& device);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_PACKED_REDUCE_H_
