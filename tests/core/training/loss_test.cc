// ComputeAverageLoss and ScaleRegularizationLoss outside a replica context (one replica), in
// the replicas of a MirroredStrategy, and in its cross-replica context (an error, as in tf).
#include <chorus/base/error.h>
#include <chorus/distribute/strategies.h>
#include <chorus/runtime/registry.h>
#include <chorus/training/loss.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cpu_devices_for_tests.h"

namespace chorus {
namespace {

using test::HasText;

std::string AverageLossError(const std::vector<float>& loss, const std::vector<float>& weight,
                             int64_t global_batch_size) {
  try {
    ComputeAverageLoss(loss, weight, global_batch_size);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
    return e.what();
  }
  ADD_FAILURE() << "no Error thrown";
  return "";
}

TEST(LossTest, ComputeAverageLossIsTheMeanOutsideAReplicaContext) {
  const std::vector<float> loss = {1.0f, 2.0f, 3.0f, 6.0f};
  EXPECT_FLOAT_EQ(ComputeAverageLoss(loss), 3.0f);
}

TEST(LossTest, ComputeAverageLossWithSampleWeights) {
  const std::vector<float> loss = {1.0f, 2.0f, 3.0f, 6.0f};
  const std::vector<float> weight = {1.0f, 0.0f, 2.0f, 0.5f};
  EXPECT_FLOAT_EQ(ComputeAverageLoss(loss, weight), (1.0f + 6.0f + 3.0f) / 4.0f);
}

TEST(LossTest, ComputeAverageLossDividesByAnExplicitGlobalBatchSize) {
  const std::vector<float> loss = {1.0f, 2.0f, 3.0f, 6.0f};
  EXPECT_FLOAT_EQ(ComputeAverageLoss(loss, {}, 16), 12.0f / 16.0f);
  const std::vector<float> weight = {2.0f, 2.0f, 2.0f, 2.0f};
  EXPECT_FLOAT_EQ(ComputeAverageLoss(loss, weight, 8), 24.0f / 8.0f);
}

TEST(LossTest, ComputeAverageLossAccumulatesInDouble) {
  // In float, 1e8 + 1 + ... loses every 1; in double the sum is exact.
  std::vector<float> loss(1001, 1.0f);
  loss[0] = 1e8f;
  EXPECT_FLOAT_EQ(ComputeAverageLoss(loss, {}, 1), 1e8f + 1000.0f);
}

TEST(LossTest, EmptyBatchGivesZeroNotNaN) {
  const float empty = ComputeAverageLoss({});
  EXPECT_FALSE(std::isnan(empty));
  EXPECT_EQ(empty, 0.0f);
  EXPECT_EQ(ComputeAverageLoss({}, {}, 8), 0.0f);
}

TEST(LossTest, ErrorsNameBothSizes) {
  EXPECT_TRUE(HasText(AverageLossError({1.0f, 2.0f, 3.0f}, {1.0f, 1.0f}, 0),
                      "sample_weight has 2 weights but per_example_loss has 3 losses"));
  EXPECT_TRUE(HasText(AverageLossError({1.0f}, {}, -4), "global_batch_size is -4"));
}

TEST(LossTest, ScaleRegularizationLossOutsideAReplicaContextIsUnscaled) {
  EXPECT_FLOAT_EQ(ScaleRegularizationLoss(2.5f), 2.5f);
  EXPECT_FLOAT_EQ(ScaleRegularizationLoss(0.0f), 0.0f);
}

MirroredStrategy FourReplicas() {
  static Registry registry([] {
    LoaderOptions options;
    options.filter = "none";
    return options;
  }());
  auto cpu = DeviceEnumerator::Create(registry.FindPlugin("core"), {{"count", "4"}});
  return MirroredStrategy({{cpu, 0}, {cpu, 1}, {cpu, 2}, {cpu, 3}}, kReductionToOneDevice);
}

TEST(LossTest, InAReplicaContextTheGlobalBatchIsPerReplicaTimesReplicas) {
  MirroredStrategy strategy = FourReplicas();
  const std::vector<float> results = strategy.run([](ReplicaContext&) {
    const std::vector<float> loss = {1.0f, 2.0f};
    return ComputeAverageLoss(loss);  // 3 / (2 x 4 replicas)
  });
  for (float r : results) EXPECT_FLOAT_EQ(r, 3.0f / 8.0f);
  const std::vector<float> explicit_size = strategy.run([](ReplicaContext&) {
    const std::vector<float> loss = {1.0f, 2.0f};
    return ComputeAverageLoss(loss, {}, 6);
  });
  for (float r : explicit_size) EXPECT_FLOAT_EQ(r, 3.0f / 6.0f);
  const std::vector<float> regularization =
      strategy.run([](ReplicaContext&) { return ScaleRegularizationLoss(2.0f); });
  for (float r : regularization) EXPECT_FLOAT_EQ(r, 0.5f);
}

TEST(LossTest, CrossReplicaContextIsAnError) {
  MirroredStrategy strategy = FourReplicas();
  auto scope = strategy.scope();
  try {
    ScaleRegularizationLoss(1.0f);
    ADD_FAILURE() << "no Error thrown";
  } catch (const Error& e) {
    EXPECT_TRUE(HasText(e.what(), "ScaleRegularizationLoss was called in cross-replica context"));
  }
  EXPECT_TRUE(
      HasText(AverageLossError({1.0f}, {}, 0), "ComputeAverageLoss was called in cross-replica"));
}

}  // namespace
}  // namespace chorus
