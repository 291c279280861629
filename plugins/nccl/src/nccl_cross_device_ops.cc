#include "nccl_cross_device_ops.h"

#include <atomic>
#include <chorus/plugin_sdk.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cuda_devices.h"
#include "nccl_common.h"

struct chorus_cross_device_ops {
  std::vector<int> devices;  // CUDA ordinal of each replica
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;  // the ops' own stream on each replica's device
  std::atomic<bool> aborted{false};
  bool comms_aborted = false;  // a failure aborted the communicators: they are gone
  ~chorus_cross_device_ops() {
    chorus::nccl::CurrentDeviceScope scope;
    // Work still queued (a request given up after the caller's time-out) would make
    // ncclCommDestroy wait for it: abort the communicators instead.
    bool busy = false;
    for (size_t i = 0; i < streams.size(); ++i) {
      cudaSetDevice(devices[i]);
      if (cudaStreamQuery(streams[i]) != cudaSuccess) busy = true;
    }
    (void)cudaGetLastError();  // cudaErrorNotReady above is no error of the caller's
    for (ncclComm_t comm : comms) {
      if (comm != nullptr && !comms_aborted) busy ? ncclCommAbort(comm) : ncclCommDestroy(comm);
    }
    for (size_t i = 0; i < streams.size(); ++i) {
      cudaSetDevice(devices[i]);
      cudaStreamDestroy(streams[i]);
    }
  }
};

// A request of the nccl cross-device ops (operations given a NULL stream): one CUDA event per
// replica device, recorded on the ops' stream of that device after the operation's NCCL calls.
struct chorus_request {
  chorus_cross_device_ops* ops = nullptr;          // borrowed: only test and wait read it, not free
  std::string what;                                // "nccl reduce", for messages
  std::vector<int> devices;                        // a copy of ops->devices, for the destructor
  std::vector<cudaEvent_t> events;                 // owned; events[i] is on devices[i]
  std::chrono::steady_clock::time_point deadline;  // the ops' own limit; then it is aborted
  bool finished = false;
  chorus_status status = CHORUS_OK;  // once finished
  std::string message;               // once finished with an error
  ~chorus_request() {
    chorus::nccl::CurrentDeviceScope scope;
    for (size_t i = 0; i < events.size(); ++i) {
      cudaSetDevice(devices[i]);
      cudaEventDestroy(events[i]);
    }
  }
};

namespace chorus::nccl {
namespace {

using sdk::Fail;
using sdk::Guard;
using Ops = chorus_cross_device_ops;
constexpr int64_t kTimeoutMs = 300000;  // the core waits with its own time-out around this

Ops& Require(Ops* ops, chorus_request** request, const char* what) {
  if (request == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": request is NULL");
  *request = nullptr;
  if (ops == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": ops is NULL");
  if (ops->comms_aborted) {
    Fail(CHORUS_ABORTED, what,
         ": an earlier operation failed and aborted the NCCL communicators; "
         "create the cross-device ops again");
  }
  // Work enqueued on a caller's stream is watched by no one: its asynchronous errors surface here.
  try {
    CheckAsyncErrorsAndAbort(ops->comms, ops->aborted, what);
  } catch (...) {
    ops->comms_aborted = true;
    throw;
  }
  return *ops;
}

// The caller's stream of an argument struct that has the field (NULL: none).
template <typename Args>
cudaStream_t CallerStream(const Args& a) {
  return CHORUS_HAS_FIELD(&a, Args, stream) ? reinterpret_cast<cudaStream_t>(a.stream) : nullptr;
}

cudaEvent_t RecordEvent(int device, cudaStream_t stream, const char* what) {
  CheckCudaCall(cudaSetDevice(device), what);
  cudaEvent_t event = nullptr;
  CheckCudaCall(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), what);
  const cudaError_t recorded = cudaEventRecord(event, stream);
  if (recorded != cudaSuccess) cudaEventDestroy(event);
  CheckCudaCall(recorded, what);
  return event;
}

// Before an operation's NCCL calls: the ops' stream of every device waits for what the caller
// queued before the call, on its stream or (NULL) on each device's legacy default stream.
void JoinCallerStream(Ops& ops, cudaStream_t caller, const char* what) {
  if (caller == nullptr) {
    for (size_t r = 0; r < ops.devices.size(); ++r) {
      FollowLegacyStream(ops.devices[r], ops.streams[r], what);
    }
    return;
  }
  int caller_device = 0;
  CheckCudaCall(cudaStreamGetDevice(caller, &caller_device), what);
  cudaEvent_t ready = RecordEvent(caller_device, caller, what);
  cudaError_t error = cudaSuccess;
  for (size_t r = 0; r < ops.devices.size() && error == cudaSuccess; ++r) {
    cudaSetDevice(ops.devices[r]);
    error = cudaStreamWaitEvent(ops.streams[r], ready, 0);
  }
  cudaEventDestroy(ready);  // released once it has completed
  CheckCudaCall(error, what);
}

// After an operation's NCCL calls were enqueued on the ops' streams. With a caller's stream, the
// caller's stream waits for every device's part and the call returns: it completed in the sense
// of plugin.h ("enqueued in stream order"). With NULL, *request is one event per device.
void CompleteOrThrow(Ops& ops, cudaStream_t caller, const char* what, chorus_request** request) {
  if (caller != nullptr) {
    int caller_device = 0;
    CheckCudaCall(cudaStreamGetDevice(caller, &caller_device), what);
    for (size_t r = 0; r < ops.devices.size(); ++r) {
      cudaEvent_t done = RecordEvent(ops.devices[r], ops.streams[r], what);
      cudaSetDevice(caller_device);
      const cudaError_t error = cudaStreamWaitEvent(caller, done, 0);
      cudaEventDestroy(done);
      CheckCudaCall(error, what);
    }
    return;
  }
  auto pending = std::make_unique<chorus_request>();
  pending->ops = &ops;
  pending->what = what;
  pending->devices = ops.devices;
  pending->deadline = DeadlineAfter(kTimeoutMs);
  for (size_t r = 0; r < ops.devices.size(); ++r) {
    pending->events.push_back(RecordEvent(ops.devices[r], ops.streams[r], what));
  }
  *request = pending.release();
}

void Complete(Ops& ops, cudaStream_t caller, const char* what, chorus_request** request) {
  try {
    CompleteOrThrow(ops, caller, what, request);
  } catch (...) {
    // The operation is enqueued but neither a request nor the caller's stream covers it: wait
    // for it here (or abort it) before failing, so the caller may free its buffers.
    try {
      WaitForStreams(ops.devices, ops.streams, ops.comms, DeadlineAfter(kTimeoutMs), kTimeoutMs,
                     ops.aborted, what);
    } catch (...) {
      ops.comms_aborted = true;
    }
    throw;
  }
}

// Scratch device memory for an operation, allocated and freed in the order of the ops' streams
// (cudaMallocAsync/cudaFreeAsync), so that freeing it never races the NCCL kernels using it.
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    for (const Block& b : blocks_) {
      cudaSetDevice(b.device);
      cudaFreeAsync(b.data, b.stream);
    }
  }
  void* Allocate(int device, cudaStream_t stream, size_t bytes, const char* what) {
    CheckCudaCall(cudaSetDevice(device), what);
    void* data = nullptr;
    CheckCudaCall(cudaMallocAsync(&data, bytes, stream), what);
    blocks_.push_back({device, stream, data});
    return data;
  }

 private:
  struct Block {
    int device;
    cudaStream_t stream;
    void* data;
  };
  std::vector<Block> blocks_;
};

// Index of the replica on `device`; throws when none is.
size_t ReplicaOf(const Ops& ops, uint32_t device, const char* what) {
  for (size_t i = 0; i < ops.devices.size(); ++i) {
    if (static_cast<uint32_t>(ops.devices[i]) == device) return i;
  }
  Fail(CHORUS_INVALID_ARGUMENT, what, ": device ", device, " is not one of this op's devices");
}

// One reduce, checked and with its buffers settled before any NCCL call: an all-reduce across the
// replicas' inputs into the output on each replica's device (a scratch buffer where a device has
// no output). Empty for a count of 0.
struct PlannedReduce {
  std::vector<const void*> send;  // by replica
  std::vector<void*> recv;        // by replica
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
};

PlannedReduce PlanReduce(Ops& ops, const chorus_reduce_args& a, Scratch& scratch) {
  PlannedReduce plan;
  plan.type = NcclType(a.dtype);
  plan.op = NcclOp(a.op);
  if (a.num_inputs != ops.devices.size() || a.inputs == nullptr) {
    Fail(CHORUS_UNSUPPORTED, "nccl reduce: needs one input on each of the ", ops.devices.size(),
         " replicas' devices, got ", a.num_inputs);
  }
  if (a.num_outputs == 0 || a.outputs == nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT, "nccl reduce: no outputs");
  }
  if (a.count == 0) return plan;
  plan.count = a.count;
  plan.recv.assign(ops.devices.size(), nullptr);
  for (size_t o = 0; o < a.num_outputs; ++o) {
    const size_t r = ReplicaOf(ops, a.outputs[o].device, "nccl reduce output");
    if (plan.recv[r] != nullptr) {
      Fail(CHORUS_UNSUPPORTED, "nccl reduce: two outputs on device ", a.outputs[o].device);
    }
    if (a.outputs[o].data == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "nccl reduce: output ", o, " is NULL");
    }
    plan.recv[r] = a.outputs[o].data;
  }
  plan.send.assign(ops.devices.size(), nullptr);
  for (size_t i = 0; i < a.num_inputs; ++i) {
    const size_t r = ReplicaOf(ops, a.inputs[i].device, "nccl reduce input");
    if (plan.send[r] != nullptr) {
      Fail(CHORUS_UNSUPPORTED, "nccl reduce: two inputs on device ", a.inputs[i].device);
    }
    plan.send[r] = a.inputs[i].data;
    if (plan.send[r] == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "nccl reduce: input ", i, " is NULL");
    }
  }
  const size_t bytes = a.count * chorus_dtype_size(a.dtype);
  for (size_t r = 0; r < plan.recv.size(); ++r) {
    if (plan.recv[r] != nullptr) continue;
    plan.recv[r] = scratch.Allocate(ops.devices[r], ops.streams[r], bytes, "nccl reduce scratch");
  }
  return plan;
}

ncclResult_t EnqueueReduce(Ops& ops, const PlannedReduce& plan) {
  for (size_t r = 0; r < plan.send.size(); ++r) {
    const ncclResult_t result = ncclAllReduce(plan.send[r], plan.recv[r], plan.count, plan.type,
                                              plan.op, ops.comms[r], ops.streams[r]);
    if (result != ncclSuccess) return result;
  }
  return ncclSuccess;
}

chorus_status Create(const chorus_cross_device_ops_create_args* args,
                     chorus_cross_device_ops** out) {
  return Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "nccl create: out is NULL");
    *out = nullptr;
    const auto& a = sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_cross_device_ops_create_args, num_options), "nccl create");
    // Bad arguments first (INVALID_ARGUMENT), then devices of another enumerator (UNSUPPORTED),
    // then a machine without GPUs (UNAVAILABLE).
    if (a.devices_api == nullptr || a.devices == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "nccl create: no device enumerator");
    }
    if (a.num_devices == 0 || a.device_indices == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "nccl create: needs at least one device");
    }
    uint32_t available = 0;
    if (a.devices_api->device_count == nullptr ||
        a.devices_api->device_count(a.devices, &available) != CHORUS_OK) {
      Fail(CHORUS_INVALID_ARGUMENT, "nccl create: the enumerator cannot count its devices");
    }
    for (size_t i = 0; i < a.num_devices; ++i) {
      if (a.device_indices[i] >= available) {
        Fail(CHORUS_INVALID_ARGUMENT, "nccl create: device ", a.device_indices[i],
             " does not exist (the enumerator has ", available, ")");
      }
    }
    if (a.devices_api->reduce != CudaDevicesTable()->reduce) {
      Fail(CudaDeviceCount() > 0 ? CHORUS_UNSUPPORTED : CHORUS_UNAVAILABLE,
           "nccl cross-device ops: the devices are '", a.devices_api->platform,
           "' devices, not CUDA devices of this plugin's 'cuda' enumerator",
           CudaDeviceCount() > 0 ? "" : ", and this machine has no CUDA device (",
           CudaDeviceCount() > 0 ? "" : NoDeviceReason(), CudaDeviceCount() > 0 ? "" : ")");
    }
    RequireCudaDevice("nccl cross-device ops");
    for (size_t i = 0; i < a.num_devices; ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (a.device_indices[i] == a.device_indices[j]) {
          Fail(CHORUS_INVALID_ARGUMENT, "nccl create: device ", a.device_indices[i],
               " is given twice; NCCL needs one replica per GPU (use reduction_to_one_device "
               "for several replicas on one GPU)");
        }
      }
    }
    RequireNoBlockingOverride("nccl create");
    CurrentDeviceScope scope;
    auto ops = std::make_unique<Ops>();
    for (size_t i = 0; i < a.num_devices; ++i) {
      ops->devices.push_back(static_cast<int>(a.device_indices[i]));
    }
    ops->comms.resize(a.num_devices);
    const ncclResult_t init =
        ncclCommInitAll(ops->comms.data(), static_cast<int>(a.num_devices), ops->devices.data());
    if (init != ncclSuccess) {
      // NCCL sets each comm before its initialisation runs and does not release it on failure.
      for (ncclComm_t comm : ops->comms) {
        if (comm != nullptr) ncclCommAbort(comm);
      }
      ops->comms.clear();
      CheckNccl(init, nullptr, "nccl create: ncclCommInitAll");
    }
    for (int device : ops->devices) {
      // Non-blocking, so that default-stream work of other threads never waits behind an NCCL
      // kernel; operations given no stream follow the default stream explicitly
      // (JoinCallerStream).
      cudaStream_t stream = nullptr;
      CheckCudaCall(cudaSetDevice(device), "nccl create");
      CheckCudaCall(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "nccl create");
      ops->streams.push_back(stream);
    }
    *out = ops.release();
  });
}

void Destroy(chorus_cross_device_ops* ops) { delete ops; }

// Runs one operation whose arguments are checked and buffers settled: joins the caller's stream,
// enqueues `calls` (only NCCL calls, returning the first failure) as one NCCL group on the ops'
// streams, and completes through the caller's stream or a request. A failure inside the group
// may leave some devices' parts launched and waiting for the others: the communicators are
// aborted then, so nothing hangs or keeps writing the caller's buffers.
template <typename Calls>
void RunGroup(Ops& ops, cudaStream_t caller, const char* what, chorus_request** request,
              Calls&& calls) {
  JoinCallerStream(ops, caller, what);
  CheckNccl(ncclGroupStart(), nullptr, what);
  const ncclResult_t enqueued = calls();
  const ncclResult_t ended = ncclGroupEnd();
  if (enqueued != ncclSuccess || ended != ncclSuccess) {
    const char* last = ncclGetLastError(nullptr);
    const std::string detail = last != nullptr && *last ? std::string(" (") + last + ")" : "";
    for (ncclComm_t comm : ops.comms) ncclCommAbort(comm);
    ops.comms_aborted = true;
    CheckNccl(enqueued != ncclSuccess ? enqueued : ended, nullptr,
              what + detail + "; the NCCL communicators were aborted");
  }
  Complete(ops, caller, what, request);
}

chorus_status Reduce(chorus_cross_device_ops* ops, const chorus_reduce_args* args,
                     chorus_request** request) {
  return Guard([&] {
    CurrentDeviceScope scope;
    Ops& o = Require(ops, request, "nccl reduce");
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_reduce_args, num_outputs), "nccl reduce");
    sdk::RequireDtype(a.dtype, "nccl reduce");
    Scratch scratch;  // freed in stream order after the group
    const PlannedReduce plan = PlanReduce(o, a, scratch);
    if (plan.count == 0) return;
    RunGroup(o, CallerStream(a), "nccl reduce", request, [&] { return EnqueueReduce(o, plan); });
  });
}

chorus_status BatchReduce(chorus_cross_device_ops* ops, const chorus_batch_reduce_args* args,
                          chorus_request** request) {
  return Guard([&] {
    CurrentDeviceScope scope;
    Ops& o = Require(ops, request, "nccl batch_reduce");
    const auto& a = sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_batch_reduce_args, num_reduces), "nccl batch_reduce");
    if (a.num_reduces > 0 && a.reduces == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "nccl batch_reduce: reduces is NULL");
    }
    Scratch scratch;
    std::vector<PlannedReduce> plans;
    for (size_t i = 0; i < a.num_reduces; ++i) {
      const auto& r = sdk::RequireArgs(
          a.reduces[i], CHORUS_STRUCT_SIZE(chorus_reduce_args, num_outputs), "nccl batch_reduce");
      sdk::RequireDtype(r.dtype, "nccl batch_reduce");
      plans.push_back(PlanReduce(o, r, scratch));
      if (plans.back().count == 0) plans.pop_back();
    }
    if (plans.empty()) return;
    // plugin.h: the batch's stream orders the whole batch; the reduces' own are ignored.
    RunGroup(o, CallerStream(a), "nccl batch_reduce", request, [&] {
      for (const PlannedReduce& plan : plans) {
        const ncclResult_t result = EnqueueReduce(o, plan);
        if (result != ncclSuccess) return result;
      }
      return ncclSuccess;
    });
  });
}

chorus_status Broadcast(chorus_cross_device_ops* ops, const chorus_broadcast_args* args,
                        chorus_request** request) {
  return Guard([&] {
    CurrentDeviceScope scope;
    Ops& o = Require(ops, request, "nccl broadcast");
    const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_broadcast_args, num_outputs),
                                     "nccl broadcast");
    sdk::RequireDtype(a.dtype, "nccl broadcast");
    if (a.num_outputs != o.devices.size() || a.outputs == nullptr) {
      Fail(CHORUS_UNSUPPORTED, "nccl broadcast: needs one output on each of the ", o.devices.size(),
           " replicas' devices");
    }
    if (a.count == 0) return;
    const size_t root = ReplicaOf(o, a.source.device, "nccl broadcast source");
    std::vector<void*> data(o.devices.size(), nullptr);
    for (size_t i = 0; i < a.num_outputs; ++i) {
      data[ReplicaOf(o, a.outputs[i].device, "nccl broadcast output")] = a.outputs[i].data;
    }
    for (size_t r = 0; r < data.size(); ++r) {
      if (data[r] == nullptr) {
        Fail(CHORUS_INVALID_ARGUMENT, "nccl broadcast: no output on device ", o.devices[r]);
      }
    }
    if (a.source.data == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "nccl broadcast: source is NULL");
    const ncclDataType_t type = NcclType(a.dtype);
    RunGroup(o, CallerStream(a), "nccl broadcast", request, [&] {
      for (size_t r = 0; r < o.devices.size(); ++r) {
        const void* send = r == root ? a.source.data : data[r];
        const ncclResult_t result = ncclBroadcast(send, data[r], a.count, type,
                                                  static_cast<int>(root), o.comms[r], o.streams[r]);
        if (result != ncclSuccess) return result;
      }
      return ncclSuccess;
    });
  });
}

chorus_status AllGather(chorus_cross_device_ops* ops, const chorus_all_gather_args* args,
                        chorus_request** request) {
  return Guard([&] {
    CurrentDeviceScope scope;
    Ops& o = Require(ops, request, "nccl all_gather");
    const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_all_gather_args, num_outputs),
                                     "nccl all_gather");
    sdk::RequireDtype(a.dtype, "nccl all_gather");
    if (a.num_inputs != o.devices.size() || a.num_outputs != o.devices.size() ||
        a.inputs == nullptr || a.outputs == nullptr || a.counts == nullptr) {
      Fail(CHORUS_UNSUPPORTED, "nccl all_gather: needs one input and one output on each of the ",
           o.devices.size(), " replicas' devices");
    }
    for (size_t i = 1; i < a.num_inputs; ++i) {
      if (a.counts[i] != a.counts[0]) {
        Fail(CHORUS_UNSUPPORTED, "nccl all_gather: inputs of different counts (", a.counts[0],
             " and ", a.counts[i], ") are not supported; use reduction_to_one_device");
      }
    }
    if (a.counts[0] == 0) return;
    std::vector<void*> out(a.num_inputs, nullptr);
    for (size_t i = 0; i < a.num_inputs; ++i) {
      const size_t r = ReplicaOf(o, a.inputs[i].device, "nccl all_gather input");
      if (r != i) {
        Fail(CHORUS_UNSUPPORTED, "nccl all_gather: input ", i, " is on replica ", r,
             "'s device; NCCL gathers in replica order, so give the inputs in that order");
      }
      for (size_t k = 0; k < a.num_outputs; ++k) {
        if (a.outputs[k].device == a.inputs[i].device) out[i] = a.outputs[k].data;
      }
      if (out[i] == nullptr) {
        Fail(CHORUS_UNSUPPORTED, "nccl all_gather: no output on device ", a.inputs[i].device);
      }
    }
    const ncclDataType_t type = NcclType(a.dtype);
    RunGroup(o, CallerStream(a), "nccl all_gather", request, [&] {
      for (size_t i = 0; i < a.num_inputs; ++i) {
        const ncclResult_t result =
            ncclAllGather(a.inputs[i].data, out[i], a.counts[0], type, o.comms[i], o.streams[i]);
        if (result != ncclSuccess) return result;
      }
      return ncclSuccess;
    });
  });
}

// ---- requests --------------------------------------------------------------------------------

// One look at a request; true once it has finished (r.status says how). A failure or the ops'
// own time-out aborts the communicators, so nothing keeps writing the caller's buffers.
bool Poll(chorus_request& r) {
  if (r.finished) return true;
  Ops& ops = *r.ops;
  auto abort_all = [&] {
    if (!ops.comms_aborted) {
      for (ncclComm_t comm : ops.comms) ncclCommAbort(comm);
    }
    ops.comms_aborted = true;
  };
  try {
    if (ops.comms_aborted) {
      Fail(CHORUS_ABORTED, r.what, ": the NCCL communicators were aborted by an earlier failure");
    }
    bool done = true;
    for (size_t i = 0; i < r.events.size() && done; ++i) {
      cudaSetDevice(r.devices[i]);
      try {
        done = QueryFinished(cudaEventQuery(r.events[i]), r.what);
      } catch (...) {
        abort_all();
        throw;
      }
    }
    if (done) {
      r.finished = true;
      return true;
    }
    try {
      CheckAsyncErrorsAndAbort(ops.comms, ops.aborted, r.what);
    } catch (...) {
      ops.comms_aborted = true;
      throw;
    }
    if (std::chrono::steady_clock::now() > r.deadline) {
      abort_all();
      Fail(CHORUS_TIMEOUT, r.what, ": timed out after ", kTimeoutMs,
           " ms; the NCCL communicators were aborted");
    }
    return false;
  } catch (const sdk::Error& e) {
    r.finished = true;
    r.status = e.status();
    r.message = e.what();
    return true;
  }
}

// A finished request's failure, as the error its request_test / request_wait reports.
void ThrowIfFailed(const chorus_request& r) {
  if (r.status != CHORUS_OK) throw sdk::Error(r.status, r.message);
}

}  // namespace

chorus_status CrossDeviceOpsRequestTest(chorus_request* request, int* done) {
  return Guard([&] {
    if (request == nullptr || done == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "nccl request_test: request or done is NULL");
    }
    CurrentDeviceScope scope;
    *done = Poll(*request) ? 1 : 0;
    if (*done) ThrowIfFailed(*request);
  });
}

chorus_status CrossDeviceOpsRequestWait(chorus_request* request, int64_t timeout_ms) {
  return Guard([&] {
    if (request == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "nccl request_wait: request is NULL");
    CurrentDeviceScope scope;
    const auto deadline = DeadlineAfter(timeout_ms);
    for (int polls = 0;; ++polls) {
      if (Poll(*request)) return ThrowIfFailed(*request);
      if (timeout_ms >= 0 && std::chrono::steady_clock::now() > deadline) {
        Fail(CHORUS_TIMEOUT, request->what, ": not finished within ", timeout_ms,
             " ms; it is still running (wait again, or free it and destroy the cross-device ops "
             "to abort it)");
      }
      if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
}

void CrossDeviceOpsRequestFree(chorus_request* request) { delete request; }

const chorus_cross_device_ops_api* NcclCrossDeviceOpsTable() {
  static const chorus_capabilities capabilities =
      sdk::Capabilities(kCudaMemory, CHORUS_SHAPE_ANY, sdk::kAllCrossDeviceOps, NcclScore);
  static const chorus_cross_device_ops_api table = [] {
    chorus_cross_device_ops_api t{};
    t.struct_size = sizeof(t);
    t.name = "nccl";
    t.create = Create;
    t.destroy = Destroy;
    t.reduce = Reduce;
    t.batch_reduce = BatchReduce;
    t.broadcast = Broadcast;
    t.all_gather = AllGather;
    t.capabilities = &capabilities;
    return t;
  }();
  return &table;
}

}  // namespace chorus::nccl
