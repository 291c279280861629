#include "hierarchical_all_reduce.h"

#include <chorus/plugin_sdk.hpp>
#include <string>

#include "host_memory_all_reduce.h"
#include "roots.h"

namespace chorus::hierarchical {
namespace {

enum Slot : int { kAccumulator = 0, kIncoming = 1 };

// Where a device sits among the replica devices; devices.size() if it is not one of them.
size_t PositionOf(std::span<const uint32_t> devices, uint32_t device) {
  size_t k = 0;
  while (k < devices.size() && devices[k] != device) ++k;
  return k;
}

}  // namespace

void HierarchicalAllReduce(const DeviceApi& api, ScratchCache& scratch,
                           std::span<const uint32_t> devices, std::span<const void* const> inputs,
                           std::span<const chorus_buffer> outputs, const ReduceShape& shape,
                           size_t root_index, chorus_stream* stream) {
  if (shape.count == 0) return;
  const size_t bytes = shape.count * chorus_dtype_size(shape.dtype);
  const size_t n = devices.size();
  if (n == 1) {
    for (const chorus_buffer& out : outputs) {
      api.Copy(out.device, out.data, devices[0], inputs[0], bytes, stream);
    }
    return;
  }

  const Roots roots = ChooseRoots(n, root_index);
  const uint32_t device_a = devices[roots.root_a];
  const uint32_t device_b = devices[roots.root_b];
  if (sdk::LogEnabled(CHORUS_LOG_DEBUG)) {
    sdk::Log(CHORUS_LOG_DEBUG, "hierarchical_copy: all-reduce #" + std::to_string(root_index) +
                                   " of " + std::to_string(shape.count) + " elements over " +
                                   std::to_string(n) + " devices, roots " + DeviceName(device_a) +
                                   " and " + DeviceName(device_b));
  }
  if (CanFuseOnHost(api, inputs, outputs, bytes, stream)) {
    return HostMemoryAllReduce(api, devices, inputs, outputs, shape, root_index);
  }
  char* accumulator_a = scratch.Get(device_a, kAccumulator, bytes);
  char* incoming_a = scratch.Get(device_a, kIncoming, bytes);
  char* accumulator_b = scratch.Get(device_b, kAccumulator, bytes);
  char* incoming_b = n - roots.half > 1 ? scratch.Get(device_b, kIncoming, bytes) : nullptr;

  // Reduces positions [begin, end) onto `root`; returns where the sum is (the root's own input
  // when the half has one device).
  const auto reduce_half = [&](size_t begin, size_t end, size_t root, char* accumulator,
                               char* incoming) -> const void* {
    const void* sum = inputs[root];
    for (size_t k = begin; k < end; ++k) {
      if (k == root) continue;
      api.Copy(devices[root], incoming, devices[k], inputs[k], bytes, stream);
      api.Reduce(devices[root], accumulator, sum, incoming, shape.count, shape.dtype, shape.op,
                 stream);
      sum = accumulator;
    }
    return sum;
  };
  const void* sum_a = reduce_half(0, roots.half, roots.root_a, accumulator_a, incoming_a);
  const void* sum_b = reduce_half(roots.half, n, roots.root_b, accumulator_b, incoming_b);

  api.Copy(device_a, incoming_a, device_b, sum_b, bytes, stream);
  api.Reduce(device_a, accumulator_a, sum_a, incoming_a, shape.count, shape.dtype, shape.op,
             stream);
  api.Copy(device_b, accumulator_b, device_a, accumulator_a, bytes, stream);

  for (const chorus_buffer& out : outputs) {
    const size_t k = PositionOf(devices, out.device);
    if (k < n && k >= roots.half) {
      api.Copy(out.device, out.data, device_b, accumulator_b, bytes, stream);
    } else {
      api.Copy(out.device, out.data, device_a, accumulator_a, bytes, stream);
    }
  }
}

void ReduceToOneDevice(const DeviceApi& api, ScratchCache& scratch, uint32_t target,
                       std::span<const chorus_buffer> inputs,
                       std::span<const chorus_buffer> outputs, const ReduceShape& shape,
                       chorus_stream* stream) {
  if (shape.count == 0) return;
  const size_t bytes = shape.count * chorus_dtype_size(shape.dtype);
  char* accumulator = scratch.Get(target, kAccumulator, bytes);
  char* incoming = inputs.size() > 1 ? scratch.Get(target, kIncoming, bytes) : nullptr;
  api.Copy(target, accumulator, inputs[0].device, inputs[0].data, bytes, stream);
  for (size_t i = 1; i < inputs.size(); ++i) {
    const void* operand = inputs[i].data;
    if (inputs[i].device != target) {
      api.Copy(target, incoming, inputs[i].device, inputs[i].data, bytes, stream);
      operand = incoming;
    }
    api.Reduce(target, accumulator, accumulator, operand, shape.count, shape.dtype, shape.op,
               stream);
  }
  for (const chorus_buffer& out : outputs) {
    api.Copy(out.device, out.data, target, accumulator, bytes, stream);
  }
}

}  // namespace chorus::hierarchical
