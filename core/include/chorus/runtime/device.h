// Devices: a created device context of one enumerator (the core's cpu one or a plugin's), and
// the devices in it.
#ifndef CHORUS_DEVICE_H_
#define CHORUS_DEVICE_H_

#include <chorus/plugin.h>
#include <chorus/runtime/plugin_library.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace chorus {

class KvStore;

using Options = std::vector<std::pair<std::string, std::string>>;

struct DeviceInfo {
  chorus_device_kind kind = CHORUS_DEVICE_OTHER;
  uint32_t index = 0;
  std::string name;
  uint64_t memory_bytes = 0;
  int32_t numa_node = -1;
  std::string pci_bus_id;
  std::array<int32_t, 4> coords{-1, -1, -1, -1};
};

const char* DeviceKindName(chorus_device_kind kind);

// The job a device context is made for (chorus_job, ABI 1.5): what a plugin's own runtime needs
// to meet the job's other processes (a PJRT client's key-value exchange).
struct DeviceJob {
  std::string id;  // the same in every process of the job
  uint32_t task_index = 0;
  uint32_t num_tasks = 1;
  std::string host_id;
  std::shared_ptr<KvStore> store;  // each enumerator gets a view under a prefix of its own
  int64_t timeout_ms = 60000;      // how long a wait for the other processes may last
};

// A device context of one enumerator. Thread-safe as far as the enumerator is.
class DeviceEnumerator {
 public:
  // Creates a context of the plugin's (first) enumerator; throws Error with the plugin's message
  // on failure.
  static std::shared_ptr<DeviceEnumerator> Create(std::shared_ptr<PluginLibrary> library,
                                                  const Options& options = {});
  // The same for `api`, one of library->device_enumerators() (a 1.1 library may have several).
  // With `job`, the context is made for that job (chorus_device_context_create_args.job), its
  // store a view under "devices/<platform>/".
  static std::shared_ptr<DeviceEnumerator> Create(std::shared_ptr<PluginLibrary> library,
                                                  const chorus_device_enumerator_api& api,
                                                  const Options& options = {},
                                                  std::shared_ptr<const DeviceJob> job = nullptr);
  ~DeviceEnumerator();
  DeviceEnumerator(const DeviceEnumerator&) = delete;
  DeviceEnumerator& operator=(const DeviceEnumerator&) = delete;

  const std::string& platform() const { return platform_; }
  // What drives the devices, as the plugin describes it (1.4); "" when it says nothing.
  const std::string& description() const { return description_; }
  // The id of the job the context was made for; "" when it was made for this process alone.
  std::string job_id() const;
  const PluginLibrary& library() const { return *library_; }
  const chorus_device_enumerator_api& api() const { return *api_; }
  chorus_device_context* context() const { return context_; }

  uint32_t count() const { return static_cast<uint32_t>(infos_.size()); }
  const DeviceInfo& info(uint32_t index) const;

  void* Allocate(uint32_t device, size_t bytes) const;
  void Deallocate(uint32_t device, void* pointer) const;
  // device index or CHORUS_HOST_DEVICE on either side; synchronous.
  void Copy(uint32_t dst_device, void* dst, uint32_t src_device, const void* src,
            size_t bytes) const;
  // dst[i] = a[i] op b[i] on `device` (dst may equal a or b); synchronous.
  void Reduce(uint32_t device, void* dst, const void* a, const void* b, size_t count,
              chorus_dtype dtype, chorus_reduce_op op) const;
  void Divide(uint32_t device, void* data, size_t count, chorus_dtype dtype,
              uint64_t divisor) const;
  void Synchronize(uint32_t device) const;

 private:
  DeviceEnumerator() = default;
  [[noreturn]] void Throw(chorus_status status, const std::string& what) const;

  std::shared_ptr<PluginLibrary> library_;
  const chorus_device_enumerator_api* api_ = nullptr;
  chorus_device_context* context_ = nullptr;
  std::string platform_;
  std::string description_;
  std::vector<DeviceInfo> infos_;
  struct JobView;
  std::shared_ptr<JobView> job_;  // what args.job points to; outlives context_
};

// One device: an enumerator context and an index in it.
struct Device {
  std::shared_ptr<DeviceEnumerator> enumerator;
  uint32_t index = 0;

  const DeviceInfo& info() const { return enumerator->info(index); }
  const std::string& name() const { return info().name; }
  bool operator==(const Device& other) const {
    return enumerator == other.enumerator && index == other.index;
  }
};

// Memory on one device, freed when it goes out of scope.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device device, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  const Device& device() const { return device_; }
  chorus_buffer buffer() const { return chorus_buffer{device_.index, data_}; }

  // `bytes` bytes from `offset` on.
  void CopyFromHost(const void* src, size_t bytes, size_t offset = 0);
  void CopyToHost(void* dst, size_t bytes, size_t offset = 0) const;

 private:
  Device device_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Number of virtual CPU devices: CHORUS_CPU_DEVICES (1..1024), default 1.
uint32_t CpuDeviceCountFromEnvironment();

}  // namespace chorus

#endif  // CHORUS_DEVICE_H_
