// What the "pjrt" device enumerator's context holds, shared with the "tpu" cross-device ops of the
// same plugin (which the core hands that context), and the byte-level reads and writes of its
// memory both use.
#ifndef CHORUS_PLUGINS_TPU_PJRT_DEVICE_CONTEXT_H_
#define CHORUS_PLUGINS_TPU_PJRT_DEVICE_CONTEXT_H_

#include <chorus/plugin.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "handle_memory.h"
#include "pjrt_client.h"
#include "program_cache.h"

struct chorus_device_context {
  std::unique_ptr<chorus::tpu::PjrtClient> client;  // null when no PJRT plugin was found
  std::vector<std::string> names;
  std::vector<chorus_device_kind> kinds;
  chorus::tpu::HandleMemory memory;
  chorus::tpu::ProgramCache programs;
  std::chrono::milliseconds timeout{60000};
  std::string description;  // what describe() answers
};

namespace chorus::tpu {

// The bytes of [offset, offset + bytes) of an allocation, on the host. Unwritten memory reads as
// zeros.
std::vector<char> ReadBytes(const chorus_device_context& ctx, const HandleMemory::Place& place,
                            size_t bytes);

// Writes `bytes` from host memory at `data` to [offset, offset + bytes) of an allocation: a new
// PJRT buffer replaces the old one. A write of part of an allocation reads the rest first.
void WriteBytes(const chorus_device_context& ctx, const HandleMemory::Place& place,
                const void* data, size_t bytes);

// The PJRT device ids of `devices` (chorus device indices), for a program whose replica r runs on
// devices[r]; empty when devices[r] == r for every r in a client of one process, the client's
// default device assignment.
std::vector<int64_t> DeviceAssignment(const chorus_device_context& ctx,
                                      const std::vector<uint32_t>& devices);

// The allocation's current buffer, made (zeros) if it was never written.
std::shared_ptr<PjrtBuffer> CurrentBuffer(const chorus_device_context& ctx,
                                          const HandleMemory::Allocation& allocation);

}  // namespace chorus::tpu

#endif  // CHORUS_PLUGINS_TPU_PJRT_DEVICE_CONTEXT_H_
