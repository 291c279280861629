// The fused batch reduce behind ReplicaContext::all_reduce and the optimizers: tensors of every
// replica grouped into packs (same dtype, at most bytes_per_pack bytes; 0 = one pack per dtype),
// each pack concatenated on its replica's device, all packs reduced in one batch_reduce call,
// and the results split back.
#ifndef CHORUS_CORE_PACKED_REDUCE_H_
#define CHORUS_CORE_PACKED_REDUCE_H_

#include <chorus/collective/cross_device_ops.h>
#include <chorus/runtime/tensor.h>

#include <vector>

namespace chorus::internal {

// Indices of `tensors` per pack, in order.
std::vector<std::vector<size_t>> PlanPacks(const std::vector<Tensor>& tensors,
                                           int64_t bytes_per_pack);

// inputs[r][t]: replica r's tensor t, on devices[r]. Returns outputs[r][t] on devices[r]
// holding the reduction over replicas. Checks every replica passes the same dtypes and shapes.
std::vector<std::vector<Tensor>> PackedBatchReduce(CrossDeviceOps& ops, chorus_reduce_op op,
                                                   const std::vector<std::vector<Tensor>>& inputs,
                                                   const std::vector<Device>& devices,
                                                   int64_t bytes_per_pack);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_PACKED_REDUCE_H_
