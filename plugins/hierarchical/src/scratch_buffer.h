// Scratch memory on a device, freed when it goes out of scope (also when an error unwinds).
#ifndef CHORUS_PLUGINS_HIERARCHICAL_SCRATCH_BUFFER_H_
#define CHORUS_PLUGINS_HIERARCHICAL_SCRATCH_BUFFER_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "device_api.h"

namespace chorus::hierarchical {

class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  // `stream` is the one the buffer is used on: kernels queued there may still read or write
  // the buffer, so the destructor waits for them before it frees the memory.
  ScratchBuffer(const DeviceApi& api, uint32_t device, size_t bytes, chorus_stream* stream)
      : api_(&api), device_(device), bytes_(bytes), stream_(stream) {
    data_ = api.Allocate(device, bytes);
  }
  ~ScratchBuffer() { Release(); }

  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ScratchBuffer(ScratchBuffer&& other) noexcept { *this = std::move(other); }
  ScratchBuffer& operator=(ScratchBuffer&& other) noexcept {
    if (this != &other) {
      Release();
      api_ = std::exchange(other.api_, nullptr);
      device_ = other.device_;
      bytes_ = std::exchange(other.bytes_, 0);
      stream_ = other.stream_;
      data_ = std::exchange(other.data_, nullptr);
    }
    return *this;
  }

  void* data() const { return data_; }
  char* bytes_data() const { return static_cast<char*>(data_); }
  size_t size() const { return bytes_; }
  uint32_t device() const { return device_; }

 private:
  void Release() noexcept {
    if (data_ == nullptr) return;
    if (stream_ != nullptr && api_->CanSynchronize()) {
      try {
        api_->Synchronize(device_, stream_);
      } catch (...) {  // the error that unwinds us is the one to report
      }
    }
    api_->Deallocate(device_, data_);
    data_ = nullptr;
  }

  const DeviceApi* api_ = nullptr;
  uint32_t device_ = 0;
  size_t bytes_ = 0;
  chorus_stream* stream_ = nullptr;
  void* data_ = nullptr;
};

// Scratch buffers reused across the steps of one operation (the packs of a batch): slot s on
// device d grows to the largest size asked for and is freed with the cache.
class ScratchCache {
 public:
  ScratchCache(const DeviceApi& api, chorus_stream* stream) : api_(api), stream_(stream) {}

  // At least `bytes` bytes on `device`; NULL for 0 bytes. The contents are not kept.
  char* Get(uint32_t device, int slot, size_t bytes) {
    if (bytes == 0) return nullptr;
    for (Entry& entry : entries_) {
      if (entry.device == device && entry.slot == slot) {
        if (entry.buffer.size() < bytes) {
          entry.buffer = ScratchBuffer();  // free first: the peak stays one buffer
          entry.buffer = ScratchBuffer(api_, device, bytes, stream_);
        }
        return entry.buffer.bytes_data();
      }
    }
    entries_.push_back(Entry{device, slot, ScratchBuffer(api_, device, bytes, stream_)});
    return entries_.back().buffer.bytes_data();
  }

 private:
  struct Entry {
    uint32_t device;
    int slot;
    ScratchBuffer buffer;
  };
  const DeviceApi& api_;
  chorus_stream* stream_;
  std::vector<Entry> entries_;
};

}  // namespace chorus::hierarchical

#endif  // CHORUS_PLUGINS_HIERARCHICAL_SCRATCH_BUFFER_H_
