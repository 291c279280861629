// chorus::FitOptions::gradient_shards with the example's models (the CNN over oneDNN, the MLP):
// OneDevice, Mirrored(2) and Mirrored(4) compute the same shards' gradients and sum them in the
// same pairwise order, so after a few dozen Adam steps their weights are the same bits; without
// shards they are not (the test's power). MultiWorkerMirrored(2x2) is compared on real
// Fashion-MNIST by scripts/fashion_mnist_table.sh.
#include <chorus/training/fit.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fit_models.h"
#include "training_support.h"

namespace fashion_mnist::test {
namespace {

// 1312 = 20 batches of 64 and a short last batch of 32 (whose shards 2 and 3 are empty).
constexpr int64_t kTrainExamples = 1312;

std::vector<std::vector<float>> TrainWithFit(const std::string& model_name, Kind kind,
                                             uint32_t replicas, const std::string& ops,
                                             int64_t gradient_shards) {
  static const TrainAndTest data = GenerateSyntheticData(/*seed=*/11, kTrainExamples, 64);
  const std::unique_ptr<chorus::Strategy> strategy = MakeStrategy(kind, replicas, ops);
  std::unique_ptr<FitModel> model;
  {
    const auto scope = strategy->scope();
    FitModelConfig config;
    config.seed = 3;
    model = CreateFitModel(model_name, config);
  }
  chorus::Adam adam(1e-3f);
  chorus::FitOptions options;
  options.batch_size = kGlobalBatch;
  options.seed = 5;
  options.gradient_shards = gradient_shards;
  const chorus::History history =
      chorus::Fit(strategy.get(), *model, adam, data.train.ToDataset(), options);
  EXPECT_EQ(history.epochs.size(), 1u);
  const auto scope = strategy->scope();
  std::vector<std::vector<float>> weights;
  for (const chorus::Variable& variable : model->trainable_variables()) {
    weights.push_back(variable.value().ToVector());
  }
  return weights;
}

class GradientShards : public ::testing::TestWithParam<std::string> {};

TEST_P(GradientShards, OneDeviceAndMirroredEndWithTheSameBits) {
  const std::string model = GetParam();
  const auto one = TrainWithFit(model, Kind::kOneDevice, 1, "", 4);
  EXPECT_EQ(TrainWithFit(model, Kind::kMirrored, 4, "reduction_to_one_device", 4), one);
  EXPECT_EQ(TrainWithFit(model, Kind::kMirrored, 4, "hierarchical_copy", 4), one);
  EXPECT_EQ(TrainWithFit(model, Kind::kMirrored, 2, "reduction_to_one_device", 4), one);
  // Without shards one device sums its whole batch its own way.
  EXPECT_NE(TrainWithFit(model, Kind::kOneDevice, 1, "", 0),
            TrainWithFit(model, Kind::kMirrored, 4, "reduction_to_one_device", 0));
}

std::vector<std::string> TrainedModels() {
  std::vector<std::string> names;
  for (const std::string& name : ModelNames()) {
    if (name != "noop") names.push_back(name);
  }
  return names;
}

INSTANTIATE_TEST_SUITE_P(Models, GradientShards, ::testing::ValuesIn(TrainedModels()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace fashion_mnist::test
