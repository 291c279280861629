// The "cuda" device enumerator (plugin.h interface 1): CUDA devices, their memory, and copy,
// reduce and divide kernels, usable by any cross-device ops (reduction_to_one_device,
// hierarchical_copy) and by the nccl collective. A chorus_stream* of this enumerator is a
// cudaStream_t of the device an operation runs on; NULL is the legacy default stream, and a call
// with it completes before it returns.
//
// No GPU or no driver is not an error: the enumerator then has zero devices, and says why once
// through the host's log.
#ifndef CHORUS_NCCL_CUDA_DEVICES_H_
#define CHORUS_NCCL_CUDA_DEVICES_H_

#include <chorus/plugin.h>

#include <string>

namespace chorus::nccl {

const chorus_device_enumerator_api* CudaDevicesTable();
// Why there are no CUDA devices ("" when there are some); set by the first count.
std::string NoDeviceReason();
// The number of CUDA devices (0 without GPU or driver).
int CudaDeviceCount();

// Restores the caller's current CUDA device when an entry point of the plugin returns: the entry
// points call cudaSetDevice, and a caller's own launches must not land on another GPU afterwards.
// A thread with no current CUDA context has no device to restore and is left as the call set it.
class CurrentDeviceScope {
 public:
  CurrentDeviceScope();
  ~CurrentDeviceScope();
  CurrentDeviceScope(const CurrentDeviceScope&) = delete;
  CurrentDeviceScope& operator=(const CurrentDeviceScope&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace chorus::nccl

#endif  // CHORUS_NCCL_CUDA_DEVICES_H_
