// A checkpoint is strategy-independent: saved under MirroredStrategy(4) it restores under
// OneDeviceStrategy (and with no strategy at all) to the same evaluation, and back.
#include <gtest/gtest.h>

#include <filesystem>

#include "training_support.h"

namespace fashion_mnist::test {
namespace {

class CheckpointAcrossStrategies : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("chorus_ckpt_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static const TrainAndTest& Data() {
    static const TrainAndTest data = GenerateSyntheticData(/*seed=*/21, 640, 256);
    return data;
  }
  static TrainerOptions Options(uint64_t seed) {
    TrainerOptions options;
    options.global_batch_size = 64;
    options.epochs = 1;
    options.seed = seed;
    return options;
  }

  // Trains one epoch under `from`, saves, restores into a fresh model (other initial weights)
  // under `to`, and checks that both evaluate the same and hold the same weights.
  void SaveUnderRestoreUnder(Kind from, uint32_t from_replicas, Kind to, uint32_t to_replicas) {
    const auto source = MakeStrategy(from, from_replicas);
    Trainer trained(*source, Options(1));
    trained.Fit(Data().train, Data().test);
    const Evaluation before = trained.Evaluate(Data().test);
    const std::string path = SaveNumberedCheckpoint(trained, dir_.string(), 1);
    EXPECT_EQ(chorus::LatestCheckpoint(dir_.string()), path);

    const auto target = MakeStrategy(to, to_replicas);
    Trainer restored(*target, Options(99));
    ASSERT_GT(MaxRelativeDifference(restored.Weights(), trained.Weights()), 1e-2)
        << "the fresh model must start elsewhere, or the restore proves nothing";
    restored.RestoreCheckpoint(path);
    EXPECT_EQ(MaxRelativeDifference(restored.Weights(), trained.Weights()), 0.0);
    const Evaluation after = restored.Evaluate(Data().test);
    EXPECT_EQ(after.examples, before.examples);
    EXPECT_DOUBLE_EQ(after.accuracy, before.accuracy);
    EXPECT_NEAR(after.loss, before.loss, 1e-6);
    EXPECT_GT(after.accuracy, 30.0) << "one epoch should learn something";

    // The optimizer's slots came along: one more identical step from both gives the same
    // weights (Adam's m, v and iteration count restored).
    const chorus::DistributedDataset next_source =
        trained.strategy().experimental_distribute_dataset(Data().train.ToDataset().Batch(64));
    const chorus::DistributedDataset next_target =
        restored.strategy().experimental_distribute_dataset(Data().train.ToDataset().Batch(64));
    trained.TrainStep(next_source.Get(0));
    restored.TrainStep(next_target.Get(0));
    EXPECT_LE(MaxRelativeDifference(restored.Weights(), trained.Weights()), 1e-5);
  }

  std::filesystem::path dir_;
};

TEST_F(CheckpointAcrossStrategies, MirroredToOneDevice) {
  SaveUnderRestoreUnder(Kind::kMirrored, 4, Kind::kOneDevice, 1);
}

TEST_F(CheckpointAcrossStrategies, OneDeviceToMirrored) {
  SaveUnderRestoreUnder(Kind::kOneDevice, 1, Kind::kMirrored, 4);
}

TEST_F(CheckpointAcrossStrategies, MirroredToCentralStorage) {
  SaveUnderRestoreUnder(Kind::kMirrored, 4, Kind::kCentralStorage, 2);
}

// As the tutorial ends: restore into a model created with no strategy, and evaluate it.
TEST_F(CheckpointAcrossStrategies, MirroredToNoStrategy) {
  const auto mirrored = MakeStrategy(Kind::kMirrored, 4);
  Trainer trained(*mirrored, Options(1));
  trained.Fit(Data().train, Data().test);
  const Evaluation before = trained.Evaluate(Data().test);
  const std::string path = SaveNumberedCheckpoint(trained, dir_.string(), 1);

  ModelConfig config;
  config.seed = 99;
  const Model plain(config);
  chorus::Checkpoint checkpoint;
  TrackModel(checkpoint, plain);
  checkpoint.Restore(path);
  const Evaluation after = EvaluateWithoutStrategy(plain, Data().test, 64);
  EXPECT_EQ(after.examples, before.examples);
  EXPECT_DOUBLE_EQ(after.accuracy, before.accuracy);
  EXPECT_NEAR(after.loss, before.loss, 1e-6);
}

}  // namespace
}  // namespace fashion_mnist::test
