// Dataset, InputContext and DistributedDataset: batching, shuffling, sharding, the split of a
// global batch across replicas, InputOptions, the prefetching DistributedIterator, and every
// error's message.
#include <chorus/base/error.h>
#include <chorus/distribute/dataset.h>
#include <chorus/distribute/strategies.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
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

// Both steps' batches hold the same examples, shapes and devices, replica by replica.
void ExpectSameStep(const DistributedBatch& got, const DistributedBatch& want) {
  EXPECT_EQ(got.global_size, want.global_size);
  ASSERT_EQ(got.replicas.size(), want.replicas.size());
  for (size_t r = 0; r < want.replicas.size(); ++r) {
    SCOPED_TRACE("replica " + std::to_string(r));
    const Batch& a = got.replicas[r];
    const Batch& b = want.replicas[r];
    EXPECT_EQ(a.size, b.size);
    EXPECT_EQ(a.features.shape(), b.features.shape());
    EXPECT_EQ(a.labels.shape(), b.labels.shape());
    EXPECT_EQ(a.features.device(), b.features.device());
    EXPECT_EQ(a.labels.device(), b.labels.device());
    EXPECT_EQ(a.features.ToVector(), b.features.ToVector());
    EXPECT_EQ(Labels(a), Labels(b));
  }
}

// Every step of `dist` through its iterator, against Get(step); then the end.
void ExpectIteratorMatchesGet(const DistributedDataset& dist) {
  DistributedIterator it = dist.MakeIterator();
  for (int64_t s = 0; s < dist.num_steps(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    const std::optional<DistributedBatch> batch = it.GetNext();
    ASSERT_TRUE(batch.has_value());
    ExpectSameStep(*batch, dist.Get(s));
  }
  EXPECT_EQ(it.steps_taken(), dist.num_steps());
  EXPECT_FALSE(it.GetNext().has_value());
  EXPECT_FALSE(it.GetNext().has_value()) << "the end stays the end";
}

TEST(DistributedDatasetTest, IteratorGivesTheBatchesOfGetForEveryStepAndBufferSize) {
  const auto devices = CpuDevices(3);
  // 13 examples in batches of 4 over 3 replicas: the last step's batch of 1 leaves two replicas
  // empty. Per replica: 7 batches of 2 round robin, the last step's second replica empty.
  const Dataset global = Numbered(13).Shuffle(5).Batch(4);
  const Dataset per_replica = Numbered(13).Batch(2);
  for (int buffer : {1, 2, 5}) {
    SCOPED_TRACE("buffer " + std::to_string(buffer));
    InputOptions options;
    options.experimental_per_replica_buffer_size = buffer;
    const auto by_global = DistributedDataset::FromGlobalBatches(global, devices, 0, 0, options);
    ASSERT_EQ(by_global.num_steps(), 4);
    EXPECT_EQ(by_global.options().experimental_per_replica_buffer_size, buffer);
    ExpectIteratorMatchesGet(by_global);
    const auto by_replica =
        DistributedDataset::FromPerReplicaBatches(per_replica, devices, options);
    ASSERT_EQ(by_replica.num_steps(), 3);
    ExpectIteratorMatchesGet(by_replica);
    // A worker's share of 2 workers x 3 replicas.
    ExpectIteratorMatchesGet(DistributedDataset::FromGlobalBatches(global, devices, 3, 6, options));
  }
  // An empty dataset: no step, and no hang.
  const auto empty = DistributedDataset::FromGlobalBatches(Numbered(0).Batch(4), devices);
  EXPECT_FALSE(empty.MakeIterator().GetNext().has_value());
}

TEST(DistributedDatasetTest, StrategiesPassTheirInputOptionsToTheIterator) {
  MirroredStrategy strategy(CpuDevices(2), "reduction_to_one_device");
  InputOptions options;
  options.experimental_per_replica_buffer_size = 3;
  const auto dist = strategy.experimental_distribute_dataset(Numbered(10).Batch(4), options);
  EXPECT_EQ(dist.options().experimental_per_replica_buffer_size, 3);
  ExpectIteratorMatchesGet(dist);
  const auto from_function = strategy.distribute_datasets_from_function(
      [](const InputContext& context) {
        return Numbered(10).Batch(context.get_per_replica_batch_size(4));
      },
      options);
  EXPECT_EQ(from_function.options().experimental_per_replica_buffer_size, 3);
  ExpectIteratorMatchesGet(from_function);
  // The one-argument forms keep TensorFlow's defaults.
  const auto plain = strategy.experimental_distribute_dataset(Numbered(10).Batch(4));
  EXPECT_TRUE(plain.options().experimental_fetch_to_device);
  EXPECT_EQ(plain.options().experimental_per_replica_buffer_size, 1);
}

TEST(DistributedDatasetTest, WithoutFetchToDeviceTheBatchesAreHostTensors) {
  const auto devices = CpuDevices(2);
  InputOptions options;
  options.experimental_fetch_to_device = false;
  options.experimental_per_replica_buffer_size = 2;
  const Dataset data = Numbered(7).Batch(4);
  const auto host = DistributedDataset::FromGlobalBatches(data, devices, 0, 0, options);
  const auto fetched = DistributedDataset::FromGlobalBatches(data, devices);
  DistributedIterator it = host.MakeIterator();
  for (int64_t s = 0; s < host.num_steps(); ++s) {
    const std::optional<DistributedBatch> batch = it.GetNext();
    ASSERT_TRUE(batch.has_value());
    for (const Batch& b : batch->replicas) {
      EXPECT_TRUE(b.features.host_accessible());
      EXPECT_TRUE(b.labels.host_accessible());
      EXPECT_EQ(b.features.device().info().kind, CHORUS_DEVICE_CPU);
      if (b.size > 0) {
        EXPECT_EQ(b.features.data<float>()[0], b.features.ToVector()[0]);
      }
    }
    // The same examples as the batches fetched to the devices (a cpu device's memory is host
    // memory, so here they are on the same devices too).
    ExpectSameStep(*batch, fetched.Get(s));
    ExpectSameStep(host.Get(s), fetched.Get(s));
  }
}

// The background thread, blocked on a full buffer or busy preparing a slow step, stops at once:
// the destructor does not wait for the 8 steps left.
TEST(DistributedDatasetTest, IteratorDestroyedMidEpochStopsPromptly) {
  const auto dist = DistributedDataset::FromGlobalBatches(Numbered(40).Batch(4), CpuDevices(2));
  ASSERT_EQ(dist.num_steps(), 10);
  for (int buffer : {1, 5}) {
    InputOptions options;
    options.experimental_per_replica_buffer_size = buffer;
    const auto buffered =
        DistributedDataset::FromGlobalBatches(Numbered(40).Batch(4), CpuDevices(2), 0, 0, options);
    const auto start = std::chrono::steady_clock::now();
    {
      DistributedIterator it = buffered.MakeIterator();
      ASSERT_TRUE(it.GetNext().has_value());
      ASSERT_TRUE(it.GetNext().has_value());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it fill the buffer
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2)) << buffer;
  }

  std::atomic<int> prepared{0};
  const auto slow = [&](int64_t step) {
    ++prepared;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return dist.Get(step);
  };
  std::chrono::steady_clock::duration destroy{};
  {
    DistributedIterator it(slow, 10, 2);
    ASSERT_TRUE(it.GetNext().has_value());
    ASSERT_TRUE(it.GetNext().has_value());
    const auto start = std::chrono::steady_clock::now();
    it = DistributedIterator([&](int64_t step) { return dist.Get(step); }, 0, 1);
    destroy = std::chrono::steady_clock::now() - start;
  }
  // 2 taken, 2 buffered, at most 1 in preparation when it was told to stop; 8 more would take
  // 1.6 s.
  EXPECT_LE(prepared.load(), 5);
  EXPECT_LT(destroy, std::chrono::milliseconds(1000));
}

TEST(DistributedDatasetTest, IteratorRethrowsAPrefetchErrorAtTheStepThatNeedsIt) {
  const auto dist = DistributedDataset::FromGlobalBatches(Numbered(40).Batch(4), CpuDevices(2));
  std::atomic<int64_t> last_prepared{-1};
  DistributedIterator it(
      [&](int64_t step) {
        last_prepared = step;
        if (step == 3) throw Error(CHORUS_INVALID_ARGUMENT, "bad batch at step 3");
        return dist.Get(step);
      },
      10, 5);
  for (int64_t s = 0; s < 3; ++s) {
    const std::optional<DistributedBatch> batch = it.GetNext();
    ASSERT_TRUE(batch.has_value());
    ExpectSameStep(*batch, dist.Get(s));
  }
  EXPECT_EQ(ErrorOf([&] { it.GetNext(); }), "bad batch at step 3");
  EXPECT_EQ(ErrorOf([&] { it.GetNext(); }), "bad batch at step 3") << "and at every later call";
  EXPECT_EQ(it.steps_taken(), 3);
  EXPECT_EQ(last_prepared.load(), 3) << "nothing is prepared after the error";

  // Any exception, not only chorus::Error.
  DistributedIterator other([](int64_t) -> DistributedBatch { throw std::runtime_error("boom"); },
                            2, 1);
  EXPECT_THROW(other.GetNext(), std::runtime_error);

  // A real failure of Get: a replica device that does not exist fails its allocation on the
  // background thread, and the caller gets the device's message.
  const auto devices = CpuDevices(2);
  const auto missing = DistributedDataset::FromGlobalBatches(
      Numbered(8).Batch(4), {devices[0], {devices[0].enumerator, 7}});
  std::string direct;
  try {
    missing.Get(0);
  } catch (const Error& e) {
    direct = e.what();
  }
  EXPECT_TRUE(HasText(direct, "device 7 does not exist"));
  DistributedIterator failing = missing.MakeIterator();
  try {
    failing.GetNext();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), direct);
  }
}

TEST(DistributedDatasetTest, InvalidBufferSizesAreRefused) {
  const auto devices = CpuDevices(2);
  MirroredStrategy strategy(devices, "reduction_to_one_device");
  const auto per_replica_fn = [](const InputContext&) { return Numbered(8).Batch(2); };
  for (int buffer : {0, -1}) {
    SCOPED_TRACE("buffer " + std::to_string(buffer));
    InputOptions options;
    options.experimental_per_replica_buffer_size = buffer;
    const std::string named = "InputOptions::experimental_per_replica_buffer_size is " +
                              std::to_string(buffer) + "; it must be at least 1";
    EXPECT_TRUE(HasText(ErrorOf([&] {
                          DistributedDataset::FromGlobalBatches(Numbered(8).Batch(4), devices, 0, 0,
                                                                options);
                        }),
                        "experimental_distribute_dataset: " + named));
    EXPECT_TRUE(HasText(ErrorOf([&] {
                          DistributedDataset::FromPerReplicaBatches(Numbered(8).Batch(2), devices,
                                                                    options);
                        }),
                        "distribute_datasets_from_function: " + named));
    EXPECT_TRUE(HasText(
        ErrorOf([&] { strategy.experimental_distribute_dataset(Numbered(8).Batch(4), options); }),
        named));
    EXPECT_TRUE(HasText(
        ErrorOf([&] { strategy.distribute_datasets_from_function(per_replica_fn, options); }),
        named));
    EXPECT_TRUE(HasText(ErrorOf([&] {
                          DistributedIterator([](int64_t) { return DistributedBatch{}; }, 1,
                                              buffer);
                        }),
                        "DistributedIterator: " + named));
  }
  EXPECT_TRUE(HasText(
      ErrorOf([] { DistributedIterator([](int64_t) { return DistributedBatch{}; }, -1, 1); }),
      "num_steps is -1"));
}

}  // namespace
}  // namespace chorus
