// What the nccl cross-device ops and collective share: dtype and reduce-op mapping, and waiting
// for work enqueued on CUDA streams with a time-out while watching NCCL's asynchronous errors
// (a failed or timed-out wait aborts the communicators, so nothing keeps writing the buffers).
#ifndef CHORUS_NCCL_NCCL_COMMON_H_
#define CHORUS_NCCL_NCCL_COMMON_H_

#include <chorus/plugin.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::nccl {

// What the cross-device ops and the collective serve: buffers of the cuda enumerator, scored as a
// vendor's library on its hardware (AUTO and NCCL requests; never RING).
inline constexpr const char* kCudaMemory[] = {"cuda", nullptr};
uint32_t NcclScore(const chorus_score_args* args);

ncclDataType_t NcclType(chorus_dtype dtype);  // throws INVALID_ARGUMENT
ncclRedOp_t NcclOp(chorus_reduce_op op);      // throws (MEAN: UNSUPPORTED)
// Throws sdk::Error for a failed NCCL call: PEER_LOST for ncclRemoteError (a peer died, a
// connection broke), INVALID_ARGUMENT for invalid arguments or usage, INTERNAL otherwise
// (ncclSystemError is a local failure: shared memory, sockets, IPC), quoting ncclGetErrorString
// and the last error. ncclInProgress is not success here: callers on non-blocking communicators
// wait it out with WaitWhileInProgress first.
void CheckNccl(ncclResult_t result, ncclComm_t comm, const std::string& what);
void CheckCudaCall(cudaError_t error, const std::string& what);

// Interprets cudaStreamQuery/cudaEventQuery: true when finished, false when not ready (clearing
// the runtime's last error, which cudaErrorNotReady sets, so that a later kernel launch does not
// report it); throws for any other error.
bool QueryFinished(cudaError_t state, const std::string& what);

// now + timeout_ms, clamped to [0, 2^40 ms] so that a huge time-out cannot overflow the clock.
std::chrono::steady_clock::time_point DeadlineAfter(int64_t timeout_ms);

// Throws UNAVAILABLE naming the reason when this machine has no CUDA device.
void RequireCudaDevice(const char* what);

// One look at what can end a wait early: an asynchronous NCCL error of any communicator, `aborted`
// or the host's abort flag. On either it aborts every communicator and throws (PEER_LOST, INTERNAL
// or ABORTED).
void CheckAsyncErrorsAndAbort(const std::vector<ncclComm_t>& comms,
                              const std::atomic<bool>& aborted, const std::string& what);

// On a non-blocking communicator a call (ncclCommInitRankConfig, a collective, ncclCommFinalize)
// may return ncclInProgress before its work is enqueued, and no other NCCL call may be made on the
// communicator until ncclCommGetAsyncError stops saying so. `result` is the call's own;
// ncclInProgress is polled until it ends. Any error (NCCL latches it: every later call on the
// communicator would return it), `aborted` or the deadline aborts the communicator (once:
// comm_aborted), so that no kernel is left waiting for a peer, and throws.
void WaitWhileInProgress(ncclResult_t result, ncclComm_t comm,
                         std::chrono::steady_clock::time_point deadline, int64_t timeout_ms,
                         const std::atomic<bool>& aborted, std::atomic<bool>& comm_aborted,
                         const std::string& what);

// Polls until every (device, stream) pair has finished, NCCL reports an asynchronous error, the
// deadline (timeout_ms after some start, for the message) passes or `aborted` is raised; aborts
// the communicators on any failure and throws.
void WaitForStreams(const std::vector<int>& devices, const std::vector<cudaStream_t>& streams,
                    const std::vector<ncclComm_t>& comms,
                    std::chrono::steady_clock::time_point deadline, int64_t timeout_ms,
                    const std::atomic<bool>& aborted, const std::string& what);

// Makes `stream` (of `device`) wait for what is queued on that device's legacy default stream:
// an operation given no stream follows the caller's earlier default-stream work, as plugin.h's
// NULL says, while the plugin's own streams stay non-blocking (a blocking stream would also make
// every later default-stream call of any thread wait behind an NCCL kernel that waits for a
// peer).
void FollowLegacyStream(int device, cudaStream_t stream, const std::string& what);

// NCCL_COMM_BLOCKING overrides a communicator's blocking mode, which this plugin relies on
// (blocking ncclCommInitAll communicators, non-blocking collective ones with time-outs): throws
// INVALID_ARGUMENT naming it when it is set.
void RequireNoBlockingOverride(const char* what);

}  // namespace chorus::nccl

#endif  // CHORUS_NCCL_NCCL_COMMON_H_
