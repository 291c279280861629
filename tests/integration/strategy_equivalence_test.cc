// The promise of tf.distribute: a step function trained under MirroredStrategy or
// CentralStorageStrategy with N replicas ends with the weights that one device with the same
// global batch reaches. 50 steps of the fashion_mnist example's MLP with Adam, global batch 64.
#include <gtest/gtest.h>

#include <cstdio>

#include "training_support.h"

namespace fashion_mnist::test {
namespace {

constexpr int64_t kSteps = 50;
constexpr double kTolerance = 1e-5;

struct TrainedRun {
  HostWeights weights;
  int64_t steps = 0;
  double final_train_loss = 0;
};

TrainedRun Train(Kind kind, uint32_t replicas, const std::string& cross_device_ops,
                 int64_t train_size) {
  static const TrainAndTest data =
      GenerateSyntheticData(/*seed=*/7, kSteps * kGlobalBatch / 2, 128);
  const std::unique_ptr<chorus::Strategy> strategy = MakeStrategy(kind, replicas, cross_device_ops);
  TrainerOptions options;
  options.global_batch_size = kGlobalBatch;
  options.epochs = 2;  // 25 steps each, reshuffled: stopped at kSteps
  options.max_steps = kSteps;
  options.seed = 3;
  Trainer trainer(*strategy, options);
  const ImageSet train = data.train.Take(train_size);
  const auto results = trainer.Fit(train, data.test.Take(64));
  return {trainer.Weights(), trainer.steps(), results.back().train_loss};
}

const TrainedRun& OneDeviceReference() {
  static const TrainedRun run = Train(Kind::kOneDevice, 1, "", kSteps * kGlobalBatch / 2);
  return run;
}

class MirroredMatchesOneDevice : public ::testing::TestWithParam<std::string> {};

TEST_P(MirroredMatchesOneDevice, After50StepsOfGlobalBatch64) {
  const TrainedRun mirrored = Train(Kind::kMirrored, 4, GetParam(), kSteps * kGlobalBatch / 2);
  const TrainedRun& one = OneDeviceReference();
  ASSERT_EQ(mirrored.steps, kSteps);
  ASSERT_EQ(one.steps, kSteps);
  const double difference = MaxRelativeDifference(mirrored.weights, one.weights);
  std::printf("Mirrored(4) with %s vs OneDevice: max relative difference %.3g\n",
              GetParam().c_str(), difference);
  EXPECT_LE(difference, kTolerance) << "Mirrored(4) with " << GetParam();
  // The training did something: the loss fell below its initial ~ln(10).
  EXPECT_LT(mirrored.final_train_loss, 2.0);
}

INSTANTIATE_TEST_SUITE_P(CrossDeviceOps, MirroredMatchesOneDevice,
                         ::testing::Values("reduction_to_one_device", "hierarchical_copy"));

TEST(CentralStorageMatchesOneDevice, After50StepsOfGlobalBatch64) {
  const TrainedRun central = Train(Kind::kCentralStorage, 4, "", kSteps * kGlobalBatch / 2);
  ASSERT_EQ(central.steps, kSteps);
  EXPECT_LE(MaxRelativeDifference(central.weights, OneDeviceReference().weights), kTolerance);
}

// Data sets whose size is no multiple of 64: the last batch is short (1000 = 15 x 64 + 40) or
// shorter than the replica count (1026 = 16 x 64 + 2, so two replicas get no example at all).
// Training reaches the end of the data and agrees with one device.
class UnevenDataset : public ::testing::TestWithParam<int64_t> {};

TEST_P(UnevenDataset, TrainsToTheEndAndMatchesOneDevice) {
  const int64_t size = GetParam();
  const int64_t steps = (size + kGlobalBatch - 1) / kGlobalBatch;
  const auto one_epoch = [&](Kind kind, uint32_t replicas) {
    static const TrainAndTest data = GenerateSyntheticData(/*seed=*/11, 1026, 64);
    const std::unique_ptr<chorus::Strategy> strategy = MakeStrategy(kind, replicas);
    TrainerOptions options;
    options.global_batch_size = kGlobalBatch;
    options.epochs = 1;
    options.seed = 5;
    Trainer trainer(*strategy, options);
    trainer.Fit(data.train.Take(size), data.test);
    return std::make_pair(trainer.steps(), trainer.Weights());
  };
  const auto [mirrored_steps, mirrored] = one_epoch(Kind::kMirrored, 4);
  const auto [one_steps, one] = one_epoch(Kind::kOneDevice, 1);
  EXPECT_EQ(mirrored_steps, steps);
  EXPECT_EQ(one_steps, steps);
  EXPECT_LE(MaxRelativeDifference(mirrored, one), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Sizes, UnevenDataset, ::testing::Values(1000, 1026));

}  // namespace
}  // namespace fashion_mnist::test
