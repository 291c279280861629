#include "nccl_common.h"

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "cuda_devices.h"

namespace chorus::nccl {

using sdk::Fail;

uint32_t NcclScore(const chorus_score_args* args) {
  return args->request == CHORUS_REQUEST_RING ? 0 : 90;
}

ncclDataType_t NcclType(chorus_dtype dtype) {
  switch (dtype) {
    case CHORUS_F32:
      return ncclFloat32;
    case CHORUS_F64:
      return ncclFloat64;
    case CHORUS_F16:
      return ncclFloat16;
    case CHORUS_BF16:
      return ncclBfloat16;
    case CHORUS_I32:
      return ncclInt32;
    case CHORUS_I64:
      return ncclInt64;
    case CHORUS_U8:
      return ncclUint8;
    case CHORUS_I8:
      return ncclInt8;
    default:
      Fail(CHORUS_INVALID_ARGUMENT, "nccl: unknown dtype ", static_cast<int>(dtype));
  }
}

ncclRedOp_t NcclOp(chorus_reduce_op op) {
  sdk::RequireReduceOp(op, "nccl");
  switch (op) {
    case CHORUS_REDUCE_SUM:
      return ncclSum;
    case CHORUS_REDUCE_PROD:
      return ncclProd;
    case CHORUS_REDUCE_MIN:
      return ncclMin;
    default:
      return ncclMax;
  }
}

void CheckNccl(ncclResult_t result, ncclComm_t comm, const std::string& what) {
  if (result == ncclSuccess) return;
  const char* last = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  const chorus_status status = result == ncclRemoteError ? CHORUS_PEER_LOST
                               : result == ncclInvalidArgument || result == ncclInvalidUsage
                                   ? CHORUS_INVALID_ARGUMENT
                                   : CHORUS_INTERNAL;
  Fail(status, what, ": NCCL: ", ncclGetErrorString(result),
       last != nullptr && *last ? std::string(" (") + last + ")" : std::string());
}

void CheckCudaCall(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return;
  Fail(error == cudaErrorMemoryAllocation ? CHORUS_OUT_OF_MEMORY : CHORUS_INTERNAL, what,
       ": CUDA: ", cudaGetErrorName(error), ": ", cudaGetErrorString(error));
}

bool QueryFinished(cudaError_t state, const std::string& what) {
  if (state == cudaSuccess) return true;
  if (state == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  CheckCudaCall(state, what);
  return false;
}

std::chrono::steady_clock::time_point DeadlineAfter(int64_t timeout_ms) {
  const int64_t clamped = std::max<int64_t>(0, std::min<int64_t>(timeout_ms, INT64_C(1) << 40));
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(clamped);
}

void RequireCudaDevice(const char* what) {
  if (CudaDeviceCount() > 0) return;
  Fail(CHORUS_UNAVAILABLE, what, ": no CUDA device on this machine (", NoDeviceReason(),
       "); use a CPU backend (reduction_to_one_device, gloo, shm)");
}

void CheckAsyncErrorsAndAbort(const std::vector<ncclComm_t>& comms,
                              const std::atomic<bool>& aborted, const std::string& what) {
  auto abort_all = [&] {
    for (ncclComm_t comm : comms) ncclCommAbort(comm);
  };
  for (ncclComm_t comm : comms) {
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      const char* last = ncclGetLastError(comm);  // before the abort releases it
      const std::string detail = last != nullptr && *last ? std::string(" (") + last + ")" : "";
      abort_all();
      CheckNccl(async, nullptr, what + detail);
    }
  }
  if (aborted.load() || sdk::HostAbortRequested()) {
    abort_all();
    Fail(CHORUS_ABORTED, what, ": aborted");
  }
}

void WaitWhileInProgress(ncclResult_t result, ncclComm_t comm,
                         std::chrono::steady_clock::time_point deadline, int64_t timeout_ms,
                         const std::atomic<bool>& aborted, std::atomic<bool>& comm_aborted,
                         const std::string& what) {
  auto abort = [&] {
    if (!comm_aborted.exchange(true)) ncclCommAbort(comm);
  };
  for (int polls = 0; result == ncclInProgress; ++polls) {
    if (aborted.load() || sdk::HostAbortRequested()) {
      abort();
      Fail(CHORUS_ABORTED, what, ": aborted");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      abort();
      Fail(CHORUS_TIMEOUT, what, ": NCCL was still setting up after ", timeout_ms,
           " ms (is every rank issuing the same operations?); the communicator was aborted");
    }
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (ncclCommGetAsyncError(comm, &result) != ncclSuccess) result = ncclInternalError;
  }
  if (result != ncclSuccess) {
    // NCCL's message first: the abort releases the communicator.
    const char* last = ncclGetLastError(comm);
    const std::string detail = last != nullptr && *last ? std::string(" (") + last + ")" : "";
    abort();
    CheckNccl(result, nullptr, what + detail);
  }
}

void WaitForStreams(const std::vector<int>& devices, const std::vector<cudaStream_t>& streams,
                    const std::vector<ncclComm_t>& comms,
                    std::chrono::steady_clock::time_point deadline, int64_t timeout_ms,
                    const std::atomic<bool>& aborted, const std::string& what) {
  auto abort_all = [&] {
    for (ncclComm_t comm : comms) ncclCommAbort(comm);
  };
  for (size_t i = 0; i < streams.size(); ++i) {
    for (int polls = 0;; ++polls) {
      cudaSetDevice(devices[i]);
      try {
        if (QueryFinished(cudaStreamQuery(streams[i]), what)) break;
      } catch (...) {
        abort_all();
        throw;
      }
      CheckAsyncErrorsAndAbort(comms, aborted, what);
      if (std::chrono::steady_clock::now() > deadline) {
        abort_all();
        Fail(CHORUS_TIMEOUT, what, ": timed out after ", timeout_ms,
             " ms (is every rank issuing the same operations?); the NCCL communicators were "
             "aborted");
      }
      if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void FollowLegacyStream(int device, cudaStream_t stream, const std::string& what) {
  CheckCudaCall(cudaSetDevice(device), what);
  cudaEvent_t queued = nullptr;
  CheckCudaCall(cudaEventCreateWithFlags(&queued, cudaEventDisableTiming), what);
  cudaError_t error = cudaEventRecord(queued, cudaStreamLegacy);
  if (error == cudaSuccess) error = cudaStreamWaitEvent(stream, queued, 0);
  cudaEventDestroy(queued);  // released once it has completed
  CheckCudaCall(error, what);
}

void RequireNoBlockingOverride(const char* what) {
  if (std::getenv("NCCL_COMM_BLOCKING") == nullptr) return;
  Fail(CHORUS_INVALID_ARGUMENT, what,
       ": NCCL_COMM_BLOCKING is set; unset it. The nccl plugin chooses each communicator's "
       "blocking mode itself (non-blocking for the collective, so that its time-outs hold)");
}

}  // namespace chorus::nccl
