#include "tpu_cross_device_ops.h"

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pjrt_device_context.h"
#include "pjrt_devices.h"
#include "stablehlo_programs.h"

struct chorus_cross_device_ops {
  chorus_device_context* devices = nullptr;  // the pjrt enumerator's, borrowed
  std::vector<uint32_t> replicas;            // the replicas' devices, in create's order
  // Replica r of a program runs on replicas[r]: the PJRT ids of the compile options' device
  // assignment, empty where replicas[r] == r (the client's default assignment).
  std::vector<int64_t> device_ids;
};

namespace chorus::tpu {
namespace {

using sdk::Fail;
using sdk::Guard;
using Allocation = HandleMemory::Allocation;

const char* const kPjrtMemory[] = {"pjrt", nullptr};

chorus_cross_device_ops& Ops(chorus_cross_device_ops* ops, const char* what) {
  if (ops == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "tpu ", what, ": ops is NULL");
  return *ops;
}

void NoRequest(chorus_request** request, const char* what) {
  if (request == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "tpu ", what, ": request is NULL");
  *request = nullptr;
}

size_t Bytes(size_t count, chorus_dtype dtype, const char* what) {
  const size_t size = chorus_dtype_size(dtype);
  if (size != 0 && count > SIZE_MAX / size) {
    Fail(CHORUS_INVALID_ARGUMENT, "tpu ", what, ": count ", count, " overflows");
  }
  return count * size;
}

void RequireBuffers(const chorus_cross_device_ops& ops, const chorus_buffer* buffers, size_t n,
                    bool need_data, const char* what) {
  if (n == 0 || buffers == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "tpu: no ", what);
  const auto available = static_cast<uint32_t>(ops.devices->names.size());
  for (size_t i = 0; i < n; ++i) {
    if (buffers[i].device >= available) {
      Fail(CHORUS_INVALID_ARGUMENT, "tpu: ", what, " ", i, " is on device ", buffers[i].device,
           ", which does not exist (", available, " PJRT devices)");
    }
    if (need_data && buffers[i].data == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "tpu: ", what, " ", i, " is NULL");
    }
  }
}

const chorus_reduce_args& CheckReduce(const chorus_cross_device_ops& ops,
                                      const chorus_reduce_args* args) {
  const auto& a =
      sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_reduce_args, stream), "tpu reduce");
  sdk::RequireDtype(a.dtype, "tpu reduce");
  sdk::RequireReduceOp(a.op, "tpu reduce");
  if (a.op == CHORUS_REDUCE_MEAN) {
    Fail(CHORUS_UNSUPPORTED, "tpu reduce: MEAN (the core divides a SUM)");
  }
  RequireBuffers(ops, a.inputs, a.num_inputs, a.count > 0, "reduce input");
  RequireBuffers(ops, a.outputs, a.num_outputs, a.count > 0, "reduce output");
  Bytes(a.count, a.dtype, "reduce");
  return a;
}

// The allocation a buffer is, when it is one from its first byte to its last (`bytes` long).
std::optional<Allocation> Whole(const chorus_cross_device_ops& ops, const chorus_buffer& buffer,
                                size_t bytes, const char* what) {
  const HandleMemory::Place place =
      ops.devices->memory.Find(buffer.device, buffer.data, bytes, what);
  if (place.offset != 0 || place.allocation.bytes != bytes) return std::nullopt;
  return place.allocation;
}

// A buffer's replica in the programs: the position of its device among the replicas'.
std::optional<int> ReplicaOf(const chorus_cross_device_ops& ops, uint32_t device) {
  const auto found = std::find(ops.replicas.begin(), ops.replicas.end(), device);
  if (found == ops.replicas.end()) return std::nullopt;
  return static_cast<int>(found - ops.replicas.begin());
}

int NumReplicas(const chorus_cross_device_ops& ops) {
  return static_cast<int>(ops.replicas.size());
}

// How one operation maps onto a program: per replica (by device index), the allocation each
// argument is, and the allocation each result goes to (none: the result is dropped).
struct Placement {
  ReplicaGroup group;                              // the inputs' replicas, in input order
  std::vector<Allocation> inputs;                  // by replica
  std::vector<std::optional<Allocation>> outputs;  // by replica
};

// Inputs one per replica, every replica once; outputs at most one per replica; every buffer a
// whole allocation. nullopt otherwise.
std::optional<Placement> Place(const chorus_cross_device_ops& ops, const chorus_buffer* inputs,
                               size_t num_inputs, size_t input_bytes, const chorus_buffer* outputs,
                               size_t num_outputs, size_t output_bytes) {
  const int n = NumReplicas(ops);
  if (num_inputs != static_cast<size_t>(n)) return std::nullopt;
  Placement placement;
  std::vector<std::optional<Allocation>> by_replica(static_cast<size_t>(n));
  for (size_t i = 0; i < num_inputs; ++i) {
    const std::optional<int> replica = ReplicaOf(ops, inputs[i].device);
    if (!replica || by_replica[static_cast<size_t>(*replica)]) return std::nullopt;
    std::optional<Allocation> whole = Whole(ops, inputs[i], input_bytes, "input");
    if (!whole) return std::nullopt;
    by_replica[static_cast<size_t>(*replica)] = whole;
    placement.group.push_back(*replica);
  }
  for (auto& input : by_replica) placement.inputs.push_back(*input);
  placement.outputs.resize(static_cast<size_t>(n));
  for (size_t i = 0; i < num_outputs; ++i) {
    const std::optional<int> replica = ReplicaOf(ops, outputs[i].device);
    if (!replica || placement.outputs[static_cast<size_t>(*replica)]) return std::nullopt;
    std::optional<Allocation> whole = Whole(ops, outputs[i], output_bytes, "output");
    if (!whole) return std::nullopt;
    placement.outputs[static_cast<size_t>(*replica)] = whole;
  }
  return placement;
}

// Runs `mlir` (from the cache) with arguments[replica][i] the current buffers of the
// allocations, and stores result i of each replica in outputs[i][replica] where there is one.
void RunProgram(chorus_cross_device_ops& ops, const std::string& mlir,
                const std::vector<std::vector<Allocation>>& arguments,
                const std::vector<std::vector<std::optional<Allocation>>>& outputs) {
  chorus_device_context& ctx = *ops.devices;
  const int n = NumReplicas(ops);
  std::shared_ptr<const PjrtExecutable> executable =
      ctx.programs.Get(*ctx.client, mlir, n, false, ops.device_ids);
  std::vector<std::vector<std::shared_ptr<PjrtBuffer>>> held(static_cast<size_t>(n));
  std::vector<std::vector<pjrt::PJRT_Buffer*>> handles(static_cast<size_t>(n));
  for (size_t r = 0; r < static_cast<size_t>(n); ++r) {
    for (const std::vector<Allocation>& argument : arguments) {
      held[r].push_back(CurrentBuffer(ctx, argument[r]));
      handles[r].push_back(held[r].back()->handle());
    }
  }
  std::vector<std::vector<PjrtBuffer>> results =
      ctx.client->Execute(*executable, handles, ctx.timeout);
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t r = 0; r < static_cast<size_t>(n); ++r) {
      if (!outputs[i][r]) continue;
      HandleMemory::Contents& contents = *outputs[i][r]->contents;
      std::lock_guard<std::mutex> lock(contents.mutex);
      contents.buffer = std::make_shared<PjrtBuffer>(std::move(results[r][i]));
    }
  }
}

// ---- On the host: read, combine in the programs' order, write.

std::vector<char> ReadBuffer(const chorus_cross_device_ops& ops, const chorus_buffer& buffer,
                             size_t bytes, const char* what) {
  return ReadBytes(*ops.devices, ops.devices->memory.Find(buffer.device, buffer.data, bytes, what),
                   bytes);
}

void WriteBuffer(const chorus_cross_device_ops& ops, const chorus_buffer& buffer, const void* data,
                 size_t bytes, const char* what) {
  WriteBytes(*ops.devices, ops.devices->memory.Find(buffer.device, buffer.data, bytes, what), data,
             bytes);
}

// The inputs combined in chorus's pairwise tree, ((in0 + in1) + (in2 + in3)) + ..., the order
// of the core's host path and of the reference PJRT plugin's all-reduce.
std::vector<char> PairwiseOnHost(std::vector<std::vector<char>> inputs, size_t count,
                                 chorus_dtype dtype, chorus_reduce_op op) {
  struct Partial {
    std::vector<char> bytes;
    unsigned level;
  };
  std::vector<Partial> stack;
  for (std::vector<char>& input : inputs) {
    Partial current{std::move(input), 0};
    while (!stack.empty() && stack.back().level == current.level) {
      std::vector<char> left = std::move(stack.back().bytes);
      stack.pop_back();
      sdk::ReduceOnHost(left.data(), left.data(), current.bytes.data(), count, dtype, op);
      current = {std::move(left), current.level + 1};
    }
    stack.push_back(std::move(current));
  }
  std::vector<char> sum = std::move(stack.back().bytes);
  stack.pop_back();
  while (!stack.empty()) {
    sdk::ReduceOnHost(stack.back().bytes.data(), stack.back().bytes.data(), sum.data(), count,
                      dtype, op);
    sum = std::move(stack.back().bytes);
    stack.pop_back();
  }
  return sum;
}

void ReduceOnHostPath(const chorus_cross_device_ops& ops, const chorus_reduce_args& a) {
  const size_t bytes = Bytes(a.count, a.dtype, "reduce");
  std::vector<std::vector<char>> inputs;
  for (size_t i = 0; i < a.num_inputs; ++i) {
    inputs.push_back(ReadBuffer(ops, a.inputs[i], bytes, "reduce input"));
  }
  const std::vector<char> sum = PairwiseOnHost(std::move(inputs), a.count, a.dtype, a.op);
  for (size_t i = 0; i < a.num_outputs; ++i) {
    WriteBuffer(ops, a.outputs[i], sum.data(), bytes, "reduce output");
  }
}

// ---- The operations.

// Reduces `reduces` in one program when each maps onto the replicas, else each on the host.
void RunReduces(chorus_cross_device_ops& ops,
                const std::vector<const chorus_reduce_args*>& reduces) {
  std::vector<AllReducePart> parts;
  std::vector<std::vector<Allocation>> arguments;
  std::vector<std::vector<std::optional<Allocation>>> outputs;
  bool program = true;
  for (const chorus_reduce_args* a : reduces) {
    if (!program || a->count == 0) continue;
    const size_t bytes = Bytes(a->count, a->dtype, "reduce");
    std::optional<Placement> placement =
        Place(ops, a->inputs, a->num_inputs, bytes, a->outputs, a->num_outputs, bytes);
    if (!placement) {
      program = false;
      break;
    }
    AllReducePart part{a->dtype, a->op, a->count, placement->group, false};
    // In place on every replica: the argument's buffer may become the result's.
    part.donate = true;
    for (size_t r = 0; r < placement->inputs.size(); ++r) {
      const auto& out = placement->outputs[r];
      if (!out || out->contents != placement->inputs[r].contents) part.donate = false;
    }
    parts.push_back(std::move(part));
    arguments.push_back(std::move(placement->inputs));
    outputs.push_back(std::move(placement->outputs));
  }
  if (program) {
    // An allocation that is the argument of two parts is donated by neither.
    std::map<const HandleMemory::Contents*, int> uses;
    for (const auto& argument : arguments) {
      for (const Allocation& allocation : argument) ++uses[allocation.contents.get()];
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      for (const Allocation& allocation : arguments[i]) {
        if (uses[allocation.contents.get()] > 1) parts[i].donate = false;
      }
    }
    if (!parts.empty()) {
      RunProgram(ops, AllReduceProgram(parts, NumReplicas(ops)), arguments, outputs);
    }
    return;
  }
  for (const chorus_reduce_args* a : reduces) {
    if (a->count > 0) ReduceOnHostPath(ops, *a);
  }
}

chorus_status Create(const chorus_cross_device_ops_create_args* args,
                     chorus_cross_device_ops** out) {
  return Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "tpu create: out is NULL");
    *out = nullptr;
    const auto& a = sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_cross_device_ops_create_args, num_options), "tpu create");
    // The arguments first, whatever the devices are; then whether they are this plugin's.
    if (a.devices_api == nullptr || a.devices == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "tpu create: no device enumerator");
    }
    if (a.num_devices == 0 || a.device_indices == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "tpu create: needs at least one device");
    }
    uint32_t available = 0;
    if (a.devices_api->device_count == nullptr ||
        a.devices_api->device_count(a.devices, &available) != CHORUS_OK) {
      Fail(CHORUS_INVALID_ARGUMENT, "tpu create: the enumerator cannot count its devices");
    }
    for (size_t i = 0; i < a.num_devices; ++i) {
      if (a.device_indices[i] >= available) {
        Fail(CHORUS_INVALID_ARGUMENT, "tpu create: device ", a.device_indices[i],
             " does not exist (the enumerator has ", available, ")");
      }
    }
    for (size_t i = 0; i < a.num_options; ++i) {
      Fail(CHORUS_INVALID_ARGUMENT, "tpu create: unknown option '",
           a.options[i].key != nullptr ? a.options[i].key : "",
           "'; the tpu cross-device ops take none");
    }
    if (a.devices_api->reduce != PjrtDevicesTable()->reduce) {
      Fail(CHORUS_UNSUPPORTED, "tpu cross-device ops: the devices are '",
           a.devices_api->platform != nullptr ? a.devices_api->platform : "?",
           "' devices; they run programs on the 'pjrt' enumerator's devices (this plugin's)");
    }
    if (a.devices->client == nullptr) {
      Fail(CHORUS_UNAVAILABLE, "tpu cross-device ops: the pjrt enumerator has no PJRT client");
    }
    auto ops = std::make_unique<chorus_cross_device_ops>();
    ops->devices = a.devices;
    for (size_t i = 0; i < a.num_devices; ++i) {
      const uint32_t device = a.device_indices[i];
      if (std::find(ops->replicas.begin(), ops->replicas.end(), device) != ops->replicas.end()) {
        Fail(CHORUS_INVALID_ARGUMENT, "tpu create: device ", device,
             " is given twice; a program runs one replica per device");
      }
      ops->replicas.push_back(device);
    }
    ops->device_ids = DeviceAssignment(*ops->devices, ops->replicas);
    *out = ops.release();
  });
}

void Destroy(chorus_cross_device_ops* ops) { delete ops; }

chorus_status Reduce(chorus_cross_device_ops* ops, const chorus_reduce_args* args,
                     chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "reduce");
    chorus_cross_device_ops& o = Ops(ops, "reduce");
    RunReduces(o, {&CheckReduce(o, args)});
  });
}

chorus_status BatchReduce(chorus_cross_device_ops* ops, const chorus_batch_reduce_args* args,
                          chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "batch_reduce");
    chorus_cross_device_ops& o = Ops(ops, "batch_reduce");
    const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_batch_reduce_args, stream),
                                     "tpu batch_reduce");
    if (a.num_reduces > 0 && a.reduces == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "tpu batch_reduce: reduces is NULL");
    }
    std::vector<const chorus_reduce_args*> reduces;
    for (size_t i = 0; i < a.num_reduces; ++i) reduces.push_back(&CheckReduce(o, a.reduces[i]));
    RunReduces(o, reduces);
  });
}

chorus_status Broadcast(chorus_cross_device_ops* ops, const chorus_broadcast_args* args,
                        chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "broadcast");
    chorus_cross_device_ops& o = Ops(ops, "broadcast");
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_broadcast_args, stream), "tpu broadcast");
    sdk::RequireDtype(a.dtype, "tpu broadcast");
    RequireBuffers(o, &a.source, 1, a.count > 0, "broadcast source");
    RequireBuffers(o, a.outputs, a.num_outputs, a.count > 0, "broadcast output");
    const size_t bytes = Bytes(a.count, a.dtype, "broadcast");
    if (a.count == 0) return;
    // A program when the source is a replica's whole allocation and every replica has one output.
    std::optional<Placement> placement;
    const std::optional<int> source = ReplicaOf(o, a.source.device);
    std::optional<Allocation> whole_source;
    if (source && a.num_outputs == o.replicas.size()) {
      whole_source = Whole(o, a.source, bytes, "broadcast source");
      placement = Place(o, a.outputs, a.num_outputs, bytes, a.outputs, a.num_outputs, bytes);
    }
    if (placement && whole_source) {
      ReplicaGroup group{*source};
      for (int r = 0; r < NumReplicas(o); ++r) {
        if (r != *source) group.push_back(r);
      }
      std::vector<Allocation> arguments = placement->inputs;  // the outputs' current contents
      arguments[static_cast<size_t>(*source)] = *whole_source;
      RunProgram(o, BroadcastProgram(bytes, group, NumReplicas(o)), {arguments},
                 {placement->outputs});
      return;
    }
    const std::vector<char> value = ReadBuffer(o, a.source, bytes, "broadcast source");
    for (size_t i = 0; i < a.num_outputs; ++i) {
      WriteBuffer(o, a.outputs[i], value.data(), bytes, "broadcast output");
    }
  });
}

chorus_status AllGather(chorus_cross_device_ops* ops, const chorus_all_gather_args* args,
                        chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "all_gather");
    chorus_cross_device_ops& o = Ops(ops, "all_gather");
    const auto& a = sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_all_gather_args, stream),
                                     "tpu all_gather");
    sdk::RequireDtype(a.dtype, "tpu all_gather");
    if (a.num_inputs > 0 && a.counts == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "tpu all_gather: counts is NULL");
    }
    size_t total = 0;
    bool equal = true;
    for (size_t i = 0; i < a.num_inputs; ++i) {
      total += a.counts[i];
      equal = equal && a.counts[i] == a.counts[0];
    }
    RequireBuffers(o, a.inputs, a.num_inputs, false, "all_gather input");
    RequireBuffers(o, a.outputs, a.num_outputs, total > 0, "all_gather output");
    const size_t total_bytes = Bytes(total, a.dtype, "all_gather");
    if (total == 0) return;
    if (equal) {
      const size_t bytes = Bytes(a.counts[0], a.dtype, "all_gather");
      std::optional<Placement> placement =
          Place(o, a.inputs, a.num_inputs, bytes, a.outputs, a.num_outputs, total_bytes);
      if (placement) {
        RunProgram(o, AllGatherProgram(bytes, placement->group, NumReplicas(o)),
                   {placement->inputs}, {placement->outputs});
        return;
      }
    }
    std::vector<char> gathered;
    gathered.reserve(total_bytes);
    for (size_t i = 0; i < a.num_inputs; ++i) {
      if (a.counts[i] == 0) continue;
      if (a.inputs[i].data == nullptr) {
        Fail(CHORUS_INVALID_ARGUMENT, "tpu all_gather: input ", i, " is NULL");
      }
      const std::vector<char> part =
          ReadBuffer(o, a.inputs[i], Bytes(a.counts[i], a.dtype, "all_gather"), "all_gather input");
      gathered.insert(gathered.end(), part.begin(), part.end());
    }
    for (size_t i = 0; i < a.num_outputs; ++i) {
      WriteBuffer(o, a.outputs[i], gathered.data(), total_bytes, "all_gather output");
    }
  });
}

chorus_status ReduceScatter(chorus_cross_device_ops* ops,
                            const chorus_cross_device_reduce_scatter_args* args,
                            chorus_request** request) {
  return Guard([&] {
    NoRequest(request, "reduce_scatter");
    chorus_cross_device_ops& o = Ops(ops, "reduce_scatter");
    const auto& a =
        sdk::RequireArgs(args, CHORUS_STRUCT_SIZE(chorus_cross_device_reduce_scatter_args, stream),
                         "tpu reduce_scatter");
    sdk::RequireDtype(a.dtype, "tpu reduce_scatter");
    sdk::RequireReduceOp(a.op, "tpu reduce_scatter");
    if (a.op == CHORUS_REDUCE_MEAN) {
      Fail(CHORUS_UNSUPPORTED, "tpu reduce_scatter: MEAN (the core divides a SUM)");
    }
    if (a.num_inputs != a.num_outputs) {
      Fail(CHORUS_INVALID_ARGUMENT, "tpu reduce_scatter: ", a.num_inputs, " inputs but ",
           a.num_outputs, " outputs; give one of each per replica");
    }
    RequireBuffers(o, a.inputs, a.num_inputs, a.count > 0, "reduce_scatter input");
    RequireBuffers(o, a.outputs, a.num_outputs, a.count > 0, "reduce_scatter output");
    const size_t part_bytes = Bytes(a.count, a.dtype, "reduce_scatter");
    if (a.count > SIZE_MAX / a.num_inputs) {
      Fail(CHORUS_INVALID_ARGUMENT, "tpu reduce_scatter: count ", a.count, " overflows");
    }
    const size_t whole_count = a.count * a.num_inputs;
    const size_t whole_bytes = Bytes(whole_count, a.dtype, "reduce_scatter");
    if (a.count == 0) return;
    // A program when every replica gives a whole input and takes its part on the same device:
    // the replica at position k of the group (input k's) gets part k.
    bool same_devices = true;
    for (size_t j = 0; j < a.num_inputs; ++j) {
      same_devices = same_devices && a.outputs[j].device == a.inputs[j].device;
    }
    if (same_devices) {
      std::optional<Placement> placement =
          Place(o, a.inputs, a.num_inputs, whole_bytes, a.outputs, a.num_outputs, part_bytes);
      if (placement) {
        RunProgram(o,
                   ReduceScatterProgram(a.dtype, a.op, a.count, placement->group, NumReplicas(o)),
                   {placement->inputs}, {placement->outputs});
        return;
      }
    }
    std::vector<std::vector<char>> inputs;
    for (size_t i = 0; i < a.num_inputs; ++i) {
      inputs.push_back(ReadBuffer(o, a.inputs[i], whole_bytes, "reduce_scatter input"));
    }
    const std::vector<char> sum = PairwiseOnHost(std::move(inputs), whole_count, a.dtype, a.op);
    for (size_t j = 0; j < a.num_outputs; ++j) {
      WriteBuffer(o, a.outputs[j], sum.data() + j * part_bytes, part_bytes,
                  "reduce_scatter output");
    }
  });
}

// Programs on the devices they were made for beat copying every byte through one device; the
// core's reduction_to_one_device scores 5 on any memory.
uint32_t TpuScore(const chorus_score_args* args) {
  return args->request == CHORUS_REQUEST_AUTO ? 90 : 0;
}

}  // namespace

const chorus_cross_device_ops_api* TpuCrossDeviceOpsTable() {
  static const chorus_capabilities capabilities = sdk::Capabilities(
      kPjrtMemory, CHORUS_SHAPE_ANY,
      sdk::kAllCrossDeviceOps | CHORUS_OP_BIT(CHORUS_OP_REDUCE_SCATTER), TpuScore);
  static const chorus_cross_device_ops_api table = [] {
    chorus_cross_device_ops_api t{};
    t.struct_size = sizeof(t);
    t.name = "tpu";
    t.create = Create;
    t.destroy = Destroy;
    t.reduce = Reduce;
    t.batch_reduce = BatchReduce;
    t.broadcast = Broadcast;
    t.all_gather = AllGather;
    t.capabilities = &capabilities;
    t.reduce_scatter = ReduceScatter;
    return t;
  }();
  return &table;
}

}  // namespace chorus::tpu
