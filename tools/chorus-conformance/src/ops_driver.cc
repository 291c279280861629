#include "ops_driver.h"

#include <chorus/base/error.h>

namespace chorus::conformance::internal {

chorus_cross_device_ops_create_args CreateArgs(const DeviceEnumerator& devices,
                                               const std::vector<uint32_t>& indices,
                                               const std::vector<chorus_option>& options) {
  chorus_cross_device_ops_create_args args{};
  args.struct_size = sizeof(args);
  args.devices_api = &devices.api();
  args.devices = devices.context();
  args.device_indices = indices.data();
  args.num_devices = indices.size();
  args.options = options.data();
  args.num_options = options.size();
  args.devices_last_error = devices.library().table().last_error;
  return args;
}

chorus_status OpsDriver::Create(const Suite& suite, const chorus_cross_device_ops_api& api,
                                std::shared_ptr<DeviceEnumerator> devices,
                                const std::vector<uint32_t>& indices,
                                std::unique_ptr<OpsDriver>* out, std::string* message) {
  std::unique_ptr<OpsDriver> driver(new OpsDriver(suite, api, std::move(devices)));
  std::vector<chorus_option> options;
  for (const auto& [key, value] : suite.options().cross_device_ops_options) {
    options.push_back({key.c_str(), value.c_str()});
  }
  const auto args = CreateArgs(*driver->devices_, indices, options);
  const chorus_status status = driver->api_.create(&args, &driver->handle_);
  if (status != CHORUS_OK) {
    *message = suite.LastError();
    driver->handle_ = nullptr;
    return status;
  }
  if (driver->handle_ == nullptr) {
    *message = "create returned OK but left its out-pointer NULL; set *out on CHORUS_OK";
    return CHORUS_INTERNAL;
  }
  *out = std::move(driver);
  return CHORUS_OK;
}

OpsDriver::~OpsDriver() {
  if (handle_ != nullptr) api_.destroy(handle_);
}

testing::AssertionResult OpsDriver::Finish(chorus_status status, chorus_request* request,
                                           const char* what) {
  last_status_ = status;
  if (status != CHORUS_OK && request != nullptr) {
    return testing::AssertionFailure()
           << what << " returned " << StatusName(status) << " (" << suite_.LastError()
           << ") and a request; a failed call must not leave a request behind: leave *request "
              "NULL when returning an error";
  }
  std::string message;
  const bool returned_failure = status != CHORUS_OK;
  status = FinishRequest(suite_.plugin(), status, request, suite_.timeout_ms(), &message);
  last_status_ = status;
  if (status == CHORUS_OK) return testing::AssertionSuccess();
  if (returned_failure) {
    testing::AssertionResult failure = testing::AssertionFailure()
                                       << what << " returned " << StatusName(status) << ": "
                                       << message;
    if (!IsNotHere(status)) failure << "; these arguments are valid: return CHORUS_OK";
    return failure;
  }
  if (status == CHORUS_TIMEOUT) {  // the request is left live: the operation may still write
    return testing::AssertionFailure()
           << what << ": its request did not finish within " << suite_.timeout_ms()
           << " ms (the kit's time-out, --timeout); complete (or fail) every request of a valid "
              "call well within that time";
  }
  return testing::AssertionFailure()
         << what << ": its request finished with " << StatusName(status) << ": " << message
         << (IsNotHere(status) ? "" : "; these arguments are valid: finish the request with OK");
}

testing::AssertionResult OpsDriver::DivideOutputs(const ReduceCall& call) {
  if (call.count == 0 || call.inputs.empty()) return testing::AssertionSuccess();
  for (const auto& output : call.outputs) {
    try {
      devices_->Divide(output.device, output.data, call.count, call.dtype, call.inputs.size());
    } catch (const Error& e) {
      return testing::AssertionFailure() << "MEAN's divide on the '" << devices_->platform()
                                         << "' devices failed: " << e.what();
    }
  }
  return testing::AssertionSuccess();
}

namespace {

chorus_reduce_args RawReduce(chorus_reduce_op op, const ReduceCall& call) {
  chorus_reduce_args args{};
  args.struct_size = sizeof(args);
  args.dtype = call.dtype;
  args.op = op == CHORUS_REDUCE_MEAN ? CHORUS_REDUCE_SUM : op;  // MEAN is the core's
  args.count = call.count;
  args.inputs = call.inputs.data();
  args.num_inputs = call.inputs.size();
  args.outputs = call.outputs.data();
  args.num_outputs = call.outputs.size();
  return args;
}

}  // namespace

testing::AssertionResult OpsDriver::Reduce(chorus_reduce_op op, const ReduceCall& call) {
  const chorus_reduce_args args = RawReduce(op, call);
  chorus_request* request = nullptr;
  auto result = Finish(api_.reduce(handle_, &args, &request), request, "reduce");
  if (result && op == CHORUS_REDUCE_MEAN) result = DivideOutputs(call);
  return result;
}

testing::AssertionResult OpsDriver::BatchReduce(chorus_reduce_op op,
                                                const std::vector<ReduceCall>& calls) {
  std::vector<chorus_reduce_args> args;
  for (const auto& call : calls) args.push_back(RawReduce(op, call));
  std::vector<const chorus_reduce_args*> pointers;
  for (const auto& a : args) pointers.push_back(&a);
  chorus_batch_reduce_args batch{};
  batch.struct_size = sizeof(batch);
  batch.reduces = pointers.data();
  batch.num_reduces = pointers.size();
  chorus_request* request = nullptr;
  auto result = Finish(api_.batch_reduce(handle_, &batch, &request), request, "batch_reduce");
  for (size_t i = 0; result && op == CHORUS_REDUCE_MEAN && i < calls.size(); ++i) {
    result = DivideOutputs(calls[i]);
  }
  return result;
}

testing::AssertionResult OpsDriver::Broadcast(chorus_dtype dtype, size_t count,
                                              chorus_buffer source,
                                              const std::vector<chorus_buffer>& outputs) {
  chorus_broadcast_args args{};
  args.struct_size = sizeof(args);
  args.dtype = dtype;
  args.count = count;
  args.source = source;
  args.outputs = outputs.data();
  args.num_outputs = outputs.size();
  chorus_request* request = nullptr;
  return Finish(api_.broadcast(handle_, &args, &request), request, "broadcast");
}

testing::AssertionResult OpsDriver::AllGather(chorus_dtype dtype,
                                              const std::vector<chorus_buffer>& inputs,
                                              const std::vector<size_t>& counts,
                                              const std::vector<chorus_buffer>& outputs) {
  chorus_all_gather_args args{};
  args.struct_size = sizeof(args);
  args.dtype = dtype;
  args.inputs = inputs.data();
  args.counts = counts.data();
  args.num_inputs = inputs.size();
  args.outputs = outputs.data();
  args.num_outputs = outputs.size();
  chorus_request* request = nullptr;
  return Finish(api_.all_gather(handle_, &args, &request), request, "all_gather");
}

testing::AssertionResult OpsDriver::ReduceScatter(chorus_reduce_op op, chorus_dtype dtype,
                                                  size_t count,
                                                  const std::vector<chorus_buffer>& inputs,
                                                  const std::vector<chorus_buffer>& outputs) {
  last_status_ = CHORUS_OK;
  if (api_.reduce_scatter == nullptr) {  // also for a table older than 1.5 (a padded copy)
    return testing::AssertionFailure() << "the table's reduce_scatter is NULL";
  }
  chorus_cross_device_reduce_scatter_args args{};
  args.struct_size = sizeof(args);
  args.dtype = dtype;
  args.op = op == CHORUS_REDUCE_MEAN ? CHORUS_REDUCE_SUM : op;  // MEAN is the core's
  args.count = count;
  args.inputs = inputs.data();
  args.num_inputs = inputs.size();
  args.outputs = outputs.data();
  args.num_outputs = outputs.size();
  chorus_request* request = nullptr;
  auto result = Finish(api_.reduce_scatter(handle_, &args, &request), request, "reduce_scatter");
  // Each output holds `count` elements of a sum over every input.
  if (result && op == CHORUS_REDUCE_MEAN) result = DivideOutputs({dtype, count, inputs, outputs});
  return result;
}

}  // namespace chorus::conformance::internal
