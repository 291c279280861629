#include <chorus/base/dtype.h>
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>
#include <chorus/collective/cross_device_ops.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "base/abort_scope.h"
#include "base/logging.h"
#include "base/watchdog.h"
#include "runtime/plugin_call.h"
#include "runtime/raw_options.h"

namespace chorus {
// One operation on the calling thread: counted in in_flight() and inside the abort scope. An
// aborted object refuses it; the count is undone by then (the Counted member is complete when
// the body throws).
class CrossDeviceOps::Activity {
 public:
  Activity(CrossDeviceOps& ops, const char* what) : counted_(ops), scope_(*ops.abort_flag_) {
    ops.ThrowIfAborted(what);
  }

 private:
  struct Counted {
    explicit Counted(CrossDeviceOps& ops) : ops(ops) { ++ops.in_flight_; }
    ~Counted() { --ops.in_flight_; }
    CrossDeviceOps& ops;
  };
  Counted counted_;
  internal::AbortScope scope_;
};

CrossDeviceOps::CrossDeviceOps() : abort_flag_(std::make_unique<internal::AbortFlag>()) {}

void CrossDeviceOps::Abort(const std::string& reason) {
  bool expected = false;
  if (!abort_claimed_.compare_exchange_strong(expected, true)) return;
  abort_reason_ = reason;
  aborted_.store(true);
  abort_flag_->Raise();
  Log().error("cross-device ops {}: {}", backends_.empty() ? "" : name(), reason);
}

void CrossDeviceOps::ThrowIfAborted(const char* what) const {
  if (aborted_.load()) {
    throw Error(CHORUS_ABORTED, std::string(what) + " on cross-device ops '" + name() +
                                    "': they were aborted: " + abort_reason_);
  }
}

bool CrossDeviceOps::WaitIdle(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (in_flight_.load() > 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

std::unique_ptr<CrossDeviceOps> CrossDeviceOps::Create(const Registry& registry,
                                                       std::string_view name,
                                                       const std::vector<Device>& devices,
                                                       const Options& options) {
  return Create(registry, std::vector<std::string>{std::string(name)}, devices, options);
}

std::unique_ptr<CrossDeviceOps> CrossDeviceOps::Create(const Registry& registry,
                                                       const std::vector<std::string>& names,
                                                       const std::vector<Device>& devices,
                                                       const Options& options) {
  if (names.empty()) throw Error(CHORUS_INVALID_ARGUMENT, "cross-device ops: no name");
  std::unique_ptr<CrossDeviceOps> self(new CrossDeviceOps());
  self->devices_ = devices;
  self->timeout_seconds_ = DefaultTimeoutSeconds();
  if (devices.empty()) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "cross-device ops '" + names.front() + "' need at least one device");
  }
  std::vector<uint32_t> indices;
  for (const auto& device : devices) {
    if (device.enumerator != devices.front().enumerator) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "cross-device ops '" + names.front() + "' got devices of two enumerators (" +
                      devices.front().enumerator->platform() + " and " +
                      device.enumerator->platform() + "); use devices of one platform");
    }
    indices.push_back(device.index);
  }
  const auto raw = internal::RawOptions(options);
  for (const auto& name : names) {
    const auto entry = registry.FindCrossDeviceOps(name, "the requested backend");
    Backend backend;
    backend.name = entry.api->name;
    backend.library = entry.plugin;
    backend.api = entry.api;
    if (backend.api->create == nullptr || backend.api->destroy == nullptr) {
      throw Error(CHORUS_UNSUPPORTED,
                  "cross-device ops '" + backend.name + "' lack create/destroy");
    }
    chorus_cross_device_ops_create_args args{};
    args.struct_size = sizeof(args);
    args.devices_api = &devices.front().enumerator->api();
    args.devices = devices.front().enumerator->context();
    args.device_indices = indices.data();
    args.num_devices = indices.size();
    // Options are for the first (the named one); the others AUTO adds get their defaults.
    args.options = self->backends_.empty() ? raw.data() : nullptr;
    args.num_options = self->backends_.empty() ? raw.size() : 0;
    args.devices_last_error = devices.front().enumerator->library().table().last_error;
    args.context = backend.api->context;
    const std::string plugin = internal::PluginWords(*backend.library);
    const std::string what = plugin + ": create of cross-device ops '" + backend.name + "'";
    const chorus_status status = internal::CreateInPlugin(
        what,
        std::chrono::milliseconds(static_cast<int64_t>(std::ceil(self->timeout_seconds_ * 1000))),
        [&] { return backend.api->create(&args, &backend.handle); });
    if (status != CHORUS_OK) {
      throw Error(status, "cross-device ops '" + backend.name + "' (plugin " +
                              backend.library->name() +
                              ") could not be created: " + backend.library->LastError());
    }
    self->backends_.push_back(std::move(backend));
  }
  return self;
}

CrossDeviceOps::~CrossDeviceOps() {
  internal::AbortScope scope(*abort_flag_);
  for (auto it = backends_.rbegin(); it != backends_.rend(); ++it) {
    if (it->handle != nullptr) it->api->destroy(it->handle);
  }
}

const CrossDeviceOps::Backend& CrossDeviceOps::Route(chorus_collective_op op, chorus_dtype dtype,
                                                     uint64_t bytes) const {
  if (backends_.size() == 1) return backends_[0];
  const JobShape shape = LocalShape(devices_);  // args point into it
  const auto args = ScoreArgs(op, dtype, bytes, shape, CHORUS_REQUEST_AUTO);
  const Backend* best = &backends_[0];
  uint32_t best_score = 0;
  for (const Backend& b : backends_) {
    const uint32_t score = ScoreValue(b.api->capabilities, args);
    if (score > best_score) {
      best = &b;
      best_score = score;
    }
  }
  return *best;
}

const std::string& CrossDeviceOps::BackendFor(chorus_collective_op op, chorus_dtype dtype,
                                              uint64_t bytes) const {
  return Route(op, dtype, bytes).name;
}

template <typename Start>
void CrossDeviceOps::Run(const Backend& backend, const char* what, Start start) {
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::ceil(timeout_seconds_ * 1000)));
  std::atomic<bool> late{false};
  auto watch = internal::Watch(
      internal::WatchdogLimitFor(timeout), internal::kWatchdogGrace,
      [&] {
        return std::string(what) + " on cross-device ops '" + backend.name + "' (" +
               internal::PluginWords(*backend.library) + ")";
      },
      [&](const std::string& message) {
        late.store(true);
        Abort(message + ": the plugin does not keep its time-out");
      });
  chorus_request* request = nullptr;
  const chorus_status status = internal::CallPlugin(
      [&] { return internal::PluginWords(*backend.library) + ": its " + what; },
      [&] { return start(&request); });
  Finish(backend, status, request, what);
  if (late.load())
    Fail(backend, CHORUS_TIMEOUT, what, "it returned only after the watchdog's limit");
}

void CrossDeviceOps::Finish(const Backend& backend, chorus_status status, chorus_request* request,
                            const char* what) {
  const chorus_plugin& table = backend.library->table();
  if (status == CHORUS_OK && request != nullptr) {
    const auto timeout_ms = static_cast<int64_t>(std::ceil(timeout_seconds_ * 1000));
    status = internal::CallPlugin(
        [&] { return internal::PluginWords(*backend.library) + ": its request_wait for " + what; },
        [&] { return table.request_wait(request, timeout_ms); });
    if (status == CHORUS_TIMEOUT) {
      // The operation may still write into the buffers: the request is leaked on purpose
      // rather than freed under a running operation, and every other wait on them stops.
      Abort(std::string(what) + " did not finish within " + std::to_string(timeout_seconds_) +
            " s");
      throw Error(CHORUS_TIMEOUT, std::string(what) + " on cross-device ops '" + backend.name +
                                      "' did not finish within " +
                                      std::to_string(timeout_seconds_) +
                                      " s (CHORUS_TIMEOUT_SECONDS or timeout_seconds)");
    }
    const std::string message = status == CHORUS_OK ? "" : backend.library->LastError();
    table.request_free(request);
    if (status != CHORUS_OK) Fail(backend, status, what, message);
    return;
  }
  if (status != CHORUS_OK) Fail(backend, status, what, backend.library->LastError());
}

void CrossDeviceOps::Fail(const Backend& backend, chorus_status status, const char* what,
                          const std::string& detail) const {
  std::string text = std::string(what) + " on cross-device ops '" + backend.name +
                     "' failed with " + StatusName(status) + ": " + detail;
  if (aborted_.load()) text += " (" + abort_reason_ + ")";
  throw Error(status, text);
}

void CrossDeviceOps::DivideOutputs(const ReduceSpec& spec, size_t divisor) {
  const auto& enumerator = *devices_.front().enumerator;
  for (const auto& output : spec.outputs) {
    enumerator.Divide(output.device, output.data, spec.count, spec.dtype, divisor);
  }
}

void CrossDeviceOps::Reduce(chorus_reduce_op op, const ReduceSpec& spec) {
  BatchReduce(op, {spec});
}

void CrossDeviceOps::BatchReduce(chorus_reduce_op op, const std::vector<ReduceSpec>& specs) {
  Activity activity(*this, "batch_reduce");
  if (op < 0 || op >= CHORUS_REDUCE_OP_COUNT) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "reduce op " + std::to_string(op) + " is not a chorus reduce op");
  }
  const chorus_reduce_op plugin_op = op == CHORUS_REDUCE_MEAN ? CHORUS_REDUCE_SUM : op;
  std::vector<chorus_reduce_args> args(specs.size());
  std::vector<const chorus_reduce_args*> pointers;
  for (size_t i = 0; i < specs.size(); ++i) {
    chorus_reduce_args& a = args[i];
    a.struct_size = sizeof(a);
    a.dtype = specs[i].dtype;
    a.op = plugin_op;
    a.count = specs[i].count;
    a.inputs = specs[i].inputs.data();
    a.num_inputs = specs[i].inputs.size();
    a.outputs = specs[i].outputs.data();
    a.num_outputs = specs[i].outputs.size();
    pointers.push_back(&a);
  }
  uint64_t bytes = 0;
  for (const auto& spec : specs) bytes += spec.count * chorus_dtype_size(spec.dtype);
  const Backend& b =
      Route(CHORUS_OP_ALL_REDUCE, specs.empty() ? CHORUS_F32 : specs[0].dtype, bytes);
  const chorus_cross_device_ops_api* api = b.api;
  chorus_cross_device_ops* handle = b.handle;
  if (specs.size() == 1 && api->reduce != nullptr) {
    Run(b, "reduce", [&](chorus_request** r) { return api->reduce(handle, &args[0], r); });
  } else if (api->batch_reduce != nullptr) {
    chorus_batch_reduce_args batch{};
    batch.struct_size = sizeof(batch);
    batch.reduces = pointers.data();
    batch.num_reduces = pointers.size();
    Run(b, "batch_reduce",
        [&](chorus_request** r) { return api->batch_reduce(handle, &batch, r); });
  } else if (api->reduce != nullptr) {
    for (auto& a : args) {
      Run(b, "reduce", [&](chorus_request** r) { return api->reduce(handle, &a, r); });
    }
  } else {
    throw Error(CHORUS_UNSUPPORTED, "cross-device ops '" + b.name + "' provide no reduce");
  }
  size_t workers = 1;
  if (cross_worker_ != nullptr) {
    workers = static_cast<size_t>(cross_worker_->size());
    ReduceAcrossWorkers(plugin_op, specs);
  }
  if (op == CHORUS_REDUCE_MEAN) {
    for (const auto& spec : specs) {
      if (spec.count > 0 && !spec.inputs.empty()) DivideOutputs(spec, spec.inputs.size() * workers);
    }
  }
}

// The local results (identical in every output of a spec) through host memory: the specs of one
// dtype side by side in one host buffer, all-reduced across workers in one collective (a call
// across workers costs a network round trip or more), then copied back into every output.
void CrossDeviceOps::ReduceAcrossWorkers(chorus_reduce_op op,
                                         const std::vector<ReduceSpec>& specs) {
  const auto& enumerator = *devices_.front().enumerator;
  std::vector<bool> done(specs.size(), false);
  for (size_t first = 0; first < specs.size(); ++first) {
    if (done[first]) continue;
    const chorus_dtype dtype = specs[first].dtype;
    const size_t element = chorus_dtype_size(dtype);
    std::vector<size_t> group;  // specs of this dtype with outputs
    size_t count = 0;
    for (size_t i = first; i < specs.size(); ++i) {
      if (done[i] || specs[i].dtype != dtype) continue;
      done[i] = true;
      if (specs[i].outputs.empty()) continue;
      group.push_back(i);
      count += specs[i].count;
    }
    if (group.empty()) continue;
    std::vector<unsigned char> host(count * element);
    size_t offset = 0;
    for (size_t i : group) {
      const size_t bytes = specs[i].count * element;
      const chorus_buffer output = specs[i].outputs.front();
      if (bytes > 0) {
        enumerator.Copy(CHORUS_HOST_DEVICE, host.data() + offset, output.device, output.data,
                        bytes);
      }
      offset += bytes;
    }
    cross_worker_->AllReduce(host.data(), host.data(), count, dtype, op);
    offset = 0;
    for (size_t i : group) {
      const size_t bytes = specs[i].count * element;
      if (bytes > 0) {
        for (const auto& output : specs[i].outputs) {
          enumerator.Copy(output.device, output.data, CHORUS_HOST_DEVICE, host.data() + offset,
                          bytes);
        }
      }
      offset += bytes;
    }
  }
}

void CrossDeviceOps::Broadcast(chorus_dtype dtype, size_t count, chorus_buffer source,
                               const std::vector<chorus_buffer>& outputs) {
  Activity activity(*this, "broadcast");
  const Backend& b = Route(CHORUS_OP_BROADCAST, dtype, count * chorus_dtype_size(dtype));
  if (b.api->broadcast == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, "cross-device ops '" + b.name + "' provide no broadcast");
  }
  chorus_broadcast_args args{};
  args.struct_size = sizeof(args);
  args.dtype = dtype;
  args.count = count;
  args.source = source;
  args.outputs = outputs.data();
  args.num_outputs = outputs.size();
  Run(b, "broadcast", [&](chorus_request** r) { return b.api->broadcast(b.handle, &args, r); });
}

void CrossDeviceOps::AllGather(chorus_dtype dtype, const std::vector<chorus_buffer>& inputs,
                               const std::vector<size_t>& counts,
                               const std::vector<chorus_buffer>& outputs) {
  Activity activity(*this, "all_gather");
  uint64_t bytes = 0;
  for (size_t count : counts) bytes += count * chorus_dtype_size(dtype);
  const Backend& b = Route(CHORUS_OP_ALL_GATHER, dtype, bytes);
  if (b.api->all_gather == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, "cross-device ops '" + b.name + "' provide no all_gather");
  }
  if (counts.size() != inputs.size()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "all_gather: " + std::to_string(inputs.size()) +
                                             " inputs but " + std::to_string(counts.size()) +
                                             " counts");
  }
  chorus_all_gather_args args{};
  args.struct_size = sizeof(args);
  args.dtype = dtype;
  args.inputs = inputs.data();
  args.counts = counts.data();
  args.num_inputs = inputs.size();
  args.outputs = outputs.data();
  args.num_outputs = outputs.size();
  Run(b, "all_gather", [&](chorus_request** r) { return b.api->all_gather(b.handle, &args, r); });
}

void CrossDeviceOps::ReduceScatter(chorus_reduce_op op, chorus_dtype dtype, size_t count,
                                   const std::vector<chorus_buffer>& inputs,
                                   const std::vector<chorus_buffer>& outputs) {
  if (op < 0 || op >= CHORUS_REDUCE_OP_COUNT) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "reduce op " + std::to_string(op) + " is not a chorus reduce op");
  }
  if (inputs.empty() || inputs.size() != outputs.size()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "reduce_scatter: " + std::to_string(inputs.size()) +
                                             " inputs and " + std::to_string(outputs.size()) +
                                             " outputs; give one input and one output per replica");
  }
  const size_t workers = cross_worker_ != nullptr ? static_cast<size_t>(cross_worker_->size()) : 1;
  const size_t rank = cross_worker_ != nullptr ? static_cast<size_t>(cross_worker_->rank()) : 0;
  const size_t parts = inputs.size() * workers;
  const size_t element = chorus_dtype_size(dtype);
  const chorus_reduce_op plugin_op = op == CHORUS_REDUCE_MEAN ? CHORUS_REDUCE_SUM : op;
  const Backend& b = Route(CHORUS_OP_REDUCE_SCATTER, dtype, count * parts * element);
  const auto& enumerator = *devices_.front().enumerator;
  if (workers == 1 && b.api->reduce_scatter != nullptr) {
    Activity activity(*this, "reduce_scatter");
    chorus_cross_device_reduce_scatter_args args{};
    args.struct_size = sizeof(args);
    args.dtype = dtype;
    args.op = plugin_op;
    args.count = count;
    args.inputs = inputs.data();
    args.num_inputs = inputs.size();
    args.outputs = outputs.data();
    args.num_outputs = outputs.size();
    Run(b, "reduce_scatter",
        [&](chorus_request** r) { return b.api->reduce_scatter(b.handle, &args, r); });
    if (op == CHORUS_REDUCE_MEAN && count > 0) {
      for (const auto& output : outputs) {
        enumerator.Divide(output.device, output.data, count, dtype, parts);
      }
    }
    return;
  }
  // The whole reduction (across workers too) into a scratch buffer, then each replica's part.
  if (count == 0) return;
  DeviceBuffer scratch(Device{devices_.front().enumerator, inputs.front().device},
                       count * parts * element);
  ReduceSpec whole;
  whole.dtype = dtype;
  whole.count = count * parts;
  whole.inputs = inputs;
  whole.outputs = {scratch.buffer()};
  BatchReduce(op, {whole});
  const auto* base = static_cast<const unsigned char*>(scratch.data());
  for (size_t j = 0; j < outputs.size(); ++j) {
    // A part is an offset into the scratch allocation, as every enumerator's memory allows
    // (handle memory included: plugin.h, "Devices whose buffers are handles").
    enumerator.Copy(outputs[j].device, outputs[j].data, scratch.buffer().device,
                    base + (rank * inputs.size() + j) * count * element, count * element);
  }
}

}  // namespace chorus
