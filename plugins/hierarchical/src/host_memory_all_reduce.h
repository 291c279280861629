// The hierarchical all-reduce on host memory (the cpu enumerator's devices), fused: the same
// arithmetic as HierarchicalAllReduce (each half summed onto its root in the same order, then the
// two sums added, through the enumerator's reduce kernel), but chunk by chunk in small buffers that
// stay in the cache, so every input is read once and every output written once (the kernel path
// copies each input into scratch first and copies the total back out), with the chunks shared
// among threads. The results are the same bits as the kernel path's.
#ifndef CHORUS_PLUGINS_HIERARCHICAL_HOST_MEMORY_ALL_REDUCE_H_
#define CHORUS_PLUGINS_HIERARCHICAL_HOST_MEMORY_ALL_REDUCE_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <span>

#include "device_api.h"
#include "hierarchical_all_reduce.h"

namespace chorus::hierarchical {

// Whether the fused path may run: host memory, no stream, and every output either is one of the
// inputs exactly (in place) or overlaps none of them (the fused path writes each chunk of the
// outputs after reading that chunk of the inputs, not after reading everything).
bool CanFuseOnHost(const DeviceApi& api, std::span<const void* const> inputs,
                   std::span<const chorus_buffer> outputs, size_t bytes, chorus_stream* stream);

// inputs[k] lives on devices[k]; n = devices.size() >= 2. Roots as ChooseRoots(n, root_index).
void HostMemoryAllReduce(const DeviceApi& api, std::span<const uint32_t> devices,
                         std::span<const void* const> inputs,
                         std::span<const chorus_buffer> outputs, const ReduceShape& shape,
                         size_t root_index);

}  // namespace chorus::hierarchical

#endif  // CHORUS_PLUGINS_HIERARCHICAL_HOST_MEMORY_ALL_REDUCE_H_
