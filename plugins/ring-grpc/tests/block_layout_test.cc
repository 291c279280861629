#include "block_layout.h"

#include <gtest/gtest.h>

#include <chorus/plugin_sdk.hpp>

namespace chorus::ring_grpc {
namespace {

TEST(BlockLayout, BlocksCoverEveryElementOnceInOrder) {
  for (size_t count : {0, 1, 2, 3, 7, 1001, 262147}) {
    for (size_t parts : {1, 2, 3, 4, 8}) {
      size_t next = 0;
      for (size_t b = 0; b < parts; ++b) {
        const ElementRange block = BlockOf(count, parts, b);
        EXPECT_EQ(block.begin, next) << count << " over " << parts << ", block " << b;
        EXPECT_LE(block.count, count / parts + 1);
        EXPECT_GE(block.count, count / parts);
        next += block.count;
      }
      EXPECT_EQ(next, count) << count << " over " << parts;
    }
  }
}

TEST(BlockLayout, FewerElementsThanPartsLeavesEmptyBlocksAtTheEnd) {
  EXPECT_EQ(BlockOf(2, 4, 0), (ElementRange{0, 1}));
  EXPECT_EQ(BlockOf(2, 4, 1), (ElementRange{1, 1}));
  EXPECT_EQ(BlockOf(2, 4, 2), (ElementRange{2, 0}));
  EXPECT_EQ(BlockOf(2, 4, 3), (ElementRange{2, 0}));
}

TEST(Segmentation, SegmentsAreWholeElementsAndCoverTheBlock) {
  const Segmentation segments(4, 10);  // 10 bytes of f32: 2 elements
  EXPECT_EQ(segments.elements_per_segment(), 2u);
  EXPECT_EQ(segments.SegmentCount(5), 3u);
  EXPECT_EQ(segments.Segment(5, 0), (ElementRange{0, 2}));
  EXPECT_EQ(segments.Segment(5, 1), (ElementRange{2, 2}));
  EXPECT_EQ(segments.Segment(5, 2), (ElementRange{4, 1}));
}

TEST(Segmentation, AnEmptyBlockIsOneEmptySegment) {
  const Segmentation segments(8, 1 << 20);
  EXPECT_EQ(segments.SegmentCount(0), 1u);
  EXPECT_EQ(segments.Segment(0, 0), (ElementRange{0, 0}));
}

TEST(Segmentation, ASegmentSmallerThanAnElementHoldsOneElement) {
  const Segmentation segments(8, 3);
  EXPECT_EQ(segments.elements_per_segment(), 1u);
  EXPECT_EQ(segments.SegmentCount(4), 4u);
}

TEST(Segmentation, MoreThan2To32SegmentsIsAnInvalidArgument) {
  const Segmentation segments(1, 1);
  try {
    segments.SegmentCount(size_t{1} << 33);
    FAIL() << "expected an error";
  } catch (const sdk::Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("segment_bytes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace chorus::ring_grpc
