// ReductionToOneDevice, as tf.distribute defines it: copy every value to one device
// (reduce_to_device, default the first destination's), reduce there, copy the result to every
// destination. Always available; written against the device enumerator's kernels like a plugin.
#include <bit>
#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <memory>
#include <vector>

#include "base/host_all_reduce.h"
#include "builtin/builtin_plugin.h"

struct chorus_cross_device_ops {
  const chorus_device_enumerator_api* api = nullptr;
  chorus_device_context* devices = nullptr;
  uint32_t device_count = 0;      // devices of the enumerator
  int64_t reduce_to_device = -1;  // -1: the first output's device
  const char* (*devices_last_error)(void) = nullptr;
  // The devices are the core's cpu devices, whose memory is the host's: reduces take the fused
  // host path (host_all_reduce.h), which gives the same values with far less memory traffic.
  bool host_memory = false;
};

namespace chorus::internal {
namespace {

using sdk::Fail;
using sdk::Guard;
using sdk::RequireArgs;
using Ops = chorus_cross_device_ops;

void Check(const Ops& ops, chorus_status status, const char* what) {
  if (status == CHORUS_OK) return;
  const char* detail = ops.devices_last_error ? ops.devices_last_error() : nullptr;
  Fail(status, "reduction_to_one_device: ", what,
       " failed: ", detail && *detail ? detail : "(the device enumerator gave no message)");
}

// Memory on one device for the duration of a call.
class Scratch {
 public:
  Scratch(const Ops& ops, uint32_t device, size_t bytes) : ops_(ops), device_(device) {
    Check(ops_, ops_.api->allocate(ops_.devices, device, bytes, &data_), "allocate");
  }
  ~Scratch() { ops_.api->deallocate(ops_.devices, device_, data_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* data() const { return data_; }

 private:
  const Ops& ops_;
  uint32_t device_;
  void* data_ = nullptr;
};

void CopyBytes(const Ops& ops, chorus_buffer dst, chorus_buffer src, size_t bytes,
               chorus_stream* stream) {
  if (bytes == 0 || dst.data == src.data) return;
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

void RequireBuffers(const Ops& ops, const chorus_buffer* buffers, size_t n, bool need_data,
                    const char* what) {
  if (n == 0) Fail(CHORUS_INVALID_ARGUMENT, what, ": no buffers");
  if (buffers == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": buffer array is NULL");
  for (size_t i = 0; i < n; ++i) {
    if (buffers[i].device != CHORUS_HOST_DEVICE && buffers[i].device >= ops.device_count) {
      Fail(CHORUS_INVALID_ARGUMENT, what, "[", i, "]: device ", buffers[i].device,
           " does not exist (the enumerator has ", ops.device_count, ")");
    }
    if (need_data && buffers[i].data == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, what, "[", i, "]: data is NULL");
    }
  }
}

Ops& RequireOps(Ops* ops) {
  if (ops == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "reduction_to_one_device: ops is NULL");
  return *ops;
}

uint32_t TargetDevice(const Ops& ops, const chorus_buffer* outputs) {
  return ops.reduce_to_device >= 0 ? static_cast<uint32_t>(ops.reduce_to_device)
                                   : outputs[0].device;
}

// Checks one reduce's arguments; returns them, or nullptr when there is nothing to do (count 0).
const chorus_reduce_args* CheckReduce(const Ops& ops, const chorus_reduce_args* args) {
  const auto& a = RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_reduce_args, num_outputs),
                              "reduction_to_one_device reduce");
  sdk::RequireDtype(a.dtype, "reduction_to_one_device reduce");
  sdk::RequireReduceOp(a.op, "reduction_to_one_device reduce");
  RequireBuffers(ops, a.inputs, a.num_inputs, a.count > 0, "reduce inputs");
  RequireBuffers(ops, a.outputs, a.num_outputs, a.count > 0, "reduce outputs");
  if (a.count == 0) return nullptr;
  const size_t bytes = a.count * chorus_dtype_size(a.dtype);
  if (bytes / chorus_dtype_size(a.dtype) != a.count) {
    Fail(CHORUS_INVALID_ARGUMENT, "reduce: count ", a.count, " overflows");
  }
  return &a;
}

HostReduce ToHostReduce(const chorus_reduce_args& a) {
  HostReduce r;
  for (size_t i = 0; i < a.num_inputs; ++i) r.inputs.push_back(a.inputs[i].data);
  for (size_t i = 0; i < a.num_outputs; ++i) r.outputs.push_back(a.outputs[i].data);
  r.count = a.count;
  r.dtype = a.dtype;
  r.op = a.op;
  return r;
}

// tf.distribute's recipe through the enumerator's kernels: copy to the target, reduce pairwise,
// copy back. The inputs are summed in the pairwise tree of the host path (HostAllReduce),
// ((in0 + in1) + (in2 + in3)) + ..., so that every device kind gives the same bits: partial sums
// of consecutive runs of inputs kept as a binary counter, a partial d (when not an input already
// on the target) in sums[d], an input from another device staged in staged[d] while it waits on
// the stack and in `incoming` when it is summed at once. `a` has passed CheckReduce.
void ReduceThroughKernels(const Ops& ops, const chorus_reduce_args& a, chorus_stream* stream) {
  const size_t bytes = a.count * chorus_dtype_size(a.dtype);
  const uint32_t target = TargetDevice(ops, a.outputs);
  const size_t levels = static_cast<size_t>(std::bit_width(a.num_inputs));
  std::vector<std::unique_ptr<Scratch>> sums(levels), staged(levels);
  std::unique_ptr<Scratch> incoming;
  auto on_target = [&](std::unique_ptr<Scratch>& scratch) {
    if (scratch == nullptr) scratch = std::make_unique<Scratch>(ops, target, bytes);
    return scratch->data();
  };
  auto reduce = [&](void* dst, const void* x, const void* y) {
    chorus_reduce_kernel_args reduce{};
    reduce.struct_size = sizeof(reduce);
    reduce.device = target;
    reduce.dst = dst;
    reduce.a = x;
    reduce.b = y;
    reduce.count = a.count;
    reduce.dtype = a.dtype;
    reduce.op = a.op;
    reduce.stream = stream;
    Check(ops, ops.api->reduce(ops.devices, &reduce), "reduce kernel");
  };
  struct Partial {
    const void* data;
    unsigned level;  // 2^level inputs summed
  };
  std::vector<Partial> stack;
  for (size_t i = 0; i < a.num_inputs; ++i) {
    Partial current{a.inputs[i].data, 0};
    if (a.inputs[i].device != target) {
      const bool summed_at_once = !stack.empty() && stack.back().level == 0;
      void* where = summed_at_once ? on_target(incoming) : on_target(staged[stack.size()]);
      CopyBytes(ops, chorus_buffer{target, where}, a.inputs[i], bytes, stream);
      current.data = where;
    }
    while (!stack.empty() && stack.back().level == current.level) {
      void* into = on_target(sums[stack.size() - 1]);
      reduce(into, stack.back().data, current.data);
      stack.pop_back();
      current = {into, current.level + 1};
    }
    stack.push_back(current);
  }
  // What is left, from the last (smallest) run back to the first.
  Partial sum = stack.back();
  stack.pop_back();
  while (!stack.empty()) {
    void* into = on_target(sums[stack.size() - 1]);
    reduce(into, stack.back().data, sum.data);
    stack.pop_back();
    sum = {into, 0};
  }
  const chorus_buffer total{target, const_cast<void*>(sum.data)};
  for (size_t i = 0; i < a.num_outputs; ++i) CopyBytes(ops, a.outputs[i], total, bytes, stream);
}

// The reduces of one batch (or a single reduce): all in one fused host pass when the memory is
// the host's, else one by one through the kernels.
void ReduceAll(const Ops& ops, const std::vector<const chorus_reduce_args*>& reduces,
               chorus_stream* stream) {
  std::vector<const chorus_reduce_args*> checked;
  for (const chorus_reduce_args* r : reduces) {
    if (const chorus_reduce_args* a = CheckReduce(ops, r)) checked.push_back(a);
  }
  if (ops.host_memory && stream == nullptr) {
    std::vector<HostReduce> batch;
    batch.reserve(checked.size());
    for (const chorus_reduce_args* a : checked) batch.push_back(ToHostReduce(*a));
    HostAllReduce(batch);
    return;
  }
  for (const chorus_reduce_args* a : checked) ReduceThroughKernels(ops, *a, stream);
}

chorus_status Create(const chorus_cross_device_ops_create_args* args,
                     chorus_cross_device_ops** out) {
  return Guard([&] {
    if (out == nullptr)
      Fail(CHORUS_INVALID_ARGUMENT, "reduction_to_one_device create: out is NULL");
    *out = nullptr;
    const auto& a =
        RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_cross_device_ops_create_args, num_options),
                    "reduction_to_one_device create");
    if (a.devices_api == nullptr || a.devices == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "reduction_to_one_device create: no device enumerator");
    }
    if (a.num_devices == 0 || a.device_indices == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "reduction_to_one_device create: needs at least one device");
    }
    if (a.devices_api->copy == nullptr || a.devices_api->reduce == nullptr ||
        a.devices_api->allocate == nullptr || a.devices_api->deallocate == nullptr ||
        a.devices_api->device_count == nullptr) {
      Fail(CHORUS_UNSUPPORTED, "reduction_to_one_device: the '", a.devices_api->platform,
           "' enumerator lacks allocate, copy or reduce kernels");
    }
    auto ops = std::make_unique<Ops>();
    ops->api = a.devices_api;
    ops->devices = a.devices;
    // The loader hands out a copy of each table, so compare a kernel, not the table's address.
    ops->host_memory = a.devices_api->reduce == CpuDeviceEnumeratorTable()->reduce;
    if (CHORUS_HAS_FIELD(&a, chorus_cross_device_ops_create_args, devices_last_error)) {
      ops->devices_last_error = a.devices_last_error;
    }
    Check(*ops, a.devices_api->device_count(a.devices, &ops->device_count), "device_count");
    for (size_t i = 0; i < a.num_devices; ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (a.device_indices[j] == a.device_indices[i]) {
          Fail(CHORUS_INVALID_ARGUMENT, "reduction_to_one_device create: device ",
               a.device_indices[i], " is listed twice; give each replica its own device");
        }
      }
      if (a.device_indices[i] >= ops->device_count) {
        Fail(CHORUS_INVALID_ARGUMENT, "reduction_to_one_device create: device ",
             a.device_indices[i], " does not exist (the enumerator has ", ops->device_count, ")");
      }
    }
    if (sdk::FindOption(a.options, a.num_options, "reduce_to_device")) {
      const uint64_t device = sdk::IntegerOption(a.options, a.num_options, "reduce_to_device", 0);
      if (device >= ops->device_count) {
        Fail(CHORUS_INVALID_ARGUMENT, "reduction_to_one_device: reduce_to_device=", device,
             " does not exist (the enumerator has ", ops->device_count, " devices)");
      }
      ops->reduce_to_device = static_cast<int64_t>(device);
    }
    *out = ops.release();
  });
}

void Destroy(chorus_cross_device_ops* ops) { delete ops; }

chorus_status Reduce(chorus_cross_device_ops* ops, const chorus_reduce_args* args,
                     chorus_request** request) {
  return Guard([&] {
    if (request == nullptr)
      Fail(CHORUS_INVALID_ARGUMENT, "reduction_to_one_device: request is NULL");
    *request = nullptr;
    const Ops& o = RequireOps(ops);
    ReduceAll(o, {args}, args ? args->stream : nullptr);
  });
}

chorus_status BatchReduce(chorus_cross_device_ops* ops, const chorus_batch_reduce_args* args,
                          chorus_request** request) {
  return Guard([&] {
    if (request == nullptr)
      Fail(CHORUS_INVALID_ARGUMENT, "reduction_to_one_device: request is NULL");
    *request = nullptr;
    const Ops& o = RequireOps(ops);
    const auto& a = RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_batch_reduce_args, num_reduces),
                                "reduction_to_one_device batch_reduce");
    if (a.num_reduces > 0 && a.reduces == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "batch_reduce: reduces is NULL");
    }
    ReduceAll(o, std::vector<const chorus_reduce_args*>(a.reduces, a.reduces + a.num_reduces),
              a.stream);
  });
}

chorus_status Broadcast(chorus_cross_device_ops* ops, const chorus_broadcast_args* args,
                        chorus_request** request) {
  return Guard([&] {
    if (request == nullptr)
      Fail(CHORUS_INVALID_ARGUMENT, "reduction_to_one_device: request is NULL");
    *request = nullptr;
    const Ops& o = RequireOps(ops);
    const auto& a = RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_broadcast_args, num_outputs),
                                "reduction_to_one_device broadcast");
    sdk::RequireDtype(a.dtype, "broadcast");
    RequireBuffers(o, &a.source, 1, a.count > 0, "broadcast source");
    RequireBuffers(o, a.outputs, a.num_outputs, a.count > 0, "broadcast outputs");
    const size_t bytes = a.count * chorus_dtype_size(a.dtype);
    for (size_t i = 0; i < a.num_outputs; ++i)
      CopyBytes(o, a.outputs[i], a.source, bytes, a.stream);
  });
}

chorus_status AllGather(chorus_cross_device_ops* ops, const chorus_all_gather_args* args,
                        chorus_request** request) {
  return Guard([&] {
    if (request == nullptr)
      Fail(CHORUS_INVALID_ARGUMENT, "reduction_to_one_device: request is NULL");
    *request = nullptr;
    const Ops& o = RequireOps(ops);
    const auto& a = RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_all_gather_args, num_outputs),
                                "reduction_to_one_device all_gather");
    sdk::RequireDtype(a.dtype, "all_gather");
    if (a.num_inputs > 0 && a.counts == nullptr)
      Fail(CHORUS_INVALID_ARGUMENT, "all_gather: counts is NULL");
    size_t total = 0;
    for (size_t i = 0; i < a.num_inputs; ++i) total += a.counts[i];
    RequireBuffers(o, a.inputs, a.num_inputs, false, "all_gather inputs");
    RequireBuffers(o, a.outputs, a.num_outputs, total > 0, "all_gather outputs");
    const size_t element = chorus_dtype_size(a.dtype);
    for (size_t i = 0; i < a.num_inputs; ++i) {
      if (a.counts[i] > 0 && a.inputs[i].data == nullptr) {
        Fail(CHORUS_INVALID_ARGUMENT, "all_gather inputs[", i, "]: data is NULL");
      }
    }
    // Gather on one device, then copy the whole to every output.
    const uint32_t target = TargetDevice(o, a.outputs);
    Scratch gathered(o, target, total * element);
    size_t offset = 0;
    for (size_t i = 0; i < a.num_inputs; ++i) {
      CopyBytes(o, chorus_buffer{target, static_cast<char*>(gathered.data()) + offset * element},
                a.inputs[i], a.counts[i] * element, a.stream);
      offset += a.counts[i];
    }
    for (size_t i = 0; i < a.num_outputs; ++i) {
      CopyBytes(o, a.outputs[i], chorus_buffer{target, gathered.data()}, total * element, a.stream);
    }
  });
}

}  // namespace

// The reference: works on every enumerator's memory, and every other cross-device ops should beat
// it where it is chosen by AUTO (plugin.h's bands).
namespace {
uint32_t ReductionToOneDeviceScore(const chorus_score_args* args) {
  return args->request == CHORUS_REQUEST_AUTO ? 5 : 0;
}
}  // namespace

const chorus_cross_device_ops_api* ReductionToOneDeviceTable() {
  static const chorus_capabilities capabilities = sdk::Capabilities(
      sdk::kAnyMemory, CHORUS_SHAPE_ANY, sdk::kAllCrossDeviceOps, ReductionToOneDeviceScore);
  static const chorus_cross_device_ops_api table = [] {
    chorus_cross_device_ops_api t{};
    t.struct_size = sizeof(t);
    t.name = "reduction_to_one_device";
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

}  // namespace chorus::internal
