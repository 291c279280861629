// Dataset, InputContext and DistributedDataset: batching, shuffling, sharding, the split of a
// global batch across replicas, and every error's message.
#include <chorus/base/error.h>
#include <chorus/distribute/dataset.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "cpu_devices_for_tests.h"

namespace chorus {
namespace {

using test::CpuDevices;

using test::ErrorOf;
using test::HasText;

using Floats = std::vector<float>;
using Ints = std::vector<int32_t>;
using Sizes = std::vector<int64_t>;

// Example i has features {i, 10 * i} (shape [2]) and label i.
Dataset Numbered(int n) {
  std::vector<float> features;
  std::vector<int32_t> labels;
  for (int i = 0; i < n; ++i) {
    features.push_back(static_cast<float>(i));
    features.push_back(static_cast<float>(10 * i));
    labels.push_back(i);
  }
  return Dataset::FromExamples({2}, features, labels);
}

std::vector<int32_t> Labels(const Dataset& dataset) {
  std::vector<int32_t> out;
  for (int64_t b = 0; b < dataset.num_batches(); ++b) {
    const HostBatch batch = dataset.GetBatch(b);
    out.insert(out.end(), batch.labels.begin(), batch.labels.end());
  }
  return out;
}

std::vector<int32_t> Labels(const Batch& batch) {
  std::vector<int32_t> out(static_cast<size_t>(batch.size));
  if (batch.size > 0) {
    batch.labels.device().enumerator->Copy(CHORUS_HOST_DEVICE, out.data(),
                                           batch.labels.device().index, batch.labels.raw(),
                                           batch.labels.bytes());
  }
  return out;
}

TEST(DatasetTest, FromExamplesKeepsOrderAndShape) {
  const Dataset d = Numbered(3);
  EXPECT_EQ(d.num_examples(), 3);
  EXPECT_EQ(d.example_shape(), Shape({2}));
  EXPECT_EQ(d.batch_size(), 0);
  EXPECT_EQ(d.num_batches(), 3);
  const HostBatch one = d.GetBatch(1);
  EXPECT_EQ(one.size, 1);
  EXPECT_EQ(one.feature_shape, Shape({1, 2}));
  EXPECT_EQ(one.features, (Floats{1.0f, 10.0f}));
  EXPECT_EQ(one.labels, (Ints{1}));
}

TEST(DatasetTest, BatchKeepsAShortFinalBatch) {
  const Dataset d = Numbered(10).Batch(4);
  EXPECT_EQ(d.batch_size(), 4);
  EXPECT_FALSE(d.drop_remainder());
  EXPECT_EQ(d.num_batches(), 3);
  const HostBatch last = d.GetBatch(2);
  EXPECT_EQ(last.size, 2);
  EXPECT_EQ(last.feature_shape, Shape({2, 2}));
  EXPECT_EQ(last.features, (Floats{8.0f, 80.0f, 9.0f, 90.0f}));
  EXPECT_EQ(last.labels, (Ints{8, 9}));
  EXPECT_EQ(d.GetBatch(0).labels, (Ints{0, 1, 2, 3}));
}

TEST(DatasetTest, BatchDropRemainderDropsTheShortBatch) {
  const Dataset d = Numbered(10).Batch(4, /*drop_remainder=*/true);
  EXPECT_TRUE(d.drop_remainder());
  EXPECT_EQ(d.num_batches(), 2);
  EXPECT_EQ(d.num_examples(), 8);
  EXPECT_EQ(d.GetBatch(1).labels, (Ints{4, 5, 6, 7}));
  EXPECT_EQ(Numbered(3).Batch(4, true).num_batches(), 0);
  EXPECT_EQ(Numbered(8).Batch(4, true).num_batches(), 2);
}

TEST(DatasetTest, ShuffleIsADeterministicPermutation) {
  const Dataset d = Numbered(50);
  const auto a = Labels(d.Shuffle(7));
  EXPECT_EQ(a, Labels(d.Shuffle(7)));
  EXPECT_NE(a, Labels(d.Shuffle(8)));
  EXPECT_NE(a, Labels(d));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, Labels(d));
  // Features travel with their labels.
  const HostBatch first = d.Shuffle(7).GetBatch(0);
  EXPECT_EQ(first.features[1], 10.0f * static_cast<float>(first.labels[0]));
}

// The order for a seed is fixed by mt19937_64 alone, the same on every platform and library.
TEST(DatasetTest, ShuffleOrderIsPinned) {
  EXPECT_EQ(Labels(Numbered(8).Shuffle(42)), (Ints{7, 0, 5, 1, 2, 4, 3, 6}));
}

TEST(DatasetTest, ShuffleOfEmptyAndSingleDatasets) {
  EXPECT_TRUE(Labels(Numbered(0).Shuffle(1)).empty());
  EXPECT_EQ(Labels(Numbered(1).Shuffle(1)), (Ints{0}));
}

TEST(DatasetTest, ShardTakesEveryNthExampleOfTheCurrentOrder) {
  EXPECT_EQ(Labels(Numbered(10).Shard(3, 0)), (Ints{0, 3, 6, 9}));
  EXPECT_EQ(Labels(Numbered(10).Shard(3, 2)), (Ints{2, 5, 8}));
  EXPECT_EQ(Labels(Numbered(10).Shard(1, 0)), (Ints{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  const Dataset shuffled = Numbered(10).Shuffle(3);
  const auto order = Labels(shuffled);
  EXPECT_EQ(Labels(shuffled.Shard(4, 1)), (Ints{order[1], order[5], order[9]}));
  // The shards cover every example exactly once.
  std::vector<int32_t> all;
  for (int i = 0; i < 4; ++i) {
    const auto shard = Labels(shuffled.Shard(4, i));
    all.insert(all.end(), shard.begin(), shard.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, Labels(Numbered(10)));
}

TEST(DatasetTest, TakeCountsExamplesUnbatchedAndBatchesBatched) {
  EXPECT_EQ(Labels(Numbered(10).Take(3)), (Ints{0, 1, 2}));
  EXPECT_EQ(Numbered(10).Take(0).num_examples(), 0);
  EXPECT_EQ(Numbered(10).Take(20).num_examples(), 10);
  EXPECT_EQ(Numbered(10).Take(-1).num_examples(), 10);
  const Dataset batched = Numbered(10).Batch(4).Take(2);
  EXPECT_EQ(batched.num_batches(), 2);
  EXPECT_EQ(Labels(batched), (Ints{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(Numbered(10).Batch(4).Take(3).num_batches(), 3);
  EXPECT_EQ(Numbered(10).Batch(4).Take(5).num_examples(), 10);
  // Operations compose on the current order.
  EXPECT_EQ(Labels(Numbered(10).Shard(2, 1).Take(2).Batch(5)), (Ints{1, 3}));
}

TEST(DatasetTest, ErrorsNameTheProblemAndTheFix) {
  EXPECT_TRUE(HasText(ErrorOf([] {
                        Dataset::FromExamples({2}, {1, 2, 3}, {0, 1});
                      }),
                      "features has 3 values but 2 labels of example_shape [2] need 4"));
  EXPECT_TRUE(HasText(ErrorOf([] { Dataset::FromExamples({-1}, {}, {}); }),
                      "example_shape [-1] has a negative dimension"));
  const Dataset batched = Numbered(4).Batch(2);
  EXPECT_TRUE(HasText(ErrorOf([&] { batched.Shuffle(1); }), "shuffle before batch"));
  EXPECT_TRUE(HasText(ErrorOf([&] { batched.Shard(2, 0); }), "shard before batch"));
  EXPECT_TRUE(
      HasText(ErrorOf([&] { batched.Batch(2); }), "Batch of a dataset already batched by 2"));
  EXPECT_TRUE(
      HasText(ErrorOf([] { Numbered(4).Batch(0); }), "batch_size is 0; it must be at least 1"));
  EXPECT_TRUE(
      HasText(ErrorOf([] { Numbered(4).Shard(0, 0); }), "num_shards is 0; it must be at least 1"));
  EXPECT_TRUE(HasText(ErrorOf([] { Numbered(4).Shard(2, 2); }),
                      "index 2 is out of range for 2 shards; use 0..1"));
  EXPECT_TRUE(HasText(ErrorOf([] { Numbered(4).Shard(2, -1); }), "index -1 is out of range"));
  EXPECT_TRUE(HasText(ErrorOf([] { Numbered(4).Take(-2); }),
                      "count is -2; use a count >= 0, or -1 for all"));
  EXPECT_TRUE(HasText(ErrorOf([&] { batched.GetBatch(2); }),
                      "index 2 is out of range; the dataset has 2 batches"));
  EXPECT_TRUE(HasText(ErrorOf([&] { batched.GetBatch(-1); }), "index -1 is out of range"));
}

TEST(InputContextTest, PerReplicaBatchSize) {
  const InputContext context(2, 1, 4);
  EXPECT_EQ(context.num_input_pipelines(), 2);
  EXPECT_EQ(context.input_pipeline_id(), 1);
  EXPECT_EQ(context.num_replicas_in_sync(), 4);
  EXPECT_EQ(context.get_per_replica_batch_size(64), 16);
  EXPECT_EQ(context.get_per_replica_batch_size(0), 0);
}

TEST(InputContextTest, ErrorsNameTheProblemAndTheFix) {
  const InputContext context(1, 0, 4);
  EXPECT_EQ(ErrorOf([&] { context.get_per_replica_batch_size(10); }),
            "The `global_batch_size` 10 is not divisible by `num_replicas_in_sync` 4; use a "
            "multiple of 4");
  EXPECT_TRUE(HasText(ErrorOf([&] { context.get_per_replica_batch_size(-8); }),
                      "`global_batch_size` -8 is negative"));
  EXPECT_TRUE(HasText(ErrorOf([] { InputContext(0, 0, 1); }),
                      "num_input_pipelines (0) and num_replicas_in_sync (1) must be at least 1"));
  EXPECT_TRUE(HasText(ErrorOf([] { InputContext(1, 0, 0); }), "num_replicas_in_sync (0)"));
  EXPECT_TRUE(HasText(ErrorOf([] { InputContext(2, 2, 1); }),
                      "input_pipeline_id 2 is out of range for 2 input pipelines; use 0..1"));
}

TEST(DistributedDatasetTest, GlobalBatchesSplitAcrossReplicas) {
  const auto devices = CpuDevices(4);
  const auto dist = DistributedDataset::FromGlobalBatches(Numbered(13).Batch(8), devices);
  ASSERT_EQ(dist.num_steps(), 2);
  const DistributedBatch full = dist.Get(0);
  EXPECT_EQ(full.global_size, 8);
  ASSERT_EQ(full.replicas.size(), 4u);
  for (size_t r = 0; r < 4; ++r) {
    const Batch& b = full.replicas[r];
    EXPECT_EQ(b.size, 2);
    EXPECT_EQ(b.features.device(), devices[r]);
    EXPECT_EQ(b.labels.device(), devices[r]);
    EXPECT_EQ(b.features.shape(), Shape({2, 2}));
    EXPECT_EQ(b.labels.shape(), Shape({2}));
    EXPECT_EQ(b.labels.dtype(), CHORUS_I32);
    const auto i = static_cast<int32_t>(2 * r);
    const auto x = static_cast<float>(i);
    EXPECT_EQ(Labels(b), (Ints{i, i + 1}));
    EXPECT_EQ(b.features.ToVector(), (Floats{x, 10 * x, x + 1, 10 * (x + 1)}));
  }
}

TEST(DistributedDatasetTest, ShortFinalBatchLeavesTheLastReplicasEmpty) {
  const auto devices = CpuDevices(4);
  const auto dist = DistributedDataset::FromGlobalBatches(Numbered(13).Batch(8), devices);
  const DistributedBatch last = dist.Get(1);  // examples 8..12
  EXPECT_EQ(last.global_size, 5);
  std::vector<int64_t> sizes;
  for (const Batch& b : last.replicas) sizes.push_back(b.size);
  EXPECT_EQ(sizes, (Sizes{2, 2, 1, 0}));
  EXPECT_EQ(Labels(last.replicas[2]), (Ints{12}));
  const Batch& empty = last.replicas[3];
  EXPECT_EQ(empty.features.shape(), Shape({0, 2}));
  EXPECT_EQ(empty.labels.shape(), Shape({0}));
  EXPECT_EQ(empty.features.device(), devices[3]);
}

TEST(DistributedDatasetTest, BatchNotDivisibleByReplicasUsesCeilChunks) {
  const auto dist = DistributedDataset::FromGlobalBatches(Numbered(10).Batch(10), CpuDevices(4));
  std::vector<int64_t> sizes;
  for (const Batch& b : dist.Get(0).replicas) sizes.push_back(b.size);
  EXPECT_EQ(sizes, (Sizes{3, 3, 3, 1}));
}

TEST(DistributedDatasetTest, PerReplicaBatchesGoRoundRobin) {
  const auto devices = CpuDevices(2);
  const InputContext context(1, 0, 2);
  const Dataset d = Numbered(10).Batch(context.get_per_replica_batch_size(4));
  const auto dist = DistributedDataset::FromPerReplicaBatches(d, devices);
  ASSERT_EQ(dist.num_steps(), 3);  // 5 batches of 2 over 2 replicas
  const DistributedBatch first = dist.Get(0);
  EXPECT_EQ(first.global_size, 4);
  EXPECT_EQ(Labels(first.replicas[0]), (Ints{0, 1}));
  EXPECT_EQ(Labels(first.replicas[1]), (Ints{2, 3}));
  EXPECT_EQ(first.replicas[1].features.device(), devices[1]);
  // Batch 5 does not exist: replica 1 gets an empty batch, not a hang.
  const DistributedBatch last = dist.Get(2);
  EXPECT_EQ(last.global_size, 2);
  EXPECT_EQ(Labels(last.replicas[0]), (Ints{8, 9}));
  EXPECT_EQ(last.replicas[1].size, 0);
  EXPECT_EQ(last.replicas[1].features.shape(), Shape({0, 2}));
  EXPECT_EQ(last.replicas[1].labels.shape(), Shape({0}));
  EXPECT_EQ(last.replicas[1].labels.device(), devices[1]);
}

TEST(DistributedDatasetTest, ErrorsNameTheProblemAndTheFix) {
  const auto devices = CpuDevices(2);
  EXPECT_EQ(ErrorOf([&] { DistributedDataset::FromGlobalBatches(Numbered(4), devices); }),
            "experimental_distribute_dataset needs a batched dataset: call "
            "Batch(global_batch_size) first");
  EXPECT_TRUE(
      HasText(ErrorOf([&] { DistributedDataset::FromPerReplicaBatches(Numbered(4), devices); }),
              "needs a dataset batched per replica: call "
              "Batch(input_context.get_per_replica_batch_size(global_batch_size))"));
  EXPECT_TRUE(
      HasText(ErrorOf([] { DistributedDataset::FromGlobalBatches(Numbered(4).Batch(2), {}); }),
              "needs at least one replica device"));
  const auto dist = DistributedDataset::FromGlobalBatches(Numbered(4).Batch(2), devices);
  EXPECT_TRUE(
      HasText(ErrorOf([&] { dist.Get(2); }), "step 2 is out of range; the dataset has 2 steps"));
}

}  // namespace
}  // namespace chorus
