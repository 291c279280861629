// How a ring operation cuts its elements: into one block per rank, and each block into segments
// (one message each) that are pipelined.
#ifndef CHORUS_PLUGINS_RING_GRPC_BLOCK_LAYOUT_H_
#define CHORUS_PLUGINS_RING_GRPC_BLOCK_LAYOUT_H_

#include <cstddef>
#include <cstdint>

namespace chorus::ring_grpc {

struct ElementRange {
  size_t begin = 0;  // first element
  size_t count = 0;  // number of elements
  bool operator==(const ElementRange&) const = default;
};

// Block `index` of `count` elements split into `parts` near-equal blocks: the first
// count % parts blocks hold one element more. Blocks may be empty (count < parts).
ElementRange BlockOf(size_t count, size_t parts, size_t index);

// Segments of segment_bytes (rounded down to whole elements, at least one element).
class Segmentation {
 public:
  Segmentation(size_t element_bytes, uint64_t segment_bytes);

  size_t elements_per_segment() const { return elements_per_segment_; }

  // Segments of a block of `block_elements`: at least 1, so that even an empty block is one
  // (empty) message and every step of every operation exchanges something. Fails with
  // INVALID_ARGUMENT when the count does not fit 32 bits (segment_bytes too small).
  uint32_t SegmentCount(size_t block_elements) const;

  // Elements of segment `index` of such a block, relative to the block's first element.
  ElementRange Segment(size_t block_elements, uint32_t index) const;

 private:
  size_t elements_per_segment_;
};

}  // namespace chorus::ring_grpc

#endif  // CHORUS_PLUGINS_RING_GRPC_BLOCK_LAYOUT_H_
