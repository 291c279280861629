#include <chorus/base/error.h>
#include <chorus/distribute/dataset.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <utility>

namespace chorus {

struct Dataset::Examples {
  Shape example_shape;
  int64_t example_size = 0;  // NumElements(example_shape)
  std::vector<float> features;
  std::vector<int32_t> labels;
};

namespace {

[[noreturn]] void Fail(const std::string& message) {
  throw Error(CHORUS_INVALID_ARGUMENT, "Dataset: " + message);
}

// An unbiased draw from [0, bound) that depends only on the engine's output, which the standard
// fixes; std::uniform_int_distribution's algorithm is implementation-defined.
uint64_t UniformBelow(std::mt19937_64& engine, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound: the biased low values
  uint64_t draw = engine();
  while (draw < threshold) draw = engine();
  return draw % bound;
}

}  // namespace

Dataset Dataset::FromExamples(Shape example_shape, std::vector<float> features,
                              std::vector<int32_t> labels) {
  for (int64_t d : example_shape) {
    if (d < 0) Fail("example_shape " + ShapeString(example_shape) + " has a negative dimension");
  }
  auto examples = std::make_shared<Examples>();
  examples->example_size = NumElements(example_shape);
  const auto num = static_cast<int64_t>(labels.size());
  if (static_cast<int64_t>(features.size()) != num * examples->example_size) {
    Fail("features has " + std::to_string(features.size()) + " values but " + std::to_string(num) +
         " labels of example_shape " + ShapeString(example_shape) + " need " +
         std::to_string(num * examples->example_size) +
         "; pass one label per example and example_shape's element count of features each");
  }
  examples->example_shape = std::move(example_shape);
  examples->features = std::move(features);
  examples->labels = std::move(labels);
  Dataset dataset;
  dataset.examples_ = std::move(examples);
  dataset.order_.resize(static_cast<size_t>(num));
  std::iota(dataset.order_.begin(), dataset.order_.end(), int64_t{0});
  return dataset;
}

int64_t Dataset::num_examples() const { return static_cast<int64_t>(order_.size()); }

const Shape& Dataset::example_shape() const {
  static const Shape kEmpty;
  return examples_ ? examples_->example_shape : kEmpty;
}

Dataset Dataset::Shuffle(uint64_t seed) const {
  if (batch_size_ > 0) Fail("Shuffle of a batched dataset; shuffle before batch");
  Dataset out = *this;
  std::mt19937_64 engine(seed);
  // Fisher-Yates, written out so that every platform gives the same order for a seed.
  for (size_t i = out.order_.size(); i > 1; --i) {
    const auto j = static_cast<size_t>(UniformBelow(engine, i));
    std::swap(out.order_[i - 1], out.order_[j]);
  }
  return out;
}

Dataset Dataset::Shard(int64_t num_shards, int64_t index) const {
  if (batch_size_ > 0) Fail("Shard of a batched dataset; shard before batch");
  if (num_shards < 1) {
    Fail("Shard: num_shards is " + std::to_string(num_shards) + "; it must be at least 1");
  }
  if (index < 0 || index >= num_shards) {
    Fail("Shard: index " + std::to_string(index) + " is out of range for " +
         std::to_string(num_shards) + " shards; use 0.." + std::to_string(num_shards - 1));
  }
  Dataset out = *this;
  out.order_.clear();
  for (size_t i = static_cast<size_t>(index); i < order_.size();
       i += static_cast<size_t>(num_shards)) {
    out.order_.push_back(order_[i]);
  }
  return out;
}

// Takes `count` elements: examples while unbatched, batches once batched. -1 (or a count past
// the end) takes every element, as tf.data.Dataset.take.
Dataset Dataset::Take(int64_t count) const {
  if (count < -1) {
    Fail("Take: count is " + std::to_string(count) + "; use a count >= 0, or -1 for all");
  }
  Dataset out = *this;
  if (count == -1) return out;
  const int64_t per_element = batch_size_ > 0 ? batch_size_ : 1;
  if (count <= num_examples() / per_element) {
    out.order_.resize(static_cast<size_t>(count * per_element));
  }
  return out;
}

Dataset Dataset::Batch(int64_t batch_size, bool drop_remainder) const {
  if (batch_size_ > 0) {
    Fail("Batch of a dataset already batched by " + std::to_string(batch_size_) +
         "; batch once, with the final batch size");
  }
  if (batch_size < 1) {
    Fail("Batch: batch_size is " + std::to_string(batch_size) + "; it must be at least 1");
  }
  Dataset out = *this;
  out.batch_size_ = batch_size;
  out.drop_remainder_ = drop_remainder;
  // Dropping the remainder now keeps num_examples() equal to what the batches hold.
  if (drop_remainder) {
    const auto size = static_cast<size_t>(batch_size);
    out.order_.resize(order_.size() / size * size);
  }
  return out;
}

int64_t Dataset::batch_size() const { return batch_size_; }

bool Dataset::drop_remainder() const { return drop_remainder_; }

int64_t Dataset::num_batches() const {
  if (batch_size_ == 0) return num_examples();
  return (num_examples() + batch_size_ - 1) / batch_size_;
}

// Unbatched, batch i is example i alone, with feature_shape [1, example_shape...].
HostBatch Dataset::GetBatch(int64_t index) const {
  if (index < 0 || index >= num_batches()) {
    Fail("GetBatch: index " + std::to_string(index) + " is out of range; the dataset has " +
         std::to_string(num_batches()) + " batches");
  }
  const int64_t per_batch = batch_size_ > 0 ? batch_size_ : 1;
  const int64_t begin = index * per_batch;
  const int64_t end = std::min(begin + per_batch, num_examples());
  HostBatch batch;
  batch.size = end - begin;
  batch.feature_shape = {batch.size};
  batch.feature_shape.insert(batch.feature_shape.end(), examples_->example_shape.begin(),
                             examples_->example_shape.end());
  const auto row = static_cast<size_t>(examples_->example_size);
  batch.features.reserve(static_cast<size_t>(batch.size) * row);
  batch.labels.reserve(static_cast<size_t>(batch.size));
  for (int64_t i = begin; i < end; ++i) {
    const auto example = static_cast<size_t>(order_[static_cast<size_t>(i)]);
    const auto first = examples_->features.begin() + static_cast<std::ptrdiff_t>(example * row);
    batch.features.insert(batch.features.end(), first, first + static_cast<std::ptrdiff_t>(row));
    batch.labels.push_back(examples_->labels[example]);
  }
  return batch;
}

}  // namespace chorus
