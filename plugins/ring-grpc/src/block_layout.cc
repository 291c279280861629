#include "block_layout.h"

#include <algorithm>
#include <chorus/plugin_sdk.hpp>

namespace chorus::ring_grpc {

ElementRange BlockOf(size_t count, size_t parts, size_t index) {
  const size_t base = count / parts;
  const size_t extra = count % parts;
  return ElementRange{index * base + std::min(index, extra), base + (index < extra ? 1 : 0)};
}

Segmentation::Segmentation(size_t element_bytes, uint64_t segment_bytes)
    : elements_per_segment_(
          static_cast<size_t>(std::max<uint64_t>(1, segment_bytes / element_bytes))) {}

uint32_t Segmentation::SegmentCount(size_t block_elements) const {
  const size_t segments = block_elements == 0
                              ? 1
                              : block_elements / elements_per_segment_ +
                                    (block_elements % elements_per_segment_ != 0 ? 1 : 0);
  if (segments > UINT32_MAX) {
    sdk::Fail(CHORUS_INVALID_ARGUMENT, "a block of ", block_elements, " elements makes ", segments,
              " segments of ", elements_per_segment_,
              " elements, more than 2^32; raise the segment_bytes option");
  }
  return static_cast<uint32_t>(segments);
}

ElementRange Segmentation::Segment(size_t block_elements, uint32_t index) const {
  const size_t begin = std::min(block_elements, size_t{index} * elements_per_segment_);
  return ElementRange{begin, std::min(elements_per_segment_, block_elements - begin)};
}

}  // namespace chorus::ring_grpc
