// The kit's reused host storage (tools/chorus-conformance/src/reused_bytes.h): a block given back
// comes back zeroed for the same size only, so AddressSanitizer still bounds a tensor exactly.
#include "reused_bytes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace chorus::conformance::internal {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool AllZero(const std::vector<unsigned char>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == 0; });
}

TEST(ReusedBytes, ABlockGivenBackComesBackZeroedForTheSameSize) {
  std::vector<unsigned char> first = TakeZeroedBytes(kMiB + 3);
  ASSERT_EQ(first.size(), kMiB + 3);
  EXPECT_TRUE(AllZero(first));
  std::fill(first.begin(), first.end(), 0xAB);
  const unsigned char* block = first.data();
  GiveBackBytes(std::move(first));

  std::vector<unsigned char> again = TakeZeroedBytes(kMiB + 3);
  EXPECT_EQ(again.data(), block) << "the block just given back is the one to reuse";
  EXPECT_EQ(again.size(), kMiB + 3);
  EXPECT_EQ(again.capacity(), kMiB + 3);
  EXPECT_TRUE(AllZero(again)) << "a reused block must be zeroed like a new one";
  GiveBackBytes(std::move(again));
}

TEST(ReusedBytes, ABlockIsNotReusedForAnotherSize) {
  std::vector<unsigned char> kept = TakeZeroedBytes(2 * kMiB);
  const unsigned char* block = kept.data();
  GiveBackBytes(std::move(kept));

  // A smaller tensor in the larger block would leave room past its end that AddressSanitizer
  // does not see as out of bounds.
  std::vector<unsigned char> smaller = TakeZeroedBytes(2 * kMiB - 1);
  EXPECT_NE(smaller.data(), block);
  EXPECT_EQ(smaller.capacity(), 2 * kMiB - 1);
  std::vector<unsigned char> same = TakeZeroedBytes(2 * kMiB);
  EXPECT_EQ(same.data(), block) << "the block stayed kept for its own size";
  GiveBackBytes(std::move(smaller));
  GiveBackBytes(std::move(same));
}

TEST(ReusedBytes, SmallAndEmptyRequestsWork) {
  EXPECT_TRUE(TakeZeroedBytes(0).empty());
  std::vector<unsigned char> small = TakeZeroedBytes(100);
  EXPECT_EQ(small.size(), 100u);
  EXPECT_TRUE(AllZero(small));
  GiveBackBytes(std::move(small));
  GiveBackBytes(std::vector<unsigned char>());
}

}  // namespace
}  // namespace chorus::conformance::internal
