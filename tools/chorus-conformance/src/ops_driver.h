// The plugin's cross-device ops, driven through its raw C table as the core drives them: MEAN is
// resolved here (SUM, then the enumerator's divide by the number of inputs), requests are waited
// on and freed. chorus::CrossDeviceOps does the same but can only be made from a Registry, and
// the plugin under test must be loaded (and init()ed) once.
#ifndef CHORUS_CONFORMANCE_OPS_DRIVER_H_
#define CHORUS_CONFORMANCE_OPS_DRIVER_H_

#include <chorus/runtime/device.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "suite.h"

namespace chorus::conformance::internal {

// One reduce of a batch: inputs (one per replica) reduced into every output.
struct ReduceCall {
  chorus_dtype dtype = CHORUS_F32;
  size_t count = 0;
  std::vector<chorus_buffer> inputs;
  std::vector<chorus_buffer> outputs;
};

class OpsDriver {
 public:
  // Creates cross-device ops `api` (a table of the plugin) over `indices` of `devices`. Returns
  // the status of the plugin's create; on failure *message holds its last_error().
  static chorus_status Create(const Suite& suite, const chorus_cross_device_ops_api& api,
                              std::shared_ptr<DeviceEnumerator> devices,
                              const std::vector<uint32_t>& indices, std::unique_ptr<OpsDriver>* out,
                              std::string* message);
  ~OpsDriver();
  OpsDriver(const OpsDriver&) = delete;
  OpsDriver& operator=(const OpsDriver&) = delete;

  const chorus_cross_device_ops_api& api() const { return api_; }
  chorus_cross_device_ops* handle() const { return handle_; }
  const DeviceEnumerator& devices() const { return *devices_; }

  // Each completes the operation (waiting on a request if the plugin returns one) and fails
  // with the status and the plugin's message; last_status() is then the failure's status.
  testing::AssertionResult Reduce(chorus_reduce_op op, const ReduceCall& call);
  testing::AssertionResult BatchReduce(chorus_reduce_op op, const std::vector<ReduceCall>& calls);
  testing::AssertionResult Broadcast(chorus_dtype dtype, size_t count, chorus_buffer source,
                                     const std::vector<chorus_buffer>& outputs);
  testing::AssertionResult AllGather(chorus_dtype dtype, const std::vector<chorus_buffer>& inputs,
                                     const std::vector<size_t>& counts,
                                     const std::vector<chorus_buffer>& outputs);
  // 1.5, for a table whose reduce_scatter is not NULL: one input of count x inputs.size()
  // elements and one output of `count` per replica; MEAN as in Reduce.
  testing::AssertionResult ReduceScatter(chorus_reduce_op op, chorus_dtype dtype, size_t count,
                                         const std::vector<chorus_buffer>& inputs,
                                         const std::vector<chorus_buffer>& outputs);

  chorus_status last_status() const { return last_status_; }

 private:
  OpsDriver(const Suite& suite, const chorus_cross_device_ops_api& api,
            std::shared_ptr<DeviceEnumerator> devices)
      : suite_(suite), api_(api), devices_(std::move(devices)) {}
  testing::AssertionResult Finish(chorus_status status, chorus_request* request, const char* what);
  testing::AssertionResult DivideOutputs(const ReduceCall& call);

  const Suite& suite_;
  const chorus_cross_device_ops_api& api_;
  std::shared_ptr<DeviceEnumerator> devices_;
  chorus_cross_device_ops* handle_ = nullptr;
  chorus_status last_status_ = CHORUS_OK;
};

// Fills a create-args struct for `indices` of `devices` (all fields of ABI 1.0 set).
chorus_cross_device_ops_create_args CreateArgs(const DeviceEnumerator& devices,
                                               const std::vector<uint32_t>& indices,
                                               const std::vector<chorus_option>& options);

}  // namespace chorus::conformance::internal

#endif  // CHORUS_CONFORMANCE_OPS_DRIVER_H_
