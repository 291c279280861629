#include "nccl_common.h"

#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <thread>

#include "cuda_devices.h"

namespace chorus::nccl {

using sdk::Fail;

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
  if (result == ncclSuccess || result == ncclInProgress) return;
  const char* last = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  const chorus_status status =
      result == ncclRemoteError || result == ncclSystemError        ? CHORUS_PEER_LOST
      : result == ncclInvalidArgument || result == ncclInvalidUsage ? CHORUS_INVALID_ARGUMENT
                                                                    : CHORUS_INTERNAL;
  Fail(status, what, ": NCCL: ", ncclGetErrorString(result),
       last != nullptr && *last ? std::string(" (") + last + ")" : std::string());
}

void CheckCudaCall(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return;
  Fail(error == cudaErrorMemoryAllocation ? CHORUS_OUT_OF_MEMORY : CHORUS_INTERNAL, what,
       ": CUDA: ", cudaGetErrorName(error), ": ", cudaGetErrorString(error));
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
      abort_all();
      CheckNccl(async, nullptr, what);
    }
  }
  if (aborted.load() || HostAbortRequested()) {
    abort_all();
    Fail(CHORUS_ABORTED, what, ": aborted");
  }
}

void WaitForStreams(const std::vector<int>& devices, const std::vector<cudaStream_t>& streams,
                    const std::vector<ncclComm_t>& comms, int64_t timeout_ms,
                    const std::atomic<bool>& aborted, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto abort_all = [&] {
    for (ncclComm_t comm : comms) ncclCommAbort(comm);
  };
  for (size_t i = 0; i < streams.size(); ++i) {
    for (int polls = 0;; ++polls) {
      cudaSetDevice(devices[i]);
      const cudaError_t state = cudaStreamQuery(streams[i]);
      if (state == cudaSuccess) break;
      if (state != cudaErrorNotReady) {
        abort_all();
        CheckCudaCall(state, what);
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

}  // namespace chorus::nccl
