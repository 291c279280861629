// NCCL cross-device ops ("nccl"): one process, many GPUs. ncclCommInitAll over the replicas'
// devices; reduce, batch_reduce, broadcast and all_gather run as grouped NCCL calls
// (ncclGroupStart/End), one per device, on the ops' own stream of each device.
//
// Streams: a caller's stream (a cudaStream_t of any device, as everywhere in the cuda enumerator)
// orders the whole operation: every device's part starts after what the caller queued on it
// before the call, and the caller's stream waits for every part (events both ways); the call
// returns once that is enqueued, with no request. With a NULL stream the call returns a request
// that completes through one CUDA event per device; waiting on it watches NCCL's asynchronous
// errors and the ops' own time-out, and a failure aborts the communicators.
//
// batch_reduce puts every reduce of the batch in one group, which is NCCL's own fusion;
// num_packs is accepted and ignored.
#ifndef CHORUS_NCCL_NCCL_CROSS_DEVICE_OPS_H_
#define CHORUS_NCCL_NCCL_CROSS_DEVICE_OPS_H_

#include <chorus/plugin.h>

#include <cstdint>

namespace chorus::nccl {

const chorus_cross_device_ops_api* NcclCrossDeviceOpsTable();

// The plugin's request_test/wait/free: only the cross-device ops hand out requests.
chorus_status CrossDeviceOpsRequestTest(chorus_request* request, int* done);
chorus_status CrossDeviceOpsRequestWait(chorus_request* request, int64_t timeout_ms);
void CrossDeviceOpsRequestFree(chorus_request* request);

}  // namespace chorus::nccl

#endif  // CHORUS_NCCL_NCCL_CROSS_DEVICE_OPS_H_
