// The partitioners' arithmetic, as tf.distribute.experimental.partitioners computes it (through
// partitioned_variables' min_max_variable_partitioner and variable_axis_size_partitioner).
#include <chorus/base/error.h>
#include <chorus/parameter_server/partitioners.h>

#include <algorithm>
#include <cmath>

namespace chorus::partitioners {
namespace {

int64_t Rows(const Shape& shape) { return shape.empty() ? 1 : shape.front(); }

// Shards of as many whole rows as fit in shard_bytes (one row at least), as TensorFlow's
// partitioned_variables computes them; before any cap on the count.
int64_t ShardsOfBytes(const Shape& shape, chorus_dtype dtype, int64_t shard_bytes);

// Bytes of one row (one slice along axis 0).
double BytesPerRow(const Shape& shape, chorus_dtype dtype) {
  double bytes = static_cast<double>(chorus_dtype_size(dtype));
  for (size_t i = 1; i < shape.size(); ++i) bytes *= static_cast<double>(shape[i]);
  return bytes;
}

int64_t ShardsOfBytes(const Shape& shape, chorus_dtype dtype, int64_t shard_bytes) {
  if (shape.empty() || Rows(shape) == 0) return 1;
  const double bytes_per_row = BytesPerRow(shape, dtype);
  if (bytes_per_row == 0) return 1;
  const double rows_per_shard =
      std::max(1.0, std::floor(static_cast<double>(shard_bytes) / bytes_per_row));
  return static_cast<int64_t>(std::ceil(static_cast<double>(Rows(shape)) / rows_per_shard));
}

}  // namespace

FixedShardsPartitioner::FixedShardsPartitioner(int num_shards) : num_shards_(num_shards) {
  if (num_shards < 1) {
    throw Error(CHORUS_INVALID_ARGUMENT, "FixedShardsPartitioner: num_shards must be >= 1, got " +
                                             std::to_string(num_shards));
  }
}

int FixedShardsPartitioner::NumShards(const Shape& shape, chorus_dtype) const {
  if (shape.empty()) return 1;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(num_shards_, Rows(shape))));
}

MinSizePartitioner::MinSizePartitioner(int64_t min_shard_bytes, int max_shards)
    : min_shard_bytes_(min_shard_bytes), max_shards_(max_shards) {
  if (min_shard_bytes < 1 || max_shards < 1) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "MinSizePartitioner: min_shard_bytes and max_shards must be >= 1, got " +
                    std::to_string(min_shard_bytes) + " and " + std::to_string(max_shards));
  }
}

int MinSizePartitioner::NumShards(const Shape& shape, chorus_dtype dtype) const {
  const int64_t shards = ShardsOfBytes(shape, dtype, min_shard_bytes_);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(shards, max_shards_)));
}

MaxSizePartitioner::MaxSizePartitioner(int64_t max_shard_bytes, std::optional<int> max_shards)
    : max_shard_bytes_(max_shard_bytes), max_shards_(max_shards) {
  if (max_shard_bytes < 1 || (max_shards && *max_shards < 1)) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "MaxSizePartitioner: max_shard_bytes and max_shards must be >= 1");
  }
}

int MaxSizePartitioner::NumShards(const Shape& shape, chorus_dtype dtype) const {
  int64_t shards = ShardsOfBytes(shape, dtype, max_shard_bytes_);
  if (max_shards_) shards = std::min<int64_t>(shards, *max_shards_);
  return static_cast<int>(std::max<int64_t>(1, shards));
}

std::vector<int64_t> ShardRows(int64_t rows, int num_shards) {
  if (num_shards < 1 || rows < 0) {
    throw Error(CHORUS_INVALID_ARGUMENT, "ShardRows: " + std::to_string(rows) + " rows into " +
                                             std::to_string(num_shards) + " shards");
  }
  std::vector<int64_t> sizes;
  for (int i = 0; i < num_shards; ++i) {
    sizes.push_back(rows / num_shards + (i < rows % num_shards ? 1 : 0));
  }
  return sizes;
}

}  // namespace chorus::partitioners
