// template_plugin.cc: a complete chorus plugin in one file, for vendors to copy.
//
// It provides one interface, cross-device ops named "template_reduce", written only against the
// device enumerator the core hands it (allocate, copy, reduce kernels). So it runs on any
// platform, cpu included, and passes chorus-conformance as it is. Replace the bodies of
// Reduce/Broadcast/AllGather with your fast path; keep the argument checks.
//
// Rename it: chorus_add_plugin(NAME ...) in CMakeLists.txt, the plugin's name in sdk::PluginTable
// below (it must match the file name libchorus-<name>.so) and the interface's name
// ("template_reduce", what CHORUS_CROSS_DEVICE_OPS=<name> selects). Run the kit on it:
//   chorus-conformance --plugin build/libchorus-template.so --require
//
// The rules it follows (plugin.h has them all):
//  - one exported symbol, chorus_plugin_get(); everything else has hidden visibility;
//  - every function catches everything (sdk::Guard) and returns a chorus_status, with a message
//    for last_error() on failure;
//  - struct_size is checked before any field is read (sdk::RequireArgs);
//  - MEAN never reaches a plugin: the core turns it into SUM and a divide.
#include <chorus/plugin.h>

#include <chorus/plugin_sdk.hpp>  // optional C++ helpers: Guard, Fail, RequireArgs, ...
#include <memory>
#include <string>

using chorus::sdk::Fail;
using chorus::sdk::Guard;
using chorus::sdk::Log;  // the host's logger, kept by sdk::SetHost from init to shutdown
using chorus::sdk::RequireArgs;

// The context behind a chorus_cross_device_ops* handle: what create was given. Immutable after
// create, so one context may be used from several threads at once.
struct chorus_cross_device_ops {
  const chorus_device_enumerator_api* api = nullptr;  // the enumerator's kernels (borrowed)
  chorus_device_context* devices = nullptr;           // its context (borrowed)
  uint32_t device_count = 0;                          // devices in that context
  const char* (*devices_last_error)(void) = nullptr;  // to quote the enumerator's messages
};

namespace {

using Ops = chorus_cross_device_ops;

// ---- Argument checks: the caller's mistakes become CHORUS_INVALID_ARGUMENT ------------------

const Ops& RequireOps(const Ops* ops) {
  if (ops == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "template_reduce: ops handle is NULL");
  return *ops;
}

// `n` buffers (n > 0) on devices that exist, with data unless `bytes` is 0.
void RequireBuffers(const Ops& ops, const chorus_buffer* buffers, size_t n, size_t bytes,
                    const char* what) {
  if (n == 0) Fail(CHORUS_INVALID_ARGUMENT, what, ": at least one buffer is needed");
  if (buffers == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": the buffer array is NULL");
  for (size_t i = 0; i < n; ++i) {
    const uint32_t device = buffers[i].device;
    if (device != CHORUS_HOST_DEVICE && device >= ops.device_count) {
      Fail(CHORUS_INVALID_ARGUMENT, what, "[", i, "]: device ", device, " does not exist (",
           ops.device_count, " devices)");
    }
    if (bytes > 0 && buffers[i].data == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, what, "[", i, "]: data is NULL");
    }
  }
}

// count elements of dtype in bytes, refusing an overflow.
size_t Bytes(size_t count, chorus_dtype dtype) {
  const size_t element = chorus_dtype_size(dtype);
  if (element != 0 && count > SIZE_MAX / element) {
    Fail(CHORUS_INVALID_ARGUMENT, "template_reduce: count ", count, " is too large");
  }
  return count * element;
}

const chorus_reduce_args& CheckReduce(const Ops& ops, const chorus_reduce_args* args) {
  const auto& a =
      RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_reduce_args, stream), "template_reduce reduce");
  chorus::sdk::RequireDtype(a.dtype, "template_reduce reduce");
  chorus::sdk::RequireReduceOp(a.op, "template_reduce reduce");  // MEAN -> UNSUPPORTED
  const size_t bytes = Bytes(a.count, a.dtype);
  RequireBuffers(ops, a.inputs, a.num_inputs, bytes, "reduce inputs");
  RequireBuffers(ops, a.outputs, a.num_outputs, bytes, "reduce outputs");
  return a;
}

// ---- Device work, through the enumerator's kernels -------------------------------------------

// A failed kernel: quote the enumerator's own message.
void Check(const Ops& ops, chorus_status status, const char* what) {
  if (status == CHORUS_OK) return;
  const char* detail = ops.devices_last_error ? ops.devices_last_error() : "";
  Fail(status, "template_reduce: ", what, " failed: ", detail);
}

void Copy(const Ops& ops, chorus_buffer dst, chorus_buffer src, size_t bytes,
          chorus_stream* stream) {
  if (bytes == 0 || (dst.device == src.device && dst.data == src.data)) return;
  chorus_copy_args copy{};
  copy.struct_size = sizeof(copy);
  copy.dst_device = dst.device;
  copy.dst = dst.data;
  copy.src_device = src.device;
  copy.src = src.data;
  copy.bytes = bytes;
  copy.stream = stream;
  Check(ops, ops.api->copy(ops.devices, &copy), "copy");
}

// Device memory for the length of one call.
class Scratch {
 public:
  Scratch(const Ops& ops, uint32_t device, size_t bytes) : ops_(ops), device_(device) {
    if (bytes > 0) Check(ops, ops.api->allocate(ops.devices, device, bytes, &data_), "allocate");
  }
  ~Scratch() {
    if (data_ != nullptr) ops_.api->deallocate(ops_.devices, device_, data_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  chorus_buffer buffer() const { return {device_, data_}; }

 private:
  const Ops& ops_;
  uint32_t device_;
  void* data_ = nullptr;
};

// Reduce every input into a scratch buffer on the first output's device, then copy the result
// to every output. Outputs may be the inputs (an all-reduce in place): the scratch keeps the
// inputs intact until the result is complete.
void RunReduce(const Ops& ops, const chorus_reduce_args& a, chorus_stream* stream) {
  const size_t bytes = Bytes(a.count, a.dtype);
  if (bytes == 0) return;
  const uint32_t target = a.outputs[0].device;
  Scratch total(ops, target, bytes), incoming(ops, target, a.num_inputs > 1 ? bytes : 0);
  Copy(ops, total.buffer(), a.inputs[0], bytes, stream);
  for (size_t i = 1; i < a.num_inputs; ++i) {
    chorus_buffer operand = a.inputs[i];
    if (operand.device != target) {  // bring it to the target device first
      Copy(ops, incoming.buffer(), operand, bytes, stream);
      operand = incoming.buffer();
    }
    chorus_reduce_kernel_args reduce{};
    reduce.struct_size = sizeof(reduce);
    reduce.device = target;
    reduce.dst = total.buffer().data;
    reduce.a = total.buffer().data;
    reduce.b = operand.data;
    reduce.count = a.count;
    reduce.dtype = a.dtype;
    reduce.op = a.op;
    reduce.stream = stream;
    Check(ops, ops.api->reduce(ops.devices, &reduce), "reduce kernel");
  }
  for (size_t i = 0; i < a.num_outputs; ++i) Copy(ops, a.outputs[i], total.buffer(), bytes, stream);
  // With a stream the kernels are only enqueued, and the scratch is freed on return: wait.
  if (stream != nullptr) Check(ops, ops.api->synchronize(ops.devices, target, stream), "sync");
}

// ---- The cross-device ops table ---------------------------------------------------------------

// This plugin finishes every operation before returning: *request is always NULL.
void NoRequest(chorus_request** request) {
  if (request != nullptr) *request = nullptr;
}

chorus_status Create(const chorus_cross_device_ops_create_args* args, Ops** out) {
  return Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "template_reduce create: out is NULL");
    *out = nullptr;
    const auto& a = RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_cross_device_ops_create_args, devices_last_error),
        "template_reduce create");
    const chorus_device_enumerator_api* api = a.devices_api;
    if (api == nullptr || a.devices == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "template_reduce create: no device enumerator given");
    }
    if (api->struct_size < CHORUS_STRUCT_SIZE(chorus_device_enumerator_api, synchronize) ||
        !api->device_count || !api->allocate || !api->deallocate || !api->copy || !api->reduce ||
        !api->synchronize) {
      Fail(CHORUS_UNSUPPORTED, "template_reduce: the '", api->platform ? api->platform : "?",
           "' enumerator lacks the allocate, copy, reduce or synchronize kernels it needs");
    }
    if (a.num_devices == 0 || a.device_indices == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "template_reduce create: no devices given");
    }
    auto ops = std::make_unique<Ops>();
    ops->api = api;
    ops->devices = a.devices;
    ops->devices_last_error = a.devices_last_error;
    Check(*ops, api->device_count(a.devices, &ops->device_count), "device_count");
    for (size_t i = 0; i < a.num_devices; ++i) {
      if (a.device_indices[i] >= ops->device_count) {
        Fail(CHORUS_INVALID_ARGUMENT, "template_reduce create: device ", a.device_indices[i],
             " does not exist (", ops->device_count, " devices)");
      }
    }
    Log(CHORUS_LOG_DEBUG, "template_reduce over " + std::to_string(a.num_devices) + " devices");
    *out = ops.release();
  });
}

void Destroy(Ops* ops) { delete ops; }

chorus_status Reduce(Ops* ops, const chorus_reduce_args* args, chorus_request** request) {
  return Guard([&] {
    NoRequest(request);
    const Ops& o = RequireOps(ops);
    const auto& a = CheckReduce(o, args);
    RunReduce(o, a, a.stream);
  });
}

chorus_status BatchReduce(Ops* ops, const chorus_batch_reduce_args* args,
                          chorus_request** request) {
  return Guard([&] {
    NoRequest(request);
    const Ops& o = RequireOps(ops);
    const auto& a = RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_batch_reduce_args, stream),
                                "template_reduce batch_reduce");
    if (a.num_reduces > 0 && a.reduces == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "template_reduce batch_reduce: reduces is NULL");
    }
    // Check every member before running any, so a bad one leaves no output half written.
    for (size_t i = 0; i < a.num_reduces; ++i) CheckReduce(o, a.reduces[i]);
    for (size_t i = 0; i < a.num_reduces; ++i) RunReduce(o, *a.reduces[i], a.stream);
  });
}

chorus_status Broadcast(Ops* ops, const chorus_broadcast_args* args, chorus_request** request) {
  return Guard([&] {
    NoRequest(request);
    const Ops& o = RequireOps(ops);
    const auto& a = RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_broadcast_args, stream),
                                "template_reduce broadcast");
    chorus::sdk::RequireDtype(a.dtype, "template_reduce broadcast");
    const size_t bytes = Bytes(a.count, a.dtype);
    RequireBuffers(o, &a.source, 1, bytes, "broadcast source");
    RequireBuffers(o, a.outputs, a.num_outputs, bytes, "broadcast outputs");
    for (size_t i = 0; i < a.num_outputs; ++i) Copy(o, a.outputs[i], a.source, bytes, a.stream);
  });
}

chorus_status AllGather(Ops* ops, const chorus_all_gather_args* args, chorus_request** request) {
  return Guard([&] {
    NoRequest(request);
    const Ops& o = RequireOps(ops);
    const auto& a = RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_all_gather_args, stream),
                                "template_reduce all_gather");
    chorus::sdk::RequireDtype(a.dtype, "template_reduce all_gather");
    if (a.counts == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "all_gather: counts is NULL");
    RequireBuffers(o, a.inputs, a.num_inputs, 0, "all_gather inputs");
    size_t total = 0;
    for (size_t i = 0; i < a.num_inputs; ++i) {
      const size_t bytes = Bytes(a.counts[i], a.dtype);
      if (bytes > 0 && a.inputs[i].data == nullptr) {
        Fail(CHORUS_INVALID_ARGUMENT, "all_gather inputs[", i, "]: data is NULL");
      }
      total += bytes;
    }
    RequireBuffers(o, a.outputs, a.num_outputs, total, "all_gather outputs");
    // Input i goes to every output at the offset of the inputs before it.
    for (size_t k = 0; k < a.num_outputs; ++k) {
      size_t offset = 0;
      for (size_t i = 0; i < a.num_inputs; ++i) {
        const size_t bytes = Bytes(a.counts[i], a.dtype);
        const chorus_buffer dst{a.outputs[k].device,
                                static_cast<char*>(a.outputs[k].data) + offset};
        Copy(o, dst, a.inputs[i], bytes, a.stream);
        offset += bytes;
      }
    }
  });
}

// ---- What it serves, and how well (ABI 1.1) ----------------------------------------------------
// AUTO gives each operation to the highest score declared for it (plugin.h's bands, sdk/README.md
// section 5: 1-9 works everywhere, where the core's reference reduction_to_one_device scores 5;
// 10-49 general purpose and faster; 50-89 specialists; 90-100 a vendor's library on its own
// hardware). This template is no faster than the reference, so it scores 1: AUTO never picks it,
// and only a name selects it (CHORUS_CROSS_DEVICE_OPS=template_reduce); chorus-conformance and
// chorus-info say so. Raise it only where chorus-bench measured it faster on your hardware. The
// SDK's out-of-tree test builds it with -DTEMPLATE_SCORE=90 and checks that AUTO then picks it
// with no variable set.
#ifndef TEMPLATE_SCORE
#define TEMPLATE_SCORE 1
#endif

uint32_t Score(const chorus_score_args* args) {
  // Not NVIDIA's NCCL, nor a ring: only AUTO may pick it.
  return args->request == CHORUS_REQUEST_AUTO ? TEMPLATE_SCORE : 0;
}

// Any enumerator's memory (it works through the enumerator's kernels), every local operation.
const chorus_capabilities kCapabilities = chorus::sdk::Capabilities(
    chorus::sdk::kAnyMemory, CHORUS_SHAPE_ANY, chorus::sdk::kAllCrossDeviceOps, Score);

// ---- The plugin table -------------------------------------------------------------------------

const chorus_cross_device_ops_api kCrossDeviceOps = [] {
  chorus_cross_device_ops_api t{};
  t.struct_size = sizeof(t);
  t.name = "template_reduce";  // what CHORUS_CROSS_DEVICE_OPS=template_reduce selects
  t.create = Create;
  t.destroy = Destroy;
  t.reduce = Reduce;
  t.batch_reduce = BatchReduce;
  t.broadcast = Broadcast;
  t.all_gather = AllGather;
  t.capabilities = &kCapabilities;
  return t;
}();

// sdk::PluginTable fills the life cycle every plugin shares: init checks the host (its ABI
// major) and keeps it for sdk::Log; shutdown forgets it; last_error is the SDK's; and the request
// functions say that this plugin hands out none (every operation completes before it returns).
const chorus_plugin kPlugin = [] {
  chorus_plugin t = chorus::sdk::PluginTable(
      "template",  // must match the file name: libchorus-template.so
      "1.1.0", "SDK template: cross-device ops over any device enumerator's kernels");
  t.cross_device_ops = &kCrossDeviceOps;  // the interfaces it does not provide stay NULL
  return t;
}();

}  // namespace

// The one exported symbol. Cheap and free of side effects: the core calls it to list plugins.
extern "C" CHORUS_PLUGIN_EXPORT const chorus_plugin* chorus_plugin_get(const chorus_host*) {
  return &kPlugin;
}
