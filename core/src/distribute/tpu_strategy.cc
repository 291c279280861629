#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/host_identity.h>
#include <chorus/collective/communication_options.h>
#include <chorus/distribute/tpu_strategy.h>
#include <chorus/rendezvous/rendezvous.h>
#include <chorus/runtime/device_program.h>
#include <chorus/runtime/registry.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <utility>

#include "distribute/job_rendezvous.h"

namespace chorus {
namespace {

std::vector<Device> DevicesOf(const std::shared_ptr<DeviceEnumerator>& enumerator) {
  std::vector<Device> devices;
  for (uint32_t i = 0; i < enumerator->count(); ++i) devices.push_back({enumerator, i});
  return devices;
}

std::vector<Device> TpuSystemDevices() {
  const auto enumerators = Registry::Global().DeviceEnumerators();
  for (const auto& enumerator : enumerators) {
    if (enumerator->count() > 0 && enumerator->info(0).kind == CHORUS_DEVICE_TPU) {
      return DevicesOf(enumerator);
    }
  }
  for (const auto& enumerator : enumerators) {
    if (enumerator->platform() == kPjrtPlatform && enumerator->count() > 0) {
      return DevicesOf(enumerator);
    }
  }
  return {};
}

// The job of this process's TPU system, when it spans several hosts: joined by
// InitializeTpuSystem, so that the device plugin's runtime (a PJRT client's key-value exchange)
// meets the other hosts through the job's store before any strategy exists; the TPUStrategy
// then joins the same rendezvous. Released by ShutdownTpuSystem, else at exit (where the
// leader's server waits for the others to leave, as a strategy's does).
struct TpuSystemJob {
  std::mutex mutex;
  std::shared_ptr<internal::JobRendezvous> rendezvous;
};
TpuSystemJob& SystemJob() {
  static TpuSystemJob* job = [] {
    std::atexit([] {
      std::shared_ptr<internal::JobRendezvous> last;
      {
        std::lock_guard<std::mutex> lock(SystemJob().mutex);
        last = std::move(SystemJob().rendezvous);
      }
      // The device plugin's context (in the registry, never destroyed) still holds the store:
      // say goodbye for it, or the leader would record this worker as lost.
      if (last) {
        try {
          LeaveTcpStore(*last->store());
        } catch (const Error&) {  // not a tcp store
        }
      }
    });
    return new TpuSystemJob;
  }();
  return *job;
}

// Joins the job of `resolver` (several workers) and has device contexts made for it from now
// on; returns its id.
std::string JoinTpuSystemJob(const TPUClusterResolver& resolver) {
  const double seconds = *CommunicationOptions{}.Resolved().timeout_seconds;
  auto rendezvous = internal::JobRendezvous::Join(
      resolver, std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)),
      "InitializeTpuSystem");
  auto job = std::make_shared<DeviceJob>();
  job->id = rendezvous->id();
  job->task_index = static_cast<uint32_t>(resolver.id_in_cluster());
  job->num_tasks = static_cast<uint32_t>(resolver.num_workers());
  job->host_id = HostIdentity();
  job->store = rendezvous->store();
  job->timeout_ms = static_cast<int64_t>(seconds * 1000);
  Registry::Global().SetDeviceJob(std::move(job));
  const std::string id = rendezvous->id();
  std::lock_guard<std::mutex> lock(SystemJob().mutex);
  SystemJob().rendezvous = std::move(rendezvous);
  return id;
}

}  // namespace

Topology InitializeTpuSystem(const TPUClusterResolver& resolver) {
  int workers = 1;
  for (const auto& [job, tasks] : resolver.cluster_spec()) {
    if (job == resolver.job_name()) workers = std::max(1, static_cast<int>(tasks.size()));
  }
  Topology topology;
  // The devices' runtime must meet the other hosts: join the job first, so that the device
  // context is made for it; one made for this process alone already (by DefaultDevices, say) is
  // made again.
  const std::string job = workers > 1 ? JoinTpuSystemJob(resolver) : std::string();
  topology.devices = TpuSystemDevices();
  if (workers > 1) {
    if (!topology.devices.empty() && topology.devices.front().enumerator->job_id() != job) {
      const std::string platform = topology.devices.front().enumerator->platform();
      topology.devices.clear();
      try {
        Registry::Global().ReleaseDeviceEnumerator(platform);
      } catch (const Error& e) {
        throw Error(e.status(),
                    std::string("InitializeTpuSystem: the devices were made for this process "
                                "alone and cannot be made again for the job of ") +
                        std::to_string(workers) + " hosts: " + e.what() +
                        " (call InitializeTpuSystem first)");
      }
      topology.devices = TpuSystemDevices();
    }
  }
  if (topology.devices.empty()) {
    // A plugin whose devices could not be made says why (a PJRT client that refused its
    // options, a host of the job that never came): that is the cause, not a missing plugin.
    std::string failures;
    for (const std::string& failure : Registry::Global().DeviceEnumeratorFailures()) {
      failures += "; " + failure;
    }
    if (!failures.empty()) {
      throw Error(CHORUS_UNAVAILABLE,
                  "InitializeTpuSystem: this process has no TPU or PJRT devices, because the "
                  "devices of a plugin could not be made" +
                      failures);
    }
    throw Error(CHORUS_NOT_FOUND,
                "InitializeTpuSystem: this process has no TPU or PJRT devices: set "
                "CHORUS_PJRT_PLUGIN to a PJRT plugin's path (or 'reference' for chorus's "
                "reference plugin), or TPU_LIBRARY_PATH to libtpu's, with chorus's tpu plugin "
                "loaded (chorus-info lists the plugins, their devices and why a device "
                "enumerator was not used)");
  }
  size_t dimensions = 0;
  for (const Device& device : topology.devices) {
    const auto& coords = device.info().coords;
    while (dimensions < coords.size() && coords[dimensions] >= 0) ++dimensions;
  }
  topology.mesh_shape.assign(dimensions, 0);
  for (const Device& device : topology.devices) {
    std::vector<int> coordinates;
    for (size_t d = 0; d < dimensions; ++d) {
      const int c = std::max(0, device.info().coords[d]);
      coordinates.push_back(c);
      topology.mesh_shape[d] = std::max(topology.mesh_shape[d], c + 1);
    }
    topology.device_coordinates.push_back(std::move(coordinates));
  }
  topology.num_tasks = workers;
  topology.num_tpus_per_task = static_cast<int>(topology.devices.size());
  return topology;
}

DeviceAssignment::DeviceAssignment(Topology topology,
                                   const std::vector<std::vector<int>>& core_assignment)
    : topology_(std::move(topology)) {
  if (core_assignment.empty()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "DeviceAssignment: no replicas in the core assignment");
  }
  for (size_t r = 0; r < core_assignment.size(); ++r) {
    const auto& want = core_assignment[r];
    const auto found =
        std::find(topology_.device_coordinates.begin(), topology_.device_coordinates.end(), want);
    std::string coordinates;
    for (int c : want) coordinates += (coordinates.empty() ? "" : ",") + std::to_string(c);
    if (want.empty() || found == topology_.device_coordinates.end()) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "DeviceAssignment: replica " + std::to_string(r) + " is at (" + coordinates +
                      "), where the topology has no device (mesh " +
                      std::to_string(topology_.mesh_shape.size()) +
                      "-dimensional; DeviceAssignment::Build picks devices by their order)");
    }
    const int device = static_cast<int>(found - topology_.device_coordinates.begin());
    if (std::find(replica_devices_.begin(), replica_devices_.end(), device) !=
        replica_devices_.end()) {
      throw Error(CHORUS_INVALID_ARGUMENT, "DeviceAssignment: the device at (" + coordinates +
                                               ") is given to two replicas; a replica needs a "
                                               "device of its own");
    }
    replica_devices_.push_back(device);
  }
}

DeviceAssignment DeviceAssignment::Build(const Topology& topology, int num_replicas) {
  const int available = static_cast<int>(topology.devices.size());
  if (num_replicas == -1) num_replicas = available;
  if (num_replicas < 1 || num_replicas > available) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "DeviceAssignment::Build: " + std::to_string(num_replicas) +
                    " replicas on a topology of " + std::to_string(available) +
                    " devices; give 1 to " + std::to_string(available) + " (or -1 for all)");
  }
  DeviceAssignment assignment;
  assignment.topology_ = topology;
  for (int d = 0; d < num_replicas; ++d) assignment.replica_devices_.push_back(d);
  return assignment;
}

int DeviceAssignment::Check(int replica, int logical_core) const {
  if (replica < 0 || replica >= num_replicas() || logical_core != 0) {
    throw Error(CHORUS_INVALID_ARGUMENT, "DeviceAssignment: replica " + std::to_string(replica) +
                                             ", logical core " + std::to_string(logical_core) +
                                             " of " + std::to_string(num_replicas()) +
                                             " replicas of one core each");
  }
  return replica_devices_[static_cast<size_t>(replica)];
}

const std::vector<int>& DeviceAssignment::coordinates(int replica, int logical_core) const {
  static const std::vector<int> kNone;
  const auto device = static_cast<size_t>(Check(replica, logical_core));
  return device < topology_.device_coordinates.size() ? topology_.device_coordinates[device]
                                                      : kNone;
}

int DeviceAssignment::tpu_ordinal(int replica, int logical_core) const {
  return Check(replica, logical_core);
}

std::vector<Device> DeviceAssignment::devices() const {
  std::vector<Device> devices;
  for (int device : replica_devices_)
    devices.push_back(topology_.devices.at(static_cast<size_t>(device)));
  return devices;
}

void ShutdownTpuSystem() {
  std::string platform;
  {
    const std::vector<Device> devices = TpuSystemDevices();
    bool joined = false;
    {
      std::lock_guard<std::mutex> lock(SystemJob().mutex);
      joined = SystemJob().rendezvous != nullptr;
    }
    if (devices.empty() && !joined) {
      throw Error(CHORUS_NOT_FOUND,
                  "ShutdownTpuSystem: this process has no TPU system to shut down");
    }
    if (!devices.empty()) platform = devices.front().enumerator->platform();
  }  // this function's own references go before the registry counts the others
  // (A system whose devices could not be made for its job has only the job to leave.)
  if (!platform.empty()) Registry::Global().ReleaseDeviceEnumerator(platform);
  // The job goes too, once no strategy holds it: the next InitializeTpuSystem joins anew.
  Registry::Global().SetDeviceJob(nullptr);
  std::shared_ptr<internal::JobRendezvous> job;
  std::lock_guard<std::mutex> lock(SystemJob().mutex);
  job = std::move(SystemJob().rendezvous);
}

TPUStrategy::TPUStrategy(const TPUClusterResolver& resolver, std::string_view cross_device_ops,
                         const CommunicationOptions& options)
    : TPUStrategy(resolver, InitializeTpuSystem(resolver), cross_device_ops, options) {}

TPUStrategy::TPUStrategy(const TPUClusterResolver& resolver,
                         const DeviceAssignment& device_assignment,
                         std::string_view cross_device_ops, const CommunicationOptions& options)
    : TPUStrategy(
          resolver,
          [&] {
            Topology topology = device_assignment.topology();
            topology.devices = device_assignment.devices();
            topology.device_coordinates.clear();
            for (int r = 0; r < device_assignment.num_replicas(); ++r) {
              topology.device_coordinates.push_back(device_assignment.coordinates(r));
            }
            topology.num_tpus_per_task = device_assignment.num_replicas();
            return topology;
          }(),
          cross_device_ops, options) {}

TPUStrategy::TPUStrategy(Topology topology, std::string_view cross_device_ops,
                         const CommunicationOptions& options)
    : TPUStrategy(TPUClusterResolver("local"), std::move(topology), cross_device_ops, options) {}

TPUStrategy::TPUStrategy(const TPUClusterResolver& resolver, Topology topology,
                         std::string_view cross_device_ops, const CommunicationOptions& options)
    : MultiWorkerMirroredStrategy(std::make_shared<TPUClusterResolver>(resolver), options,
                                  topology.devices, cross_device_ops),
      topology_(std::move(topology)) {}

CompiledStep TPUStrategy::Compile(const ReplicaProgram& program) const {
  if (program.num_parameters < 0 || program.steps_per_execution < 1) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "TPUStrategy::Compile: num_parameters " + std::to_string(program.num_parameters) +
                    " and steps_per_execution " + std::to_string(program.steps_per_execution) +
                    ": give 0 or more parameters and 1 or more steps");
  }
  if (num_replicas_in_sync() != static_cast<int>(devices().size())) {
    throw Error(CHORUS_UNSUPPORTED,
                "TPUStrategy::Compile: a compiled step's all-reduce spans the devices of one "
                "PJRT client, and this strategy spans " +
                    std::to_string(topology_.num_tasks) +
                    " hosts; run the step as a function (strategy.run(fn)), whose gradients "
                    "chorus sums across hosts");
  }
  CompiledStep compiled;
  compiled.program_ = program;
  const auto steps = static_cast<uint32_t>(program.steps_per_execution);
  const auto carried = static_cast<uint32_t>(program.num_parameters);
  std::shared_ptr<const DeviceProgram> device_program =
      DeviceProgram::Compile(devices(), "stablehlo", program.stablehlo, steps, carried);
  const std::vector<uint64_t>& arguments = device_program->argument_bytes();
  const std::vector<uint64_t>& results = device_program->result_bytes();
  const size_t inputs = (arguments.size() - carried) / steps;
  const size_t outputs = (results.size() - carried) / steps;
  compiled.parameter_bytes_.assign(arguments.begin(), arguments.begin() + carried);
  compiled.input_bytes_.assign(arguments.begin() + carried,
                               arguments.begin() + static_cast<std::ptrdiff_t>(carried + inputs));
  compiled.output_bytes_.assign(results.begin() + carried,
                                results.begin() + static_cast<std::ptrdiff_t>(carried + outputs));
  compiled.device_program_ = std::move(device_program);
  return compiled;
}

std::vector<std::vector<PerReplica>> TPUStrategy::run(
    const CompiledStep& step, const std::vector<Variable>& parameters,
    const std::vector<std::vector<PerReplica>>& inputs) {
  if (step.device_program_ == nullptr) {
    throw Error(CHORUS_INVALID_ARGUMENT, "TPUStrategy::run: the step was not compiled (Compile)");
  }
  const std::vector<Device>& replicas = devices();
  if (step.device_program_->replicas() != replicas) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "TPUStrategy::run: the step was compiled for another strategy's devices");
  }
  const size_t n = replicas.size();
  const int steps = step.program().steps_per_execution;
  if (parameters.size() != step.parameter_bytes().size()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "TPUStrategy::run: " + std::to_string(parameters.size()) +
                                             " parameters for a step of " +
                                             std::to_string(step.parameter_bytes().size()));
  }
  if (inputs.size() != static_cast<size_t>(steps)) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "TPUStrategy::run: inputs for " + std::to_string(inputs.size()) +
                    " steps; the step runs " + std::to_string(steps) +
                    " per dispatch (steps_per_execution): give each step's inputs");
  }
  std::vector<std::vector<void*>> arguments(n), results(n);
  for (size_t p = 0; p < parameters.size(); ++p) {
    const Variable& parameter = parameters[p];
    if (!parameter.defined() || parameter.strategy() != this ||
        parameter.components().size() != n) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "TPUStrategy::run: parameter " + std::to_string(p) +
                      (parameter.defined() ? " (" + parameter.name() + ")" : "") +
                      " is not a variable of this strategy with one copy per replica; create it "
                      "in strategy.scope()");
    }
    for (size_t r = 0; r < n; ++r) {
      const Tensor& copy = parameter.components()[r];
      if (copy.bytes() != step.parameter_bytes()[p]) {
        throw Error(CHORUS_INVALID_ARGUMENT,
                    "TPUStrategy::run: parameter " + std::to_string(p) + " (" + parameter.name() +
                        ") has " + std::to_string(copy.bytes()) + " bytes; the program takes " +
                        std::to_string(step.parameter_bytes()[p]));
      }
      arguments[r].push_back(copy.raw());
      results[r].push_back(copy.raw());
    }
  }
  // Inputs on the host (or on another device) are copied to the replicas' devices first; they
  // are held until the run ends.
  std::vector<Tensor> staged;
  for (int s = 0; s < steps; ++s) {
    const std::vector<PerReplica>& step_inputs = inputs[static_cast<size_t>(s)];
    if (step_inputs.size() != step.input_bytes().size()) {
      throw Error(CHORUS_INVALID_ARGUMENT, "TPUStrategy::run: step " + std::to_string(s) + " has " +
                                               std::to_string(step_inputs.size()) +
                                               " inputs; the program takes " +
                                               std::to_string(step.input_bytes().size()));
    }
    for (size_t k = 0; k < step_inputs.size(); ++k) {
      if (step_inputs[k].size() != n) {
        throw Error(CHORUS_INVALID_ARGUMENT,
                    "TPUStrategy::run: input " + std::to_string(k) + " of step " +
                        std::to_string(s) + " has " + std::to_string(step_inputs[k].size()) +
                        " replicas' values for " + std::to_string(n) + " replicas");
      }
      for (size_t r = 0; r < n; ++r) {
        Tensor value = step_inputs[k][r];
        if (value.bytes() != step.input_bytes()[k]) {
          throw Error(CHORUS_INVALID_ARGUMENT,
                      "TPUStrategy::run: input " + std::to_string(k) + " of step " +
                          std::to_string(s) + " on replica " + std::to_string(r) + " has " +
                          std::to_string(value.bytes()) + " bytes; the program takes " +
                          std::to_string(step.input_bytes()[k]));
        }
        if (!(value.device() == replicas[r])) {
          value = value.CopyTo(replicas[r]);
          staged.push_back(value);
        }
        arguments[r].push_back(value.raw());
      }
    }
  }
  std::vector<std::vector<std::vector<Tensor>>> outputs(
      static_cast<size_t>(steps), std::vector<std::vector<Tensor>>(step.output_bytes().size()));
  for (int s = 0; s < steps; ++s) {
    for (size_t j = 0; j < step.output_bytes().size(); ++j) {
      for (size_t r = 0; r < n; ++r) {
        const chorus_dtype dtype =
            j < step.program().output_dtypes.size() ? step.program().output_dtypes[j] : CHORUS_U8;
        const size_t size = chorus_dtype_size(dtype);
        if (size == 0 || step.output_bytes()[j] % size != 0) {
          throw Error(CHORUS_INVALID_ARGUMENT,
                      "TPUStrategy::run: output " + std::to_string(j) + " has " +
                          std::to_string(step.output_bytes()[j]) +
                          " bytes, not a whole number of its output_dtypes element");
        }
        Tensor out = Tensor::Uninitialized(replicas[r], dtype,
                                           {static_cast<int64_t>(step.output_bytes()[j] / size)});
        results[r].push_back(out.raw());
        outputs[static_cast<size_t>(s)][j].push_back(std::move(out));
      }
    }
  }
  step.device_program_->Execute(
      arguments, results,
      std::chrono::milliseconds(static_cast<int64_t>(DefaultTimeoutSeconds() * 1000)));
  std::vector<std::vector<PerReplica>> per_step(static_cast<size_t>(steps));
  for (size_t s = 0; s < outputs.size(); ++s) {
    for (auto& values : outputs[s]) per_step[s].emplace_back(std::move(values));
  }
  return per_step;
}

}  // namespace chorus
