// The device enumerator this plugin works over: its kernels, with every failure turned into a
// chorus::sdk::Error that quotes the enumerator's own message.
#ifndef CHORUS_PLUGINS_HIERARCHICAL_DEVICE_API_H_
#define CHORUS_PLUGINS_HIERARCHICAL_DEVICE_API_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace chorus::hierarchical {

class DeviceApi {
 public:
  // Checks that the table holds every kernel this plugin calls.
  DeviceApi(const chorus_device_enumerator_api* api, chorus_device_context* context,
            const char* (*last_error)(void));

  uint32_t DeviceCount() const;

  // bytes == 0 gives NULL without calling the enumerator.
  void* Allocate(uint32_t device, size_t bytes) const;
  // Never throws: used by destructors. A failure is logged.
  void Deallocate(uint32_t device, void* pointer) const noexcept;

  // Skips empty copies and copies of a buffer onto itself.
  void Copy(uint32_t dst_device, void* dst, uint32_t src_device, const void* src, size_t bytes,
            chorus_stream* stream) const;

  // dst = a op b, elementwise, on `device`. Skips count == 0.
  void Reduce(uint32_t device, void* dst, const void* a, const void* b, size_t count,
              chorus_dtype dtype, chorus_reduce_op op, chorus_stream* stream) const;

  bool CanSynchronize() const;
  void Synchronize(uint32_t device, chorus_stream* stream) const;

  // The devices' memory is plain host memory: the enumerator is the core's "cpu" platform
  // (plugin.h, chorus_capabilities.memory), so a NULL-stream operation may read and write it
  // directly and complete before it returns.
  bool host_memory() const { return host_memory_; }

 private:
  [[noreturn]] void Failed(chorus_status status, const std::string& what) const;

  const chorus_device_enumerator_api* api_;
  chorus_device_context* context_;
  const char* (*last_error_)(void);
  bool host_memory_ = false;
};

// "device 3", or "host" for CHORUS_HOST_DEVICE.
std::string DeviceName(uint32_t device);

}  // namespace chorus::hierarchical

#endif  // CHORUS_PLUGINS_HIERARCHICAL_DEVICE_API_H_
