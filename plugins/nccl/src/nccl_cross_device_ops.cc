#include "nccl_cross_device_ops.h"

#include <atomic>
#include <chorus/plugin_sdk.hpp>
#include <memory>
#include <vector>

#include "cuda_devices.h"
#include "nccl_common.h"

struct chorus_cross_device_ops {
  std::vector<int> devices;  // CUDA ordinal of each replica
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::atomic<bool> aborted{false};
  bool comms_aborted = false;  // a failed wait aborted the communicators: they are gone
  ~chorus_cross_device_ops() {
    for (size_t i = 0; i < comms.size(); ++i) {
      if (!comms_aborted) ncclCommDestroy(comms[i]);
      cudaSetDevice(devices[i]);
      cudaStreamDestroy(streams[i]);
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
  return *ops;
}

void RequireNoStream(chorus_stream* stream, const char* what) {
  if (stream != nullptr) {
    Fail(CHORUS_UNSUPPORTED, what,
         ": streams are not supported by the nccl cross-device ops in "
         "this version; pass NULL");
  }
}

// Index of the replica on `device`; throws when none is.
size_t ReplicaOf(const Ops& ops, uint32_t device, const char* what) {
  for (size_t i = 0; i < ops.devices.size(); ++i) {
    if (static_cast<uint32_t>(ops.devices[i]) == device) return i;
  }
  Fail(CHORUS_INVALID_ARGUMENT, what, ": device ", device, " is not one of this op's devices");
}

void Wait(Ops& ops, const char* what) {
  try {
    WaitForStreams(ops.devices, ops.streams, ops.comms, kTimeoutMs, ops.aborted, what);
  } catch (...) {
    ops.comms_aborted = true;
    throw;
  }
}

// Enqueues one reduce: an all-reduce across the replicas' inputs into the output on each
// replica's device (a scratch buffer where a device has no output).
void EnqueueReduce(Ops& ops, const chorus_reduce_args& a,
                   std::vector<std::unique_ptr<void, void (*)(void*)>>& scratch) {
  sdk::RequireDtype(a.dtype, "nccl reduce");
  const ncclRedOp_t op = NcclOp(a.op);
  if (a.num_inputs != ops.devices.size() || a.inputs == nullptr) {
    Fail(CHORUS_UNSUPPORTED, "nccl reduce: needs one input on each of the ", ops.devices.size(),
         " replicas' devices, got ", a.num_inputs);
  }
  if (a.num_outputs == 0 || a.outputs == nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT, "nccl reduce: no outputs");
  }
  if (a.count == 0) return;
  std::vector<void*> recv(ops.devices.size(), nullptr);
  for (size_t o = 0; o < a.num_outputs; ++o) {
    const size_t r = ReplicaOf(ops, a.outputs[o].device, "nccl reduce output");
    if (recv[r] != nullptr) {
      Fail(CHORUS_UNSUPPORTED, "nccl reduce: two outputs on device ", a.outputs[o].device);
    }
    recv[r] = a.outputs[o].data;
  }
  const size_t bytes = a.count * chorus_dtype_size(a.dtype);
  std::vector<const void*> send(ops.devices.size(), nullptr);
  for (size_t i = 0; i < a.num_inputs; ++i) {
    const size_t r = ReplicaOf(ops, a.inputs[i].device, "nccl reduce input");
    send[r] = a.inputs[i].data;
    if (send[r] == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "nccl reduce: input ", i, " is NULL");
  }
  for (size_t r = 0; r < recv.size(); ++r) {
    if (recv[r] != nullptr) continue;
    void* p = nullptr;
    cudaSetDevice(ops.devices[r]);
    CheckCudaCall(cudaMalloc(&p, bytes), "nccl reduce scratch");
    scratch.emplace_back(p, [](void* q) { cudaFree(q); });
    recv[r] = p;
  }
  for (size_t r = 0; r < ops.devices.size(); ++r) {
    CheckNccl(ncclAllReduce(send[r], recv[r], a.count, NcclType(a.dtype), op, ops.comms[r],
                            ops.streams[r]),
              ops.comms[r], "nccl reduce");
  }
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
    auto ops = std::make_unique<Ops>();
    for (size_t i = 0; i < a.num_devices; ++i) {
      ops->devices.push_back(static_cast<int>(a.device_indices[i]));
    }
    ops->comms.resize(a.num_devices);
    CheckNccl(
        ncclCommInitAll(ops->comms.data(), static_cast<int>(a.num_devices), ops->devices.data()),
        nullptr, "nccl create: ncclCommInitAll");
    for (int device : ops->devices) {
      cudaStream_t stream = nullptr;
      CheckCudaCall(cudaSetDevice(device), "nccl create");
      CheckCudaCall(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "nccl create");
      ops->streams.push_back(stream);
    }
    *out = ops.release();
  });
}

void Destroy(chorus_cross_device_ops* ops) { delete ops; }

chorus_status Reduce(chorus_cross_device_ops* ops, const chorus_reduce_args* args,
                     chorus_request** request) {
  return Guard([&] {
    Ops& o = Require(ops, request, "nccl reduce");
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_reduce_args, num_outputs), "nccl reduce");
    if (CHORUS_HAS_FIELD(&a, chorus_reduce_args, stream)) RequireNoStream(a.stream, "nccl reduce");
    std::vector<std::unique_ptr<void, void (*)(void*)>> scratch;
    CheckNccl(ncclGroupStart(), nullptr, "nccl reduce");
    try {
      EnqueueReduce(o, a, scratch);
    } catch (...) {
      ncclGroupEnd();
      throw;
    }
    CheckNccl(ncclGroupEnd(), nullptr, "nccl reduce");
    Wait(o, "nccl reduce");
  });
}

chorus_status BatchReduce(chorus_cross_device_ops* ops, const chorus_batch_reduce_args* args,
                          chorus_request** request) {
  return Guard([&] {
    Ops& o = Require(ops, request, "nccl batch_reduce");
    const auto& a = sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_batch_reduce_args, num_reduces), "nccl batch_reduce");
    if (CHORUS_HAS_FIELD(&a, chorus_batch_reduce_args, stream)) {
      RequireNoStream(a.stream, "nccl batch_reduce");
    }
    if (a.num_reduces > 0 && a.reduces == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "nccl batch_reduce: reduces is NULL");
    }
    std::vector<std::unique_ptr<void, void (*)(void*)>> scratch;
    CheckNccl(ncclGroupStart(), nullptr, "nccl batch_reduce");
    try {
      for (size_t i = 0; i < a.num_reduces; ++i) {
        const auto& r = sdk::RequireArgs(
            a.reduces[i], CHORUS_STRUCT_SIZE(chorus_reduce_args, num_outputs), "nccl batch_reduce");
        EnqueueReduce(o, r, scratch);
      }
    } catch (...) {
      ncclGroupEnd();
      throw;
    }
    CheckNccl(ncclGroupEnd(), nullptr, "nccl batch_reduce");
    Wait(o, "nccl batch_reduce");
  });
}

chorus_status Broadcast(chorus_cross_device_ops* ops, const chorus_broadcast_args* args,
                        chorus_request** request) {
  return Guard([&] {
    Ops& o = Require(ops, request, "nccl broadcast");
    const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_broadcast_args, num_outputs),
                                     "nccl broadcast");
    if (CHORUS_HAS_FIELD(&a, chorus_broadcast_args, stream)) {
      RequireNoStream(a.stream, "nccl broadcast");
    }
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
    CheckNccl(ncclGroupStart(), nullptr, "nccl broadcast");
    for (size_t r = 0; r < o.devices.size(); ++r) {
      const void* send = r == root ? a.source.data : data[r];
      ncclBroadcast(send, data[r], a.count, NcclType(a.dtype), static_cast<int>(root), o.comms[r],
                    o.streams[r]);
    }
    CheckNccl(ncclGroupEnd(), nullptr, "nccl broadcast");
    Wait(o, "nccl broadcast");
  });
}

chorus_status AllGather(chorus_cross_device_ops* ops, const chorus_all_gather_args* args,
                        chorus_request** request) {
  return Guard([&] {
    Ops& o = Require(ops, request, "nccl all_gather");
    const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_all_gather_args, num_outputs),
                                     "nccl all_gather");
    if (CHORUS_HAS_FIELD(&a, chorus_all_gather_args, stream)) {
      RequireNoStream(a.stream, "nccl all_gather");
    }
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
    CheckNccl(ncclGroupStart(), nullptr, "nccl all_gather");
    for (size_t i = 0; i < a.num_inputs; ++i) {
      const size_t r = ReplicaOf(o, a.inputs[i].device, "nccl all_gather input");
      if (r != i) {
        Fail(CHORUS_UNSUPPORTED, "nccl all_gather: input ", i, " is on replica ", r,
             "'s device; NCCL gathers in replica order, so give the inputs in that order");
      }
      void* out = nullptr;
      for (size_t k = 0; k < a.num_outputs; ++k) {
        if (a.outputs[k].device == a.inputs[i].device) out = a.outputs[k].data;
      }
      ncclAllGather(a.inputs[i].data, out, a.counts[0], NcclType(a.dtype), o.comms[r],
                    o.streams[r]);
    }
    CheckNccl(ncclGroupEnd(), nullptr, "nccl all_gather");
    Wait(o, "nccl all_gather");
  });
}

}  // namespace

const chorus_cross_device_ops_api* NcclCrossDeviceOpsTable() {
  static const chorus_cross_device_ops_api table = {
      .struct_size = sizeof(chorus_cross_device_ops_api),
      .name = "nccl",
      .create = Create,
      .destroy = Destroy,
      .reduce = Reduce,
      .batch_reduce = BatchReduce,
      .broadcast = Broadcast,
      .all_gather = AllGather,
  };
  return &table;
}

}  // namespace chorus::nccl
