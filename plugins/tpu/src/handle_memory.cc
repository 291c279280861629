#include "handle_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <cstring>

namespace chorus::tpu {
namespace {

size_t Reserved(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (std::max<size_t>(bytes, 1) + page - 1) / page * page;
}

}  // namespace

HandleMemory::~HandleMemory() {
  for (const auto& [base, allocation] : allocations_) {
    munmap(reinterpret_cast<void*>(base), Reserved(allocation.bytes));
  }
}

void* HandleMemory::Allocate(uint32_t device, size_t bytes) {
  void* base =
      mmap(nullptr, Reserved(bytes), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    sdk::Fail(CHORUS_OUT_OF_MEMORY, "pjrt allocate: cannot reserve ", bytes,
              " bytes of address space: ", std::strerror(errno));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_[reinterpret_cast<uintptr_t>(base)] =
      Allocation{device, bytes, std::make_shared<Contents>()};
  return base;
}

void HandleMemory::Deallocate(uint32_t device, void* base) {
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = allocations_.find(reinterpret_cast<uintptr_t>(base));
    if (found == allocations_.end() || found->second.device != device) {
      sdk::Fail(CHORUS_INVALID_ARGUMENT, "pjrt deallocate: ", base,
                " is not an allocation of device ", device);
    }
    bytes = found->second.bytes;
    allocations_.erase(found);  // drops this reference to the PJRT buffer
  }
  munmap(base, Reserved(bytes));
}

HandleMemory::Place HandleMemory::Find(uint32_t device, const void* address, size_t bytes,
                                       const char* what) const {
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = allocations_.upper_bound(at);
  if (found != allocations_.begin()) {
    --found;
    const Allocation& allocation = found->second;
    const size_t offset = at - found->first;
    if (allocation.device == device && offset <= allocation.bytes &&
        bytes <= allocation.bytes - offset) {
      return Place{offset, allocation};
    }
  }
  sdk::Fail(CHORUS_INVALID_ARGUMENT, "pjrt ", what, ": ", bytes, " bytes at ", address,
            " are not inside one allocation of device ", device,
            " (PJRT device memory is only what this enumerator allocated)");
}

size_t HandleMemory::allocation_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocations_.size();
}

}  // namespace chorus::tpu
