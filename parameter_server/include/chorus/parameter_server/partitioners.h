// tf.distribute.experimental.partitioners: how many shards a variable is split into along axis 0
// (the only axis that is split, as in TensorFlow), and the rows of each shard.
#ifndef CHORUS_PARAMETER_SERVER_PARTITIONERS_H_
#define CHORUS_PARAMETER_SERVER_PARTITIONERS_H_

#include <chorus/plugin.h>
#include <chorus/runtime/tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chorus::partitioners {

class Partitioner {
 public:
  virtual ~Partitioner() = default;
  // Shards along axis 0 for a variable of `shape` and `dtype` (1 for a scalar).
  virtual int NumShards(const Shape& shape, chorus_dtype dtype) const = 0;
  virtual std::string name() const = 0;
};

// min(num_shards, rows).
class FixedShardsPartitioner : public Partitioner {
 public:
  explicit FixedShardsPartitioner(int num_shards);
  int NumShards(const Shape& shape, chorus_dtype dtype) const override;
  std::string name() const override { return "FixedShardsPartitioner"; }

 private:
  int num_shards_;
};

// As many shards as keep each at least min_shard_bytes, at most max_shards.
class MinSizePartitioner : public Partitioner {
 public:
  explicit MinSizePartitioner(int64_t min_shard_bytes = 256 << 10, int max_shards = 1);
  int NumShards(const Shape& shape, chorus_dtype dtype) const override;
  std::string name() const override { return "MinSizePartitioner"; }

 private:
  int64_t min_shard_bytes_;
  int max_shards_;
};

// As few shards as keep each at most max_shard_bytes (a shard holds one row at least), at most
// max_shards when given.
class MaxSizePartitioner : public Partitioner {
 public:
  explicit MaxSizePartitioner(int64_t max_shard_bytes, std::optional<int> max_shards = {});
  int NumShards(const Shape& shape, chorus_dtype dtype) const override;
  std::string name() const override { return "MaxSizePartitioner"; }

 private:
  int64_t max_shard_bytes_;
  std::optional<int> max_shards_;
};

// Rows of each of num_shards shards of `rows` rows: rows / n each, and one more for the first
// rows % n (TensorFlow's arithmetic). 13 rows in 5 shards: 3, 3, 3, 2, 2.
std::vector<int64_t> ShardRows(int64_t rows, int num_shards);

}  // namespace chorus::partitioners

#endif  // CHORUS_PARAMETER_SERVER_PARTITIONERS_H_
