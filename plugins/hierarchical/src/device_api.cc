#include "device_api.h"

#include <chorus/plugin_sdk.hpp>
#include <string_view>

namespace chorus::hierarchical {

using sdk::Fail;

std::string DeviceName(uint32_t device) {
  return device == CHORUS_HOST_DEVICE ? std::string("host") : "device " + std::to_string(device);
}

DeviceApi::DeviceApi(const chorus_device_enumerator_api* api, chorus_device_context* context,
                     const char* (*last_error)(void))
    : api_(api), context_(context), last_error_(last_error) {
  if (api == nullptr)
    Fail(CHORUS_INVALID_ARGUMENT, "hierarchical_copy create: devices_api is NULL");
  if (context == nullptr) {
    Fail(CHORUS_INVALID_ARGUMENT,
         "hierarchical_copy create: devices (the enumerator context) is NULL");
  }
  const char* platform =
      CHORUS_HAS_FIELD(api, chorus_device_enumerator_api, platform) && api->platform != nullptr
          ? api->platform
          : "?";
  if (!CHORUS_HAS_FIELD(api, chorus_device_enumerator_api, reduce) ||
      api->device_count == nullptr || api->allocate == nullptr || api->deallocate == nullptr ||
      api->copy == nullptr || api->reduce == nullptr) {
    Fail(CHORUS_UNSUPPORTED, "hierarchical_copy: the '", platform,
         "' device enumerator lacks device_count, allocate, deallocate, copy or reduce");
  }
  host_memory_ = std::string_view(platform) == "cpu";
}

void DeviceApi::Failed(chorus_status status, const std::string& what) const {
  const char* detail = last_error_ != nullptr ? last_error_() : nullptr;
  if (status == CHORUS_OK) status = CHORUS_INTERNAL;
  Fail(status, "hierarchical_copy: ", what, " failed: ",
       detail != nullptr && *detail != '\0' ? detail : "(the device enumerator gave no message)");
}

uint32_t DeviceApi::DeviceCount() const {
  uint32_t count = 0;
  const chorus_status status = api_->device_count(context_, &count);
  if (status != CHORUS_OK) Failed(status, "device_count");
  return count;
}

void* DeviceApi::Allocate(uint32_t device, size_t bytes) const {
  if (bytes == 0) return nullptr;
  void* pointer = nullptr;
  const chorus_status status = api_->allocate(context_, device, bytes, &pointer);
  const auto what = [&] {
    return "allocating " + std::to_string(bytes) + " bytes of scratch on " + DeviceName(device);
  };
  if (status != CHORUS_OK) Failed(status, what());
  if (pointer == nullptr) Fail(CHORUS_INTERNAL, "hierarchical_copy: ", what(), " returned NULL");
  return pointer;
}

void DeviceApi::Deallocate(uint32_t device, void* pointer) const noexcept {
  if (pointer == nullptr) return;
  if (api_->deallocate(context_, device, pointer) != CHORUS_OK &&
      sdk::LogEnabled(CHORUS_LOG_WARN)) {
    const char* detail = last_error_ != nullptr ? last_error_() : nullptr;
    try {
      sdk::Log(CHORUS_LOG_WARN, "hierarchical_copy: freeing scratch on " + DeviceName(device) +
                                    " failed: " + (detail != nullptr ? detail : ""));
    } catch (...) {
    }
  }
}

void DeviceApi::Copy(uint32_t dst_device, void* dst, uint32_t src_device, const void* src,
                     size_t bytes, chorus_stream* stream) const {
  if (bytes == 0 || (dst_device == src_device && dst == src)) return;
  chorus_copy_args args{};
  args.struct_size = sizeof(args);
  args.dst_device = dst_device;
  args.dst = dst;
  args.src_device = src_device;
  args.src = src;
  args.bytes = bytes;
  args.stream = stream;
  const chorus_status status = api_->copy(context_, &args);
  if (status != CHORUS_OK) {
    Failed(status, "copy of " + std::to_string(bytes) + " bytes from " + DeviceName(src_device) +
                       " to " + DeviceName(dst_device));
  }
}

void DeviceApi::Reduce(uint32_t device, void* dst, const void* a, const void* b, size_t count,
                       chorus_dtype dtype, chorus_reduce_op op, chorus_stream* stream) const {
  if (count == 0) return;
  chorus_reduce_kernel_args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.dst = dst;
  args.a = a;
  args.b = b;
  args.count = count;
  args.dtype = dtype;
  args.op = op;
  args.stream = stream;
  const chorus_status status = api_->reduce(context_, &args);
  if (status != CHORUS_OK) {
    Failed(status, "reduce kernel on " + DeviceName(device) + " (" + std::to_string(count) +
                       " elements of dtype " + std::to_string(static_cast<int>(dtype)) + ")");
  }
}

bool DeviceApi::CanSynchronize() const {
  return CHORUS_HAS_FIELD(api_, chorus_device_enumerator_api, synchronize) &&
         api_->synchronize != nullptr;
}

void DeviceApi::Synchronize(uint32_t device, chorus_stream* stream) const {
  const chorus_status status = api_->synchronize(context_, device, stream);
  if (status != CHORUS_OK) Failed(status, "synchronize on " + DeviceName(device));
}

}  // namespace chorus::hierarchical
