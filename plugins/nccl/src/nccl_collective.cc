#include "nccl_collective.h"

#include <atomic>
#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "cuda_devices.h"
#include "nccl_common.h"

struct chorus_communicator {
  int rank = 0;
  int size = 1;
  int device = 0;
  int64_t timeout_ms = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void* barrier_word = nullptr;  // one float on the device, for barrier()
  std::atomic<bool> aborted{false};
  std::atomic<bool> comm_aborted{false};  // NCCL's side is released (ncclCommAbort was called)
  ~chorus_communicator() {
    chorus::nccl::CurrentDeviceScope scope;
    cudaSetDevice(device);
    if (comm != nullptr && !comm_aborted.load()) {
      // ncclCommFinalize flushes what is still queued (also on a caller's stream); a peer that
      // died would make that wait forever, so it is polled with the time-out, and abort(), a
      // failure or the time-out abort the communicator instead of destroying it.
      bool abort = aborted.load();
      if (!abort) {
        ncclResult_t state = ncclCommFinalize(comm);
        const auto deadline = chorus::nccl::DeadlineAfter(timeout_ms);
        while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline &&
               !chorus::sdk::HostAbortRequested()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) state = ncclInternalError;
        }
        abort = state != ncclSuccess;
      }
      abort ? ncclCommAbort(comm) : ncclCommDestroy(comm);
    }
    // After the communicator: cudaFree waits for the device, so no NCCL kernel may be left.
    if (barrier_word != nullptr) cudaFree(barrier_word);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

namespace chorus::nccl {
namespace {

using sdk::Fail;
using sdk::Guard;
using Comm = chorus_communicator;

std::string What(const Comm& c, const char* op) {
  return std::string("nccl ") + op + " (rank " + std::to_string(c.rank) + " of " +
         std::to_string(c.size) + ")";
}

Comm& Require(Comm* comm, chorus_request** request, const char* op) {
  if (request == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "nccl ", op, ": request is NULL");
  *request = nullptr;
  if (comm == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "nccl ", op, ": communicator is NULL");
  if (comm->aborted.load()) {
    // Release NCCL's side once; this also stops work still queued on a caller's stream.
    if (!comm->comm_aborted.exchange(true)) ncclCommAbort(comm->comm);
    Fail(CHORUS_ABORTED, What(*comm, op), ": the communicator was aborted");
  }
  if (comm->comm_aborted.load()) {
    Fail(CHORUS_ABORTED, What(*comm, op),
         ": the communicator was aborted after an earlier "
         "failure, a time-out or abort(); create a new one");
  }
  // Work enqueued on a caller's stream is watched by no wait: its asynchronous errors (a peer
  // that died) surface here, and the abort stops its kernels, which would otherwise spin.
  ncclResult_t async = ncclSuccess;
  if (ncclCommGetAsyncError(comm->comm, &async) != ncclSuccess) async = ncclInternalError;
  if (async != ncclSuccess && async != ncclInProgress) {
    WaitWhileInProgress(async, comm->comm, DeadlineAfter(comm->timeout_ms), comm->timeout_ms,
                        comm->aborted, comm->comm_aborted, What(*comm, op));
  }
  return *comm;
}

// Runs `enqueue` (the NCCL call) on the caller's stream, or on the communicator's own stream and
// waits for it. The communicator is non-blocking, so the call may return before its work is
// enqueued: that is waited out first, also with a caller's stream ("complete" = enqueued).
template <typename Enqueue>
void Run(Comm& c, chorus_stream* caller_stream, const char* op, Enqueue&& enqueue) {
  CheckCudaCall(cudaSetDevice(c.device), What(c, op));
  const auto deadline = DeadlineAfter(c.timeout_ms);  // one time-out for the whole call
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(caller_stream);
  if (caller_stream == nullptr) {
    stream = c.stream;
    FollowLegacyStream(c.device, stream, What(c, op));
  }
  WaitWhileInProgress(enqueue(stream), c.comm, deadline, c.timeout_ms, c.aborted, c.comm_aborted,
                      What(c, op));
  if (caller_stream != nullptr) return;
  try {
    WaitForStreams({c.device}, {stream}, {c.comm}, deadline, c.timeout_ms, c.aborted, What(c, op));
  } catch (...) {
    c.comm_aborted.store(true);
    throw;
  }
}

chorus_status Create(const chorus_communicator_create_args* args, chorus_communicator** out) {
  return Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "nccl create: out is NULL");
    *out = nullptr;
    const auto& a = sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_communicator_create_args, device), "nccl create");
    if (a.size < 1 || a.rank < 0 || a.rank >= a.size) {
      Fail(CHORUS_INVALID_ARGUMENT, "nccl create: rank ", a.rank, " of size ", a.size,
           " is not a rank");
    }
    if (a.store == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "nccl create: store is NULL");
    if (a.timeout_ms <= 0) {
      Fail(CHORUS_INVALID_ARGUMENT, "nccl create: timeout_ms is ", a.timeout_ms,
           "; give a positive time-out (every wait of the communicator is bounded by it)");
    }
    RequireNoBlockingOverride("nccl create");
    RequireCudaDevice("nccl collective");
    if (a.devices_api == nullptr) {
      Fail(CHORUS_UNSUPPORTED,
           "nccl collective: buffers must be CUDA device memory; create the "
           "communicator with the cuda enumerator's device (host memory: use "
           "gloo, shm or core_ring)");
    }
    if (a.devices_api->reduce != CudaDevicesTable()->reduce) {
      Fail(CHORUS_UNSUPPORTED, "nccl collective: the devices are '", a.devices_api->platform,
           "', not this plugin's 'cuda' devices");
    }
    auto comm = std::make_unique<Comm>();
    comm->rank = a.rank;
    comm->size = a.size;
    comm->device = static_cast<int>(a.device);
    comm->timeout_ms = a.timeout_ms;
    const std::string what = What(*comm, "create");
    CurrentDeviceScope scope;
    CheckCudaCall(cudaSetDevice(comm->device), what);
    ncclUniqueId id{};
    if (a.rank == 0) {
      CheckNccl(ncclGetUniqueId(&id), nullptr, what);
      if (a.store->set(a.store->ctx, "nccl_id", &id, sizeof(id)) != CHORUS_OK) {
        Fail(CHORUS_INTERNAL, what, ": could not publish the NCCL unique id in the store");
      }
    } else {
      size_t size = 0;
      const chorus_status status =
          a.store->get(a.store->ctx, "nccl_id", a.timeout_ms, &id, sizeof(id), &size);
      if (status == CHORUS_TIMEOUT) {
        Fail(CHORUS_TIMEOUT, what, ": rank 0 did not publish the NCCL unique id within ",
             a.timeout_ms, " ms");
      }
      if (status != CHORUS_OK || size != sizeof(id)) {
        Fail(CHORUS_INTERNAL, what, ": could not read the NCCL unique id from the store");
      }
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // so that a rank that never arrives is a time-out, not a hang
    ncclResult_t result = ncclCommInitRankConfig(&comm->comm, a.size, id, a.rank, &config);
    const auto deadline = DeadlineAfter(a.timeout_ms);
    while (result == ncclInProgress) {
      const bool abort = sdk::HostAbortRequested();
      if (abort || std::chrono::steady_clock::now() > deadline) {
        ncclCommAbort(comm->comm);
        comm->comm = nullptr;
        if (abort) Fail(CHORUS_ABORTED, what, ": aborted while NCCL was setting up");
        Fail(CHORUS_TIMEOUT, what, ": the NCCL communicator was not ready within ", a.timeout_ms,
             " ms (did every rank create it?)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (ncclCommGetAsyncError(comm->comm, &result) != ncclSuccess) result = ncclInternalError;
    }
    if (result != ncclSuccess) {
      ncclComm_t failed = comm->comm;
      comm->comm = nullptr;
      const char* last = ncclGetLastError(failed);
      const std::string detail = last != nullptr && *last ? std::string(" (") + last + ")" : "";
      if (failed != nullptr) ncclCommAbort(failed);
      CheckNccl(result, nullptr, what + detail);
    }
    // Non-blocking, so that default-stream work of other threads never waits behind an NCCL
    // kernel; operations given no stream follow the default stream explicitly (Run).
    CheckCudaCall(cudaStreamCreateWithFlags(&comm->stream, cudaStreamNonBlocking), what);
    CheckCudaCall(cudaMalloc(&comm->barrier_word, sizeof(float)), what);
    *out = comm.release();
  });
}

void Destroy(chorus_communicator* comm) { delete comm; }

chorus_status AllReduce(chorus_communicator* comm, const chorus_all_reduce_args* args,
                        chorus_request** request) {
  return Guard([&] {
    CurrentDeviceScope scope;
    Comm& c = Require(comm, request, "all_reduce");
    const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_all_reduce_args, stream),
                                     "nccl all_reduce");
    const ncclDataType_t type = NcclType(a.dtype);
    const ncclRedOp_t op = NcclOp(a.op);
    if (a.count > 0 && (a.send == nullptr || a.recv == nullptr)) {
      Fail(CHORUS_INVALID_ARGUMENT, "nccl all_reduce: NULL buffer");
    }
    if (a.count == 0) return;
    Run(c, a.stream, "all_reduce", [&](cudaStream_t s) {
      return ncclAllReduce(a.send, a.recv, a.count, type, op, c.comm, s);
    });
  });
}

chorus_status Broadcast(chorus_communicator* comm, const chorus_collective_broadcast_args* args,
                        chorus_request** request) {
  return Guard([&] {
    CurrentDeviceScope scope;
    Comm& c = Require(comm, request, "broadcast");
    const auto& a = sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_collective_broadcast_args, stream), "nccl broadcast");
    const ncclDataType_t type = NcclType(a.dtype);
    if (a.root < 0 || a.root >= c.size) {
      Fail(CHORUS_INVALID_ARGUMENT, "nccl broadcast: root ", a.root, " is not a rank");
    }
    if (a.count > 0 && a.data == nullptr)
      Fail(CHORUS_INVALID_ARGUMENT, "nccl broadcast: NULL data");
    if (a.count == 0) return;
    Run(c, a.stream, "broadcast", [&](cudaStream_t s) {
      return ncclBroadcast(a.data, a.data, a.count, type, a.root, c.comm, s);
    });
  });
}

chorus_status AllGather(chorus_communicator* comm, const chorus_collective_all_gather_args* args,
                        chorus_request** request) {
  return Guard([&] {
    CurrentDeviceScope scope;
    Comm& c = Require(comm, request, "all_gather");
    const auto& a = sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_collective_all_gather_args, stream), "nccl all_gather");
    const ncclDataType_t type = NcclType(a.dtype);
    if (a.count > 0 && (a.send == nullptr || a.recv == nullptr)) {
      Fail(CHORUS_INVALID_ARGUMENT, "nccl all_gather: NULL buffer");
    }
    if (a.count == 0) return;
    Run(c, a.stream, "all_gather",
        [&](cudaStream_t s) { return ncclAllGather(a.send, a.recv, a.count, type, c.comm, s); });
  });
}

chorus_status ReduceScatter(chorus_communicator* comm, const chorus_reduce_scatter_args* args,
                            chorus_request** request) {
  return Guard([&] {
    CurrentDeviceScope scope;
    Comm& c = Require(comm, request, "reduce_scatter");
    const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_reduce_scatter_args, stream),
                                     "nccl reduce_scatter");
    const ncclDataType_t type = NcclType(a.dtype);
    const ncclRedOp_t op = NcclOp(a.op);
    if (a.recv_count > 0 && (a.send == nullptr || a.recv == nullptr)) {
      Fail(CHORUS_INVALID_ARGUMENT, "nccl reduce_scatter: NULL buffer");
    }
    if (a.recv_count == 0) return;
    Run(c, a.stream, "reduce_scatter", [&](cudaStream_t s) {
      return ncclReduceScatter(a.send, a.recv, a.recv_count, type, op, c.comm, s);
    });
  });
}

chorus_status Barrier(chorus_communicator* comm, chorus_request** request) {
  return Guard([&] {
    CurrentDeviceScope scope;
    Comm& c = Require(comm, request, "barrier");
    Run(c, nullptr, "barrier", [&](cudaStream_t s) {
      return ncclAllReduce(c.barrier_word, c.barrier_word, 1, ncclFloat32, ncclSum, c.comm, s);
    });
  });
}

void Abort(chorus_communicator* comm) {
  if (comm != nullptr) comm->aborted.store(true);
}

}  // namespace

const chorus_collective_api* NcclCollectiveTable() {
  static const chorus_capabilities capabilities =
      sdk::Capabilities(kCudaMemory, CHORUS_SHAPE_ANY, sdk::kAllCollectiveOps, NcclScore);
  static const chorus_collective_api table = [] {
    chorus_collective_api t{};
    t.struct_size = sizeof(t);
    t.name = "nccl";
    t.create = Create;
    t.destroy = Destroy;
    t.all_reduce = AllReduce;
    t.broadcast = Broadcast;
    t.all_gather = AllGather;
    t.reduce_scatter = ReduceScatter;
    t.barrier = Barrier;
    t.abort = Abort;
    t.capabilities = &capabilities;
    return t;
  }();
  return &table;
}

}  // namespace chorus::nccl
