// The two reduction patterns, over any device enumerator.
#ifndef CHORUS_PLUGINS_HIERARCHICAL_HIERARCHICAL_ALL_REDUCE_H_
#define CHORUS_PLUGINS_HIERARCHICAL_HIERARCHICAL_ALL_REDUCE_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "device_api.h"
#include "scratch_buffer.h"

namespace chorus::hierarchical {

struct ReduceShape {
  size_t count = 0;
  chorus_dtype dtype = CHORUS_F32;
  chorus_reduce_op op = CHORUS_REDUCE_SUM;
};

// tf.distribute's aggregate_gradients_using_hierarchical_copy for one tensor: inputs[k] lives
// on devices[k] (all distinct). Each half of the devices reduces onto its root (roots.h), the
// root of A adds the two sums and hands the total to the root of B, and every output is copied
// from the root of its device's half (outputs elsewhere from A's root). Outputs may alias the
// inputs: they are written last, from scratch memory.
void HierarchicalAllReduce(const DeviceApi& api, ScratchCache& scratch,
                           std::span<const uint32_t> devices, std::span<const void* const> inputs,
                           std::span<const chorus_buffer> outputs, const ReduceShape& shape,
                           size_t root_index, chorus_stream* stream);

// For any other set of inputs: copies every input to `target`, reduces there, and copies the
// result to every output.
void ReduceToOneDevice(const DeviceApi& api, ScratchCache& scratch, uint32_t target,
                       std::span<const chorus_buffer> inputs,
                       std::span<const chorus_buffer> outputs, const ReduceShape& shape,
                       chorus_stream* stream);

}  // namespace chorus::hierarchical

#endif  // CHORUS_PLUGINS_HIERARCHICAL_HIERARCHICAL_ALL_REDUCE_H_
