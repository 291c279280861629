// NCCL cross-device ops ("nccl"): one process, many GPUs. ncclCommInitAll over the replicas'
// devices; reduce, batch_reduce, broadcast and all_gather run as grouped NCCL calls
// (ncclGroupStart/End), one per device, on a stream per device, and complete before returning
// (a NULL stream; a non-NULL one is UNSUPPORTED in this version). batch_reduce puts every reduce
// of the batch in one group, which is NCCL's own fusion; num_packs is accepted and ignored.
#ifndef CHORUS_NCCL_NCCL_CROSS_DEVICE_OPS_H_
#define CHORUS_NCCL_NCCL_CROSS_DEVICE_OPS_H_

#include <chorus/plugin.h>

namespace chorus::nccl {

const chorus_cross_device_ops_api* NcclCrossDeviceOpsTable();

}  // namespace chorus::nccl

#endif  // CHORUS_NCCL_NCCL_CROSS_DEVICE_OPS_H_
