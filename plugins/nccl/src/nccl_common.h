// What the nccl cross-device ops and collective share: dtype and reduce-op mapping, and waiting
// for work enqueued on CUDA streams with a time-out while watching NCCL's asynchronous errors
// (a failed or timed-out wait aborts the communicators, so nothing keeps writing the buffers).
#ifndef CHORUS_NCCL_NCCL_COMMON_H_
#define CHORUS_NCCL_NCCL_COMMON_H_

#include <chorus/plugin.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::nccl {

ncclDataType_t NcclType(chorus_dtype dtype);  // throws INVALID_ARGUMENT
ncclRedOp_t NcclOp(chorus_reduce_op op);      // throws (MEAN: UNSUPPORTED)
// Throws sdk::Error for a failed NCCL call: PEER_LOST for remote and system errors (a peer
// died, a connection broke), INTERNAL otherwise, quoting ncclGetErrorString and the last error.
void CheckNccl(ncclResult_t result, ncclComm_t comm, const std::string& what);
void CheckCudaCall(cudaError_t error, const std::string& what);

// Throws UNAVAILABLE naming the reason when this machine has no CUDA device.
void RequireCudaDevice(const char* what);

// One look at what can end a wait early: an asynchronous NCCL error of any communicator, `aborted`
// or the host's abort flag. On either it aborts every communicator and throws (PEER_LOST, INTERNAL
// or ABORTED).
void CheckAsyncErrorsAndAbort(const std::vector<ncclComm_t>& comms,
                              const std::atomic<bool>& aborted, const std::string& what);

// Polls until every (device, stream) pair has finished, NCCL reports an asynchronous error, the
// time-out passes or `aborted` is raised; aborts the communicators on any failure and throws.
void WaitForStreams(const std::vector<int>& devices, const std::vector<cudaStream_t>& streams,
                    const std::vector<ncclComm_t>& comms, int64_t timeout_ms,
                    const std::atomic<bool>& aborted, const std::string& what);

}  // namespace chorus::nccl

#endif  // CHORUS_NCCL_NCCL_COMMON_H_
