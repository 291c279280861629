#include "buffer_pool.h"

#include <gtest/gtest.h>

#include <string>

namespace chorus::ring_grpc {
namespace {

TEST(BufferPool, AnEmptyPoolGivesNewBuffers) {
  BufferPool pool(4, 1 << 20);
  EXPECT_TRUE(pool.Take().empty());
}

TEST(BufferPool, AGivenBufferComesBackEmptyWithItsCapacity) {
  BufferPool pool(4, 1 << 20);
  std::string buffer(256 * 1024, 'x');
  const size_t capacity = buffer.capacity();
  pool.Give(std::move(buffer));
  const std::string again = pool.Take();
  EXPECT_TRUE(again.empty());
  EXPECT_EQ(again.capacity(), capacity);
  EXPECT_EQ(pool.Take().capacity(), std::string().capacity());  // it was the only one
}

TEST(BufferPool, KeepsNeitherSmallNorHugeBuffersNorMoreThanItsCount) {
  BufferPool pool(2, 1 << 20);
  pool.Give(std::string(100, 'x'));      // small: cheap to allocate anyway
  pool.Give(std::string(2 << 20, 'x'));  // larger than the pool's limit
  EXPECT_EQ(pool.Take().capacity(), std::string().capacity());
  for (int i = 0; i < 3; ++i) pool.Give(std::string(128 * 1024, 'x'));
  EXPECT_GE(pool.Take().capacity(), 128u * 1024);
  EXPECT_GE(pool.Take().capacity(), 128u * 1024);
  EXPECT_EQ(pool.Take().capacity(), std::string().capacity());  // the third was dropped
}

}  // namespace
}  // namespace chorus::ring_grpc
