// CrossDeviceOps: the C++ face of the cross-device ops of a strategy (the core's
// ReductionToOneDevice or a plugin's). It creates the implementations its selection names (one when
// chosen by name; under AUTO every one that scores best for some operation and size), runs each
// operation on the best-scoring of them, resolves MEAN (SUM, then divide by n), waits on the
// plugin's requests with the time-out, and turns failures into chorus::Error.
#ifndef CHORUS_CROSS_DEVICE_OPS_H_
#define CHORUS_CROSS_DEVICE_OPS_H_

#include <chorus/collective/selection.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/registry.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

class Communicator;
namespace internal {
class AbortFlag;
}

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
  // Creates every backend of `names` (the first is the primary); with more than one, each
  // operation runs on the one that scores best for it.
  static std::unique_ptr<CrossDeviceOps> Create(const Registry& registry,
                                                const std::vector<std::string>& names,
                                                const std::vector<Device>& devices,
                                                const Options& options = {});
  ~CrossDeviceOps();
  CrossDeviceOps(const CrossDeviceOps&) = delete;
  CrossDeviceOps& operator=(const CrossDeviceOps&) = delete;

  // The primary backend's.
  const std::string& name() const { return backends_[0].name; }
  const PluginLibrary& library() const { return *backends_[0].library; }
  const chorus_cross_device_ops_api& api() const { return *backends_[0].api; }
  chorus_cross_device_ops* handle() const { return backends_[0].handle; }
  const std::vector<Device>& devices() const { return devices_; }
  // The backend that runs `op` of `bytes` in `dtype` (one device's buffer; a batch: the sum).
  const std::string& BackendFor(chorus_collective_op op, chorus_dtype dtype, uint64_t bytes) const;

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
  // One input and one output per local replica. Every input holds count x (every worker's
  // replicas) elements; their reduction is split into that many parts of `count`, and local
  // replica j's output gets part (worker rank x local replicas + j): the global replica's. MEAN
  // divides by every worker's replicas. The backend's reduce_scatter runs it where it has one
  // (one worker); otherwise the reduction goes to a scratch buffer on the first input's device
  // and each part is copied from there.
  void ReduceScatter(chorus_reduce_op op, chorus_dtype dtype, size_t count,
                     const std::vector<chorus_buffer>& inputs,
                     const std::vector<chorus_buffer>& outputs);

  // Makes the pending and later operations fail with ABORTED naming `reason`: raises the abort
  // flag the plugins' waits on the operations' threads see (the interface has no abort()).
  // Safe from any thread. A time-out calls it too.
  void Abort(const std::string& reason);
  int in_flight() const { return in_flight_.load(); }
  bool WaitIdle(std::chrono::milliseconds timeout) const;

 private:
  struct Backend {
    std::string name;
    std::shared_ptr<PluginLibrary> library;
    const chorus_cross_device_ops_api* api = nullptr;
    chorus_cross_device_ops* handle = nullptr;
  };

  CrossDeviceOps();
  class Activity;
  void ThrowIfAborted(const char* what) const;
  const Backend& Route(chorus_collective_op op, chorus_dtype dtype, uint64_t bytes) const;
  // Begins an operation with `start` (chorus_status(chorus_request**)), waits for it under the
  // watchdog (base/watchdog.h) and throws its failure. Defined and used in cross_device_ops.cc.
  template <typename Start>
  void Run(const Backend& backend, const char* what, Start start);
  void Finish(const Backend& backend, chorus_status status, chorus_request* request,
              const char* what);
  [[noreturn]] void Fail(const Backend& backend, chorus_status status, const char* what,
                         const std::string& detail) const;
  void DivideOutputs(const ReduceSpec& spec, size_t divisor);
  void ReduceAcrossWorkers(chorus_reduce_op op, const std::vector<ReduceSpec>& specs);

  std::vector<Backend> backends_;
  std::vector<Device> devices_;
  std::unique_ptr<internal::AbortFlag> abort_flag_;
  std::atomic<int> in_flight_{0};
  std::atomic<bool> abort_claimed_{false};
  std::atomic<bool> aborted_{false};  // set after abort_reason_ is written
  std::string abort_reason_;
  double timeout_seconds_ = 300;
  Communicator* cross_worker_ = nullptr;
};

// Which cross-device ops a strategy uses, and why.
struct CrossDeviceOpsSelection {
  std::string name;    // the primary
  std::string source;  // "constructor argument", "CHORUS_CROSS_DEVICE_OPS", "AUTO: ..."
  // Every implementation to create (name first): under AUTO, each that scores best for some
  // operation and size on these devices.
  std::vector<std::string> names;
};

// constructor_arg (may be empty) > CHORUS_CROSS_DEVICE_OPS > the highest declared score for the
// devices' platform and number (AUTO): nccl's on cuda devices, reduction_to_one_device's on cpu
// devices, unless another plugin declares more. Throws Error(INVALID_ARGUMENT) for an unknown
// name, listing the available ones, and Error(UNSUPPORTED) when none serves the devices.
// The shape scores see for cross-device ops over `devices`: one host, a rank per device, the
// devices' platform as memory.
JobShape LocalShape(const std::vector<Device>& devices);

CrossDeviceOpsSelection SelectCrossDeviceOps(const Registry& registry,
                                             std::string_view constructor_arg,
                                             const std::vector<Device>& devices);

}  // namespace chorus

#endif  // CHORUS_CROSS_DEVICE_OPS_H_
