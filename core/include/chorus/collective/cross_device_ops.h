// CrossDeviceOps: the C++ face of a cross-device ops backend (the core's ReductionToOneDevice or
// a plugin's), used by the strategies. It resolves MEAN (SUM, then divide by n), waits on the
// plugin's requests with the time-out, and turns failures into chorus::Error.
#ifndef CHORUS_CROSS_DEVICE_OPS_H_
#define CHORUS_CROSS_DEVICE_OPS_H_

#include <chorus/runtime/device.h>
#include <chorus/runtime/registry.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

class Communicator;

struct ReduceSpec {
  chorus_dtype dtype = CHORUS_F32;
  size_t count = 0;
  std::vector<chorus_buffer> inputs;
  std::vector<chorus_buffer> outputs;
};

class CrossDeviceOps {
 public:
  // Creates the backend called `name` over `devices` (all of one enumerator). Throws Error with
  // the plugin's message when the name is unknown or the plugin's create fails.
  static std::unique_ptr<CrossDeviceOps> Create(const Registry& registry, std::string_view name,
                                                const std::vector<Device>& devices,
                                                const Options& options = {});
  ~CrossDeviceOps();
  CrossDeviceOps(const CrossDeviceOps&) = delete;
  CrossDeviceOps& operator=(const CrossDeviceOps&) = delete;

  const std::string& name() const { return name_; }
  const PluginLibrary& library() const { return *library_; }
  const std::vector<Device>& devices() const { return devices_; }
  const chorus_cross_device_ops_api& api() const { return *api_; }
  chorus_cross_device_ops* handle() const { return handle_; }

  void set_timeout_seconds(double seconds) { timeout_seconds_ = seconds; }
  // Multi-worker: after the local reduction, Reduce and BatchReduce all-reduce the result across
  // workers through `communicator` (borrowed; nullptr = this worker only), and MEAN divides by
  // every worker's inputs. Every worker must pass the same number of inputs.
  void set_cross_worker(Communicator* communicator) { cross_worker_ = communicator; }

  // Reduces `inputs` (count elements each) into every output. op may be MEAN (divided by the
  // number of inputs).
  void Reduce(chorus_reduce_op op, const ReduceSpec& spec);
  void BatchReduce(chorus_reduce_op op, const std::vector<ReduceSpec>& specs);
  void Broadcast(chorus_dtype dtype, size_t count, chorus_buffer source,
                 const std::vector<chorus_buffer>& outputs);
  void AllGather(chorus_dtype dtype, const std::vector<chorus_buffer>& inputs,
                 const std::vector<size_t>& counts, const std::vector<chorus_buffer>& outputs);

 private:
  CrossDeviceOps() = default;
  void Finish(chorus_status status, chorus_request* request, const char* what);
  void DivideOutputs(const ReduceSpec& spec, size_t divisor);
  void ReduceAcrossWorkers(chorus_reduce_op op, const ReduceSpec& spec);

  std::string name_;
  std::shared_ptr<PluginLibrary> library_;
  const chorus_cross_device_ops_api* api_ = nullptr;
  chorus_cross_device_ops* handle_ = nullptr;
  std::vector<Device> devices_;
  double timeout_seconds_ = 300;
  Communicator* cross_worker_ = nullptr;
};

// Which cross-device ops a strategy uses, and why.
struct CrossDeviceOpsSelection {
  std::string name;
  std::string source;  // "constructor argument", "CHORUS_CROSS_DEVICE_OPS", "default rule (...)"
};

// constructor_arg (may be empty) > CHORUS_CROSS_DEVICE_OPS > default rule: "nccl" when every
// device is a GPU and a plugin provides it, else reduction_to_one_device. Throws
// Error(INVALID_ARGUMENT) for an unknown name, listing the available ones.
CrossDeviceOpsSelection SelectCrossDeviceOps(const Registry& registry,
                                             std::string_view constructor_arg,
                                             const std::vector<Device>& devices);

}  // namespace chorus

#endif  // CHORUS_CROSS_DEVICE_OPS_H_
