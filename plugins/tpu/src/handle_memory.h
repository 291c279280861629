// Device memory whose buffers are PJRT handles, behind addresses chorus can offset.
//
// A PJRT buffer is an immutable handle, while chorus's ABI hands device memory around as an
// address that callers offset (a tensor's slice, a part of a gathered buffer). So each allocation
// reserves a range of address space that is never readable (PROT_NONE: a stray host access
// faults at once instead of reading garbage), and the enumerator maps any address in it to the
// allocation and an offset. The allocation holds the PJRT buffer with its current contents: a
// write makes a new buffer and replaces the old one ("in place" means "the same allocation").
#ifndef CHORUS_PLUGINS_TPU_HANDLE_MEMORY_H_
#define CHORUS_PLUGINS_TPU_HANDLE_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "pjrt_client.h"

namespace chorus::tpu {

class HandleMemory {
 public:
  // What an allocation holds: its contents (no buffer until the first write; reads of unwritten
  // bytes give zeros). A write holds `mutex` from reading the old contents to storing the new,
  // so that writes to two parts of one allocation do not lose each other.
  struct Contents {
    std::mutex mutex;
    std::shared_ptr<PjrtBuffer> buffer;
  };
  struct Allocation {
    uint32_t device = 0;
    size_t bytes = 0;
    std::shared_ptr<Contents> contents;
  };
  // An address resolved: the allocation and the offset of the address in it.
  struct Place {
    size_t offset = 0;
    Allocation allocation;
  };

  HandleMemory() = default;
  ~HandleMemory();
  HandleMemory(const HandleMemory&) = delete;
  HandleMemory& operator=(const HandleMemory&) = delete;

  // Reserves `bytes` of address space on `device` (at least one byte, so that every allocation
  // has an address of its own). Throws OUT_OF_MEMORY when the reservation fails.
  void* Allocate(uint32_t device, size_t bytes);
  // Releases an allocation by its base address; INVALID_ARGUMENT for any other address.
  void Deallocate(uint32_t device, void* base);
  // The allocation holding [address, address + bytes) on `device`; INVALID_ARGUMENT naming the
  // address when no allocation of that device holds the whole range.
  Place Find(uint32_t device, const void* address, size_t bytes, const char* what) const;
  size_t allocation_count() const;

 private:
  mutable std::mutex mutex_;
  std::map<uintptr_t, Allocation> allocations_;  // by base address
};

}  // namespace chorus::tpu

#endif  // CHORUS_PLUGINS_TPU_HANDLE_MEMORY_H_
