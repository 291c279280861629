// The partitioners' arithmetic, as TensorFlow's: only axis 0 is split, the first rows % n shards
// get one extra row.
#include <chorus/base/error.h>
#include <chorus/parameter_server/partitioners.h>
#include <gtest/gtest.h>

namespace chorus::partitioners {
namespace {

TEST(ShardRows, FirstShardsTakeTheRemainder) {
  EXPECT_EQ(ShardRows(13, 5), (std::vector<int64_t>{3, 3, 3, 2, 2}));
  EXPECT_EQ(ShardRows(10, 5), (std::vector<int64_t>{2, 2, 2, 2, 2}));
  EXPECT_EQ(ShardRows(1, 1), (std::vector<int64_t>{1}));
  EXPECT_EQ(ShardRows(0, 2), (std::vector<int64_t>{0, 0}));
  EXPECT_THROW(ShardRows(4, 0), Error);
}

TEST(FixedShardsPartitioner, NoMoreShardsThanRows) {
  const FixedShardsPartitioner partitioner(5);
  EXPECT_EQ(partitioner.NumShards({13, 4}, CHORUS_F32), 5);
  EXPECT_EQ(partitioner.NumShards({3, 4}, CHORUS_F32), 3);
  EXPECT_EQ(partitioner.NumShards({}, CHORUS_F32), 1);
  EXPECT_THROW(FixedShardsPartitioner(0), Error);
}

TEST(MinSizePartitioner, ShardsOfAtLeastMinBytesUpToMaxShards) {
  // TensorFlow's own example: f32 [1024, 1024] with 256 KiB shards is 16 shards.
  EXPECT_EQ(MinSizePartitioner(256 << 10, 100).NumShards({1024, 1024}, CHORUS_F32), 16);
  EXPECT_EQ(MinSizePartitioner(256 << 10, 4).NumShards({1024, 1024}, CHORUS_F32), 4);
  // Smaller than one shard's minimum: one shard.
  EXPECT_EQ(MinSizePartitioner(256 << 10, 8).NumShards({10, 10}, CHORUS_F32), 1);
  // A row larger than the minimum: one row a shard, at most max_shards.
  EXPECT_EQ(MinSizePartitioner(16, 3).NumShards({5, 8}, CHORUS_F32), 3);
}

TEST(MaxSizePartitioner, ShardsOfAtMostMaxBytes) {
  // 100 rows of 40 bytes, at most 400 bytes a shard: 10 rows each, 10 shards.
  EXPECT_EQ(MaxSizePartitioner(400).NumShards({100, 10}, CHORUS_F32), 10);
  EXPECT_EQ(MaxSizePartitioner(400, 4).NumShards({100, 10}, CHORUS_F32), 4);
  // One row larger than the maximum: a row a shard.
  EXPECT_EQ(MaxSizePartitioner(8).NumShards({6, 10}, CHORUS_F32), 6);
  EXPECT_EQ(MaxSizePartitioner(1 << 20).NumShards({6, 10}, CHORUS_F32), 1);
}

}  // namespace
}  // namespace chorus::partitioners
