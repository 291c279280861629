#include <chorus/base/dtype.h>
#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>
#include <chorus/collective/cross_device_ops.h>

#include <chrono>
#include <cmath>

namespace chorus {
namespace {

std::vector<chorus_option> RawOptions(const Options& options) {
  std::vector<chorus_option> raw;
  for (const auto& [key, value] : options) raw.push_back({key.c_str(), value.c_str()});
  return raw;
}

}  // namespace

std::unique_ptr<CrossDeviceOps> CrossDeviceOps::Create(const Registry& registry,
                                                       std::string_view name,
                                                       const std::vector<Device>& devices,
                                                       const Options& options) {
  auto library = registry.FindCrossDeviceOps(name, "the requested backend");
  std::unique_ptr<CrossDeviceOps> self(new CrossDeviceOps());
  self->library_ = library;
  self->api_ = library->cross_device_ops();
  self->name_ = self->api_->name;
  self->devices_ = devices;
  self->timeout_seconds_ = DefaultTimeoutSeconds();
  if (devices.empty()) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "cross-device ops '" + self->name_ + "' need at least one device");
  }
  std::vector<uint32_t> indices;
  for (const auto& device : devices) {
    if (device.enumerator != devices.front().enumerator) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "cross-device ops '" + self->name_ + "' got devices of two enumerators (" +
                      devices.front().enumerator->platform() + " and " +
                      device.enumerator->platform() + "); use devices of one platform");
    }
    indices.push_back(device.index);
  }
  if (self->api_->create == nullptr || self->api_->destroy == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, "cross-device ops '" + self->name_ + "' lack create/destroy");
  }
  const auto raw = RawOptions(options);
  chorus_cross_device_ops_create_args args{};
  args.struct_size = sizeof(args);
  args.devices_api = &devices.front().enumerator->api();
  args.devices = devices.front().enumerator->context();
  args.device_indices = indices.data();
  args.num_devices = indices.size();
  args.options = raw.data();
  args.num_options = raw.size();
  args.devices_last_error = devices.front().enumerator->library().table().last_error;
  chorus_status status = self->api_->create(&args, &self->handle_);
  if (status != CHORUS_OK) {
    self->handle_ = nullptr;
    throw Error(status, "cross-device ops '" + self->name_ + "' (plugin " + library->name() +
                            ") could not be created: " + library->LastError());
  }
  return self;
}

CrossDeviceOps::~CrossDeviceOps() {
  if (handle_ != nullptr) api_->destroy(handle_);
}

void CrossDeviceOps::Finish(chorus_status status, chorus_request* request, const char* what) {
  const chorus_plugin& table = library_->table();
  if (status == CHORUS_OK && request != nullptr) {
    const auto timeout_ms = static_cast<int64_t>(std::ceil(timeout_seconds_ * 1000));
    status = table.request_wait(request, timeout_ms);
    if (status == CHORUS_TIMEOUT) {
      // The operation may still write into the buffers: the request is leaked on purpose
      // rather than freed under a running operation.
      throw Error(CHORUS_TIMEOUT, std::string(what) + " on cross-device ops '" + name_ +
                                      "' did not finish within " +
                                      std::to_string(timeout_seconds_) +
                                      " s (CHORUS_TIMEOUT_SECONDS or timeout_seconds)");
    }
    const std::string message = status == CHORUS_OK ? "" : library_->LastError();
    table.request_free(request);
    if (status != CHORUS_OK) {
      throw Error(status, std::string(what) + " on cross-device ops '" + name_ + "' failed with " +
                              StatusName(status) + ": " + message);
    }
    return;
  }
  if (status != CHORUS_OK) {
    throw Error(status, std::string(what) + " on cross-device ops '" + name_ + "' failed with " +
                            StatusName(status) + ": " + library_->LastError());
  }
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
  chorus_request* request = nullptr;
  if (specs.size() == 1 && api_->reduce != nullptr) {
    Finish(api_->reduce(handle_, &args[0], &request), request, "reduce");
  } else if (api_->batch_reduce != nullptr) {
    chorus_batch_reduce_args batch{};
    batch.struct_size = sizeof(batch);
    batch.reduces = pointers.data();
    batch.num_reduces = pointers.size();
    Finish(api_->batch_reduce(handle_, &batch, &request), request, "batch_reduce");
  } else if (api_->reduce != nullptr) {
    for (auto& a : args) {
      request = nullptr;
      Finish(api_->reduce(handle_, &a, &request), request, "reduce");
    }
  } else {
    throw Error(CHORUS_UNSUPPORTED, "cross-device ops '" + name_ + "' provide no reduce");
  }
  size_t workers = 1;
  if (cross_worker_ != nullptr) {
    workers = static_cast<size_t>(cross_worker_->size());
    for (const auto& spec : specs) ReduceAcrossWorkers(plugin_op, spec);
  }
  if (op == CHORUS_REDUCE_MEAN) {
    for (const auto& spec : specs) {
      if (spec.count > 0 && !spec.inputs.empty()) DivideOutputs(spec, spec.inputs.size() * workers);
    }
  }
}

// The local result (identical in every output) through host memory: all-reduced across workers,
// then copied back into every output. One collective per spec: a spec is one pack already.
void CrossDeviceOps::ReduceAcrossWorkers(chorus_reduce_op op, const ReduceSpec& spec) {
  if (spec.outputs.empty()) return;
  const auto& enumerator = *devices_.front().enumerator;
  const size_t bytes = spec.count * chorus_dtype_size(spec.dtype);
  std::vector<unsigned char> host(bytes);
  const chorus_buffer first = spec.outputs.front();
  if (bytes > 0) enumerator.Copy(CHORUS_HOST_DEVICE, host.data(), first.device, first.data, bytes);
  cross_worker_->AllReduce(host.data(), host.data(), spec.count, spec.dtype, op);
  if (bytes == 0) return;
  for (const auto& output : spec.outputs) {
    enumerator.Copy(output.device, output.data, CHORUS_HOST_DEVICE, host.data(), bytes);
  }
}

void CrossDeviceOps::Broadcast(chorus_dtype dtype, size_t count, chorus_buffer source,
                               const std::vector<chorus_buffer>& outputs) {
  if (api_->broadcast == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, "cross-device ops '" + name_ + "' provide no broadcast");
  }
  chorus_broadcast_args args{};
  args.struct_size = sizeof(args);
  args.dtype = dtype;
  args.count = count;
  args.source = source;
  args.outputs = outputs.data();
  args.num_outputs = outputs.size();
  chorus_request* request = nullptr;
  Finish(api_->broadcast(handle_, &args, &request), request, "broadcast");
}

void CrossDeviceOps::AllGather(chorus_dtype dtype, const std::vector<chorus_buffer>& inputs,
                               const std::vector<size_t>& counts,
                               const std::vector<chorus_buffer>& outputs) {
  if (api_->all_gather == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, "cross-device ops '" + name_ + "' provide no all_gather");
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
  chorus_request* request = nullptr;
  Finish(api_->all_gather(handle_, &args, &request), request, "all_gather");
}

}  // namespace chorus
