// The registry: the core's builtin plugin plus every plugin the loader accepted, and every
// implementation they provide, found by name. Which one runs an operation is selection's business
// (chorus/collective/selection.h).
#ifndef CHORUS_REGISTRY_H_
#define CHORUS_REGISTRY_H_

#include <chorus/runtime/device.h>
#include <chorus/runtime/loader.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

// Names of the core's builtin backends.
inline constexpr const char* kBuiltinPluginName = "core";
inline constexpr const char* kCoreRingName = "core_ring";
inline constexpr const char* kCoreRingPairName = "ring@tcp";  // another name of core_ring
inline constexpr const char* kCpuPlatform = "cpu";
inline constexpr const char* kReductionToOneDevice = "reduction_to_one_device";

class Registry {
 public:
  // Loads plugins as `options` say. The builtin plugin is always first.
  explicit Registry(const LoaderOptions& options);

  // The process-wide registry, from the environment, built on first use.
  static Registry& Global();

  const std::vector<std::shared_ptr<PluginLibrary>>& plugins() const { return plugins_; }
  const std::vector<Rejection>& rejected() const { return discovery_.rejected; }
  const std::vector<std::string>& searched_dirs() const { return discovery_.searched_dirs; }
  // Folders of the search path that exist but could not be listed, each with why.
  const std::vector<Rejection>& unreadable_dirs() const { return discovery_.unreadable_dirs; }

  // Plugin by its name, or nullptr.
  std::shared_ptr<PluginLibrary> FindPlugin(std::string_view name) const;

  // One implementation of an interface and the plugin it comes from. Names are unique within
  // an interface across the registry: a later plugin's implementation of a name taken already
  // is left out, with a note in notes().
  template <typename Api>
  struct Implementation {
    std::shared_ptr<PluginLibrary> plugin;
    const Api* api = nullptr;
    // For a collective "algorithm@transport" the core made (plugin is then the builtin, which
    // runs it): the plugins of its algorithm and its transport. Empty otherwise.
    std::vector<std::shared_ptr<PluginLibrary>> parts;
  };
  using CollectiveImplementation = Implementation<chorus_collective_api>;
  using CrossDeviceOpsImplementation = Implementation<chorus_cross_device_ops_api>;
  using AlgorithmImplementation = Implementation<chorus_algorithm_api>;
  using TransportImplementation = Implementation<chorus_transport_api>;

  // Every implementation, in plugin order (builtin first). The collectives end with one
  // "algorithm@transport" per algorithm and transport loaded (src/runtime/algorithm_pairs.h), all
  // but ring@tcp, which is the builtin core_ring.
  const std::vector<CollectiveImplementation>& collectives() const { return collectives_; }
  const std::vector<AlgorithmImplementation>& algorithms() const { return algorithms_; }
  const std::vector<TransportImplementation>& transports() const { return transports_; }
  const std::vector<CrossDeviceOpsImplementation>& cross_device_ops() const {
    return cross_device_ops_;
  }
  // What the registry left out and why (a name given twice).
  const std::vector<std::string>& notes() const { return notes_; }

  // Names of every cross-device ops / collective available (builtin first).
  std::vector<std::string> CrossDeviceOpsNames() const;
  std::vector<std::string> CollectiveNames() const;
  // The implementation called `name`: its own name, or its plugin's name when that plugin has
  // exactly one of the interface. Throws Error(INVALID_ARGUMENT) naming `what` (e.g.
  // "CHORUS_CROSS_DEVICE_OPS") and listing the available names, with the reason a file of that
  // name was rejected, if one was.
  CrossDeviceOpsImplementation FindCrossDeviceOps(std::string_view name,
                                                  std::string_view what) const;
  // "ring@tcp" finds core_ring.
  CollectiveImplementation FindCollective(std::string_view name, std::string_view what) const;
  TransportImplementation FindTransport(std::string_view name, std::string_view what) const;

  // The cpu device context (CHORUS_CPU_DEVICES devices) and, lazily, one context per plugin
  // enumerator. An enumerator whose create fails is left out with a logged reason.
  std::shared_ptr<DeviceEnumerator> CpuDevices() const;
  std::vector<std::shared_ptr<DeviceEnumerator>> DeviceEnumerators() const;
  // Destroys the device context of the plugin enumerator of `platform` (what ShutdownTpuSystem
  // does to the PJRT client and its compiled programs); the next DeviceEnumerators() creates it
  // anew. Throws Error(UNAVAILABLE) when something else (a strategy, a variable, a
  // tensor on its devices) still holds it, and NOT_FOUND when no enumerator has that platform.
  void ReleaseDeviceEnumerator(std::string_view platform);

  // Device contexts made from now on are made for `job` (chorus_job, ABI 1.5), or for this
  // process alone with nullptr. A context made already keeps what it was made for: release it
  // (ReleaseDeviceEnumerator) to have it made again.
  void SetDeviceJob(std::shared_ptr<const DeviceJob> job);
  // Why the plugin enumerators whose contexts could not be made (their last try) were left out:
  // "devices 'pjrt' of plugin tpu: <the plugin's message>", one line each.
  std::vector<std::string> DeviceEnumeratorFailures() const;

  // Default devices: every accelerator (GPU/TPU) when there is one, else the cpu devices.
  std::vector<Device> DefaultDevices() const;

 private:
  void Index(const std::shared_ptr<PluginLibrary>& plugin);
  void IndexAlgorithmPairs();

  Discovery discovery_;
  std::vector<std::shared_ptr<PluginLibrary>> plugins_;
  std::vector<CollectiveImplementation> collectives_;
  std::vector<CrossDeviceOpsImplementation> cross_device_ops_;
  std::vector<AlgorithmImplementation> algorithms_;
  std::vector<TransportImplementation> transports_;
  std::vector<std::shared_ptr<void>> algorithm_pairs_;  // internal::AlgorithmPair, owned
  std::vector<std::string> notes_;
  // One slot per enumerator (the cpu one first); a released slot's context is null until the
  // next DeviceEnumerators() creates it again.
  struct EnumeratorSlot {
    std::shared_ptr<PluginLibrary> library;
    const chorus_device_enumerator_api* api = nullptr;
    std::shared_ptr<DeviceEnumerator> enumerator;
    // Why the last try to make the context failed ("" when it did not); such a context is
    // tried again only for another job (SetDeviceJob).
    std::string failure;
    uint64_t failed_for_job = 0;  // job_generation_ of the failed try
  };
  mutable std::mutex enumerators_mutex_;
  mutable bool enumerators_created_ = false;
  mutable std::vector<EnumeratorSlot> enumerators_;
  std::shared_ptr<const DeviceJob> device_job_;  // under enumerators_mutex_
  uint64_t job_generation_ = 0;                  // SetDeviceJob calls, under the mutex
};

}  // namespace chorus

#endif  // CHORUS_REGISTRY_H_
