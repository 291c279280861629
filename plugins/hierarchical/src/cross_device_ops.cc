#include "cross_device_ops.h"

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "packing.h"

namespace chorus::hierarchical {
namespace {

using sdk::Fail;

constexpr std::string_view kNumPacks = "num_packs";

const char* (*DevicesLastError(const chorus_cross_device_ops_create_args& args))(void) {
  return CHORUS_HAS_FIELD(&args, chorus_cross_device_ops_create_args, devices_last_error)
             ? args.devices_last_error
             : nullptr;
}

// count elements of dtype in bytes, or an error when that overflows size_t.
size_t Bytes(size_t count, chorus_dtype dtype, const std::string& what) {
  const size_t element = chorus_dtype_size(dtype);
  if (count > SIZE_MAX / element) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": ", count, " elements of ", element,
         " bytes overflow size_t");
  }
  return count * element;
}

// Enum fields are read as raw int32 first: a C caller may store any int32 (a value from a newer
// minor, or garbage), and loading one outside the enum's range as the enum type is undefined
// behaviour in C++ (plugin.h's *_MAX_ENUM only covers 0..INT32_MAX).
template <typename Enum>
int32_t RawValue(const Enum& field) {
  static_assert(sizeof(Enum) == sizeof(int32_t));
  int32_t raw;
  std::memcpy(&raw, &field, sizeof raw);
  return raw;
}

chorus_dtype CheckedDtype(const chorus_dtype& field, const std::string& what) {
  const int32_t raw = RawValue(field);
  if (raw < 0 || raw >= CHORUS_DTYPE_COUNT) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": unknown dtype ", raw);
  }
  const auto dtype = static_cast<chorus_dtype>(raw);
  sdk::RequireDtype(dtype, what.c_str());
  return dtype;
}

chorus_reduce_op CheckedReduceOp(const chorus_reduce_op& field, const std::string& what) {
  const int32_t raw = RawValue(field);
  if (raw < 0 || raw >= CHORUS_REDUCE_OP_COUNT) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": unknown reduce op ", raw);
  }
  const auto op = static_cast<chorus_reduce_op>(raw);
  sdk::RequireReduceOp(op, what.c_str());
  return op;
}

bool Overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  if (a_bytes == 0 || b_bytes == 0) return false;
  const auto a_begin = reinterpret_cast<uintptr_t>(a);
  const auto b_begin = reinterpret_cast<uintptr_t>(b);
  return a_begin < b_begin + b_bytes && b_begin < a_begin + a_bytes;
}

}  // namespace

HierarchicalCopy::HierarchicalCopy(const chorus_cross_device_ops_create_args& args)
    : api_(args.devices_api, args.devices, DevicesLastError(args)) {
  if (args.num_devices == 0) {
    Fail(CHORUS_INVALID_ARGUMENT,
         "hierarchical_copy create: needs at least one device (num_devices is 0)");
  }
  if (args.device_indices == nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT, "hierarchical_copy create: device_indices is NULL");
  }
  if (args.num_options > 0 && args.options == nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT, "hierarchical_copy create: options is NULL but num_options is ",
         args.num_options);
  }
  for (size_t i = 0; i < args.num_options; ++i) {
    if (args.options[i].key == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "hierarchical_copy create: options[", i, "].key is NULL");
    }
    if (args.options[i].key != kNumPacks) {
      Fail(CHORUS_INVALID_ARGUMENT, "hierarchical_copy create: unknown option '",
           args.options[i].key, "' (known: ", kNumPacks, ")");
    }
  }
  try {
    num_packs_ = sdk::IntegerOption(args.options, args.num_options, kNumPacks, 1);
  } catch (const sdk::Error& e) {
    Fail(e.status(), "hierarchical_copy create: ", e.what());
  }

  device_count_ = api_.DeviceCount();
  devices_.assign(args.device_indices, args.device_indices + args.num_devices);
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i] >= device_count_) {
      Fail(CHORUS_INVALID_ARGUMENT, "hierarchical_copy create: device_indices[", i,
           "] = ", devices_[i], " does not exist (the enumerator has ", device_count_, " devices)");
    }
    for (size_t j = 0; j < i; ++j) {
      if (devices_[j] == devices_[i]) {
        Fail(CHORUS_INVALID_ARGUMENT, "hierarchical_copy create: device ", devices_[i],
             " appears twice in device_indices (at ", j, " and ", i, ")");
      }
    }
  }
}

// ---- checks ------------------------------------------------------------------------------

void HierarchicalCopy::CheckDevice(uint32_t device, const std::string& what) const {
  if (device != CHORUS_HOST_DEVICE && device >= device_count_) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": device ", device, " does not exist (the enumerator has ",
         device_count_, " devices)");
  }
}

std::span<const chorus_buffer> HierarchicalCopy::CheckBuffers(const chorus_buffer* buffers,
                                                              size_t n, bool need_data,
                                                              const std::string& what) const {
  if (n == 0) Fail(CHORUS_INVALID_ARGUMENT, what, ": none given (the count is 0)");
  if (buffers == nullptr) Fail(CHORUS_INVALID_ARGUMENT, what, ": the buffer array is NULL");
  for (size_t i = 0; i < n; ++i) {
    if (buffers[i].device != CHORUS_HOST_DEVICE && buffers[i].device >= device_count_) {
      CheckDevice(buffers[i].device, what + "[" + std::to_string(i) + "]");
    }
    if (need_data && buffers[i].data == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, what, "[", i, "]: data is NULL");
    }
  }
  return {buffers, n};
}

void HierarchicalCopy::CheckStream(chorus_stream* stream, const char* what) const {
  if (stream != nullptr && !api_.CanSynchronize()) {
    Fail(CHORUS_UNSUPPORTED, what,
         ": a stream was given but the device enumerator has no synchronize, so the operation "
         "could not complete before returning; pass a NULL stream");
  }
}

HierarchicalCopy::ReduceView HierarchicalCopy::CheckReduce(const chorus_reduce_args* args,
                                                           size_t needed,
                                                           const std::string& what) const {
  const auto& a = sdk::RequireArgs(args, needed, what.c_str());
  const chorus_dtype dtype = CheckedDtype(a.dtype, what);
  const chorus_reduce_op op = CheckedReduceOp(a.op, what);
  Bytes(a.count, dtype, what);
  ReduceView view;
  view.shape = ReduceShape{a.count, dtype, op};
  view.inputs = CheckBuffers(a.inputs, a.num_inputs, a.count > 0, what + " inputs");
  view.outputs = CheckBuffers(a.outputs, a.num_outputs, a.count > 0, what + " outputs");
  return view;
}

// ---- placement ---------------------------------------------------------------------------

bool HierarchicalCopy::IsPerDevice(std::span<const chorus_buffer> inputs) const {
  if (inputs.size() != devices_.size()) return false;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].device != devices_[k]) return false;
  }
  return true;
}

std::optional<size_t> HierarchicalCopy::PositionOf(uint32_t device) const {
  const auto it = std::find(devices_.begin(), devices_.end(), device);
  if (it == devices_.end()) return std::nullopt;
  return static_cast<size_t>(it - devices_.begin());
}

uint32_t HierarchicalCopy::TargetDevice(std::span<const chorus_buffer> outputs,
                                        std::span<const chorus_buffer> inputs) const {
  for (const chorus_buffer& b : outputs) {
    if (b.device != CHORUS_HOST_DEVICE) return b.device;
  }
  for (const chorus_buffer& b : inputs) {
    if (b.device != CHORUS_HOST_DEVICE) return b.device;
  }
  return devices_.front();
}

void HierarchicalCopy::Finish(chorus_stream* stream, std::span<const chorus_buffer> outputs) const {
  if (stream == nullptr) return;
  std::vector<uint32_t> devices = devices_;
  for (const chorus_buffer& out : outputs) {
    if (out.device != CHORUS_HOST_DEVICE &&
        std::find(devices.begin(), devices.end(), out.device) == devices.end()) {
      devices.push_back(out.device);
    }
  }
  for (uint32_t device : devices) api_.Synchronize(device, stream);
}

// ---- operations --------------------------------------------------------------------------

void HierarchicalCopy::ReduceOne(const ReduceView& reduce, ScratchCache& scratch, size_t root_index,
                                 chorus_stream* stream) const {
  if (reduce.shape.count == 0) return;
  if (IsPerDevice(reduce.inputs)) {
    std::vector<const void*> inputs;
    inputs.reserve(reduce.inputs.size());
    for (const chorus_buffer& in : reduce.inputs) inputs.push_back(in.data);
    HierarchicalAllReduce(api_, scratch, devices_, inputs, reduce.outputs, reduce.shape, root_index,
                          stream);
  } else {
    ReduceToOneDevice(api_, scratch, TargetDevice(reduce.outputs, reduce.inputs), reduce.inputs,
                      reduce.outputs, reduce.shape, stream);
  }
}

size_t HierarchicalCopy::ReducePacked(std::span<const ReduceView> reduces,
                                      std::span<const size_t> group, ScratchCache& scratch,
                                      size_t root_index, chorus_stream* stream) const {
  const ReduceShape& first = reduces[group.front()].shape;
  std::vector<size_t> counts;
  counts.reserve(group.size());
  for (size_t r : group) counts.push_back(reduces[r].shape.count);
  const std::optional<FlatLayout> layout = PlanLayout(counts);
  if (!layout) {
    Fail(CHORUS_INVALID_ARGUMENT,
         "hierarchical_copy batch_reduce: the packed element count overflows");
  }
  if (layout->total == 0) return 0;
  const size_t element = chorus_dtype_size(first.dtype);
  const size_t total_bytes = Bytes(layout->total, first.dtype, "hierarchical_copy batch_reduce");
  const size_t n = devices_.size();

  std::vector<ScratchBuffer> flats;
  flats.reserve(n);
  for (size_t k = 0; k < n; ++k) flats.emplace_back(api_, devices_[k], total_bytes, stream);
  for (size_t j = 0; j < group.size(); ++j) {
    const ReduceView& reduce = reduces[group[j]];
    for (size_t k = 0; k < n; ++k) {
      api_.Copy(devices_[k], flats[k].bytes_data() + layout->offsets[j] * element,
                reduce.inputs[k].device, reduce.inputs[k].data, counts[j] * element, stream);
    }
  }

  const std::vector<Pack> packs = PlanPacks(layout->total, num_packs_);
  std::vector<const void*> pack_inputs(n);
  std::vector<chorus_buffer> pack_outputs(n);
  for (size_t p = 0; p < packs.size(); ++p) {
    for (size_t k = 0; k < n; ++k) {
      char* data = flats[k].bytes_data() + packs[p].offset * element;
      pack_inputs[k] = data;
      pack_outputs[k] = chorus_buffer{devices_[k], data};
    }
    HierarchicalAllReduce(api_, scratch, devices_, pack_inputs, pack_outputs,
                          ReduceShape{packs[p].count, first.dtype, first.op}, root_index + p,
                          stream);
  }

  for (size_t j = 0; j < group.size(); ++j) {
    for (const chorus_buffer& out : reduces[group[j]].outputs) {
      const size_t k = PositionOf(out.device).value_or(0);
      api_.Copy(out.device, out.data, devices_[k],
                flats[k].bytes_data() + layout->offsets[j] * element, counts[j] * element, stream);
    }
  }
  return packs.size();
}

void HierarchicalCopy::Reduce(const chorus_reduce_args* args) const {
  const ReduceView reduce =
      CheckReduce(args, CHORUS_STRUCT_SIZE(chorus_reduce_args, stream), "hierarchical_copy reduce");
  CheckStream(args->stream, "hierarchical_copy reduce");
  if (reduce.shape.count == 0) return;
  ScratchCache scratch(api_, args->stream);
  ReduceOne(reduce, scratch, 0, args->stream);
  Finish(args->stream, reduce.outputs);
}

void HierarchicalCopy::BatchReduce(const chorus_batch_reduce_args* args) const {
  const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_batch_reduce_args, stream),
                                   "hierarchical_copy batch_reduce");
  if (a.num_reduces > 0 && a.reduces == nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT,
         "hierarchical_copy batch_reduce: reduces is NULL but num_reduces is ", a.num_reduces);
  }
  // Every reduce is checked before anything moves, so a bad one leaves every buffer as it was.
  std::vector<ReduceView> reduces;
  reduces.reserve(a.num_reduces);
  std::vector<std::optional<PackKey>> keys;
  keys.reserve(a.num_reduces);
  for (size_t i = 0; i < a.num_reduces; ++i) {
    // Each reduce's own stream field is not read: the batch's stream orders the whole batch.
    reduces.push_back(
        CheckReduce(a.reduces[i], CHORUS_STRUCT_SIZE(chorus_reduce_args, num_outputs),
                    "hierarchical_copy batch_reduce reduces[" + std::to_string(i) + "]"));
    const ReduceView& reduce = reduces.back();
    // With one device the all-reduce is a copy: concatenating first would only add copies.
    if (num_packs_ > 0 && devices_.size() > 1 && IsPerDevice(reduce.inputs)) {
      keys.push_back(
          PackKey{static_cast<int>(reduce.shape.dtype), static_cast<int>(reduce.shape.op)});
    } else {
      keys.push_back(std::nullopt);
    }
  }
  CheckStream(a.stream, "hierarchical_copy batch_reduce");

  ScratchCache scratch(api_, a.stream);
  size_t root_index = 0;  // round-robin over every all-reduce of the batch
  for (const std::vector<size_t>& group : GroupByKey(keys)) {
    if (keys[group.front()]) {
      root_index += ReducePacked(reduces, group, scratch, root_index, a.stream);
    } else {
      ReduceOne(reduces[group.front()], scratch, root_index++, a.stream);
    }
  }

  if (a.stream != nullptr) {
    std::vector<chorus_buffer> outputs;
    for (const ReduceView& reduce : reduces) {
      outputs.insert(outputs.end(), reduce.outputs.begin(), reduce.outputs.end());
    }
    Finish(a.stream, outputs);
  }
}

void HierarchicalCopy::Broadcast(const chorus_broadcast_args* args) const {
  const char* what = "hierarchical_copy broadcast";
  const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_broadcast_args, stream), what);
  const chorus_dtype dtype = CheckedDtype(a.dtype, what);
  const size_t bytes = Bytes(a.count, dtype, what);
  CheckBuffers(&a.source, 1, a.count > 0, std::string(what) + " source");
  const auto outputs =
      CheckBuffers(a.outputs, a.num_outputs, a.count > 0, std::string(what) + " outputs");
  CheckStream(a.stream, what);
  if (bytes == 0) return;
  for (const chorus_buffer& out : outputs) {
    api_.Copy(out.device, out.data, a.source.device, a.source.data, bytes, a.stream);
  }
  Finish(a.stream, outputs);
}

void HierarchicalCopy::AllGather(const chorus_all_gather_args* args) const {
  const char* what = "hierarchical_copy all_gather";
  const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_all_gather_args, stream), what);
  const chorus_dtype dtype = CheckedDtype(a.dtype, what);
  if (a.num_inputs > 0 && a.counts == nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT, what, ": counts is NULL");
  }
  const auto inputs = CheckBuffers(a.inputs, a.num_inputs, false, std::string(what) + " inputs");
  const std::span<const size_t> counts(a.counts, a.num_inputs);
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > 0 && inputs[i].data == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, what, " inputs[", i, "]: data is NULL (counts[", i,
           "] = ", counts[i], ")");
    }
  }
  const std::optional<FlatLayout> layout = PlanLayout(counts);
  if (!layout) Fail(CHORUS_INVALID_ARGUMENT, what, ": the sum of counts overflows");
  const size_t element = chorus_dtype_size(dtype);
  const size_t total_bytes = Bytes(layout->total, dtype, what);
  const auto outputs =
      CheckBuffers(a.outputs, a.num_outputs, total_bytes > 0, std::string(what) + " outputs");
  CheckStream(a.stream, what);
  if (total_bytes == 0) return;

  // Pointers are compared whatever their device: virtual devices may share one address space.
  bool overlap = false;
  for (const chorus_buffer& out : outputs) {
    for (size_t i = 0; i < inputs.size() && !overlap; ++i) {
      overlap = Overlap(out.data, total_bytes, inputs[i].data, counts[i] * element);
    }
  }
  ScratchBuffer gathered;
  if (!overlap) {
    for (const chorus_buffer& out : outputs) {
      for (size_t i = 0; i < inputs.size(); ++i) {
        api_.Copy(out.device, static_cast<char*>(out.data) + layout->offsets[i] * element,
                  inputs[i].device, inputs[i].data, counts[i] * element, a.stream);
      }
    }
  } else {
    // An output holds some input (an in-place gather): gather into scratch first.
    const uint32_t target = TargetDevice(outputs, inputs);
    gathered = ScratchBuffer(api_, target, total_bytes, a.stream);
    for (size_t i = 0; i < inputs.size(); ++i) {
      api_.Copy(target, gathered.bytes_data() + layout->offsets[i] * element, inputs[i].device,
                inputs[i].data, counts[i] * element, a.stream);
    }
    for (const chorus_buffer& out : outputs) {
      api_.Copy(out.device, out.data, target, gathered.data(), total_bytes, a.stream);
    }
  }
  Finish(a.stream, outputs);
}

}  // namespace chorus::hierarchical
