// Optimizers: SGD (plain, momentum, Nesterov) and Adam against hand-computed values, and
// apply_gradients under strategies: gradients summed across replicas, every copy updated alike,
// slots placed like their variables, and the errors for bad input.
#include <chorus/base/error.h>
#include <chorus/distribute/strategies.h>
#include <chorus/runtime/registry.h>
#include <chorus/training/optimizer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cpu_devices_for_tests.h"

namespace chorus {
namespace {

using test::CpuDevices;
using test::HostDevice;
using test::MakeVariable;
using test::Values;

// fn throws an INVALID_ARGUMENT chorus::Error whose message contains `part`.
void ExpectInvalidArgument(const std::function<void()>& fn, const std::string& part) {
  test::ExpectError(fn, CHORUS_INVALID_ARGUMENT, {part});
}

void ExpectNear(const std::vector<float>& actual, const std::vector<double>& expected,
                double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tolerance) << "element " << i;
  }
}

// ---- SGD -------------------------------------------------------------------------------------

TEST(Sgd, PlainStepIsWeightMinusLearningRateTimesGradient) {
  Variable w = MakeVariable("w", {1, 2, 3});
  SGD sgd(0.1f);
  sgd.apply_gradients({{Values({0.5f, -1, 2}), w}});
  ExpectNear(w.value().ToVector(), {0.95, 2.1, 2.8}, 1e-6);
  EXPECT_EQ(sgd.iterations(), 1);
  EXPECT_TRUE(sgd.slots().empty());
  EXPECT_TRUE(sgd.slot_names().empty());
}

TEST(Sgd, MomentumAccumulatesVelocity) {
  Variable w = MakeVariable("w", {1});
  SGD sgd(0.1f, 0.9f);
  sgd.apply_gradients({{Values({1}), w}});  // m = -0.1, w = 0.9
  sgd.apply_gradients({{Values({1}), w}});  // m = 0.9 * -0.1 - 0.1 = -0.19, w = 0.71
  ExpectNear(w.value().ToVector(), {0.71}, 1e-6);
  ASSERT_EQ(sgd.slots().count("w/momentum"), 1u);
  const Variable& m = sgd.slots().at("w/momentum");
  ExpectNear(m.value().ToVector(), {-0.19}, 1e-6);
  EXPECT_FALSE(m.trainable());
  EXPECT_EQ(m.synchronization(), VariableSynchronization::kOnWrite);
  EXPECT_EQ(m.aggregation(), VariableAggregation::kNone);
  EXPECT_EQ(sgd.iterations(), 2);
}

TEST(Sgd, NesterovLooksAhead) {
  Variable w = MakeVariable("w", {1});
  SGD sgd(0.1f, 0.9f, /*nesterov=*/true);
  sgd.apply_gradients({{Values({1}), w}});  // m = -0.1, w = 1 + 0.9 * -0.1 - 0.1 = 0.81
  ExpectNear(w.value().ToVector(), {0.81}, 1e-6);
  sgd.apply_gradients({{Values({1}), w}});  // m = -0.19, w = 0.81 - 0.171 - 0.1 = 0.539
  ExpectNear(w.value().ToVector(), {0.539}, 1e-6);
}

TEST(Sgd, BadMomentumIsAnError) {
  ExpectInvalidArgument([] { SGD sgd(0.1f, 1.5f); }, "momentum must be in [0, 1]");
  ExpectInvalidArgument([] { SGD sgd(0.1f, -0.1f); }, "momentum must be in [0, 1]");
}

// ---- Adam ------------------------------------------------------------------------------------

TEST(Adam, FirstStepMovesByTheLearningRate) {
  // m = 0.1 g, v = 0.001 g^2, lr_t = 0.1 sqrt(0.001) / 0.1: the step is lr * sign(g).
  Variable w = MakeVariable("w", {1, -2});
  Adam adam(0.1f);
  adam.apply_gradients({{Values({0.5f, -2}), w}});
  ExpectNear(w.value().ToVector(), {0.9, -1.9}, 1e-5);
  ExpectNear(adam.slots().at("w/m").value().ToVector(), {0.05, -0.2}, 1e-7);
  ExpectNear(adam.slots().at("w/v").value().ToVector(), {0.00025, 0.004},
             1e-7);  // 1 - 0.999f is not 0.001
}

TEST(Adam, TwoStepsMatchTheFormula) {
  Variable w = MakeVariable("w", {1, -2, 0.25f});
  const std::vector<std::vector<float>> grads{{0.5f, 2, -1}, {-0.25f, 1, 3}};
  const double lr = 0.01, b1 = 0.8, b2 = 0.99, eps = 1e-3;
  Adam adam(0.01f, 0.8f, 0.99f, 1e-3f);
  std::vector<double> wr{1, -2, 0.25}, m(3, 0.0), v(3, 0.0);
  for (int t = 1; t <= 2; ++t) {
    const auto& g = grads[static_cast<size_t>(t - 1)];
    adam.apply_gradients({{Values(g), w}});
    const double lr_t = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
    for (size_t i = 0; i < 3; ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      wr[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
    }
    ExpectNear(w.value().ToVector(), wr, 2e-6);
  }
  ExpectNear(adam.slots().at("w/m").value().ToVector(), m, 1e-6);
  ExpectNear(adam.slots().at("w/v").value().ToVector(), v, 1e-6);
  EXPECT_EQ(adam.iterations(), 2);
  EXPECT_EQ(adam.slot_names(), (std::vector<std::string>{"m", "v"}));
}

TEST(Adam, BadHyperparametersAreErrors) {
  ExpectInvalidArgument([] { Adam adam(0.1f, 1.0f); }, "beta_1 must be in [0, 1)");
  ExpectInvalidArgument([] { Adam adam(0.1f, 0.9f, -1.0f); }, "beta_2 must be in [0, 1]");
  ExpectInvalidArgument([] { Adam adam(0.1f, 0.9f, 0.999f, -1.0f); }, "epsilon");
}

// ---- apply_gradients under strategies ------------------------------------------------------

// The gradient replica r computes: [r + 1, 2 (r + 1), -(r + 1)] (sums: 10, 20, -10 for 4).
Tensor ReplicaGradient(const ReplicaContext& ctx) {
  const float r = static_cast<float>(ctx.replica_id_in_sync_group() + 1);
  return Values({r, 2 * r, -r}, ctx.device());
}

// Trains `steps` steps of `optimizer` under `strategy` and, the same steps on a plain variable
// with the summed gradient, `reference`. Returns the distributed variable.
Variable TrainBoth(Strategy& strategy, Optimizer& optimizer, Optimizer& reference, Variable& plain,
                   int steps) {
  Variable w;
  {
    auto scope = strategy.scope();
    w = MakeVariable("w", {1, 2, 3});
  }
  plain = MakeVariable("w", {1, 2, 3});
  const int n = strategy.num_replicas_in_sync();
  const float s = static_cast<float>(n * (n + 1) / 2);
  for (int step = 0; step < steps; ++step) {
    strategy.run([&](ReplicaContext& ctx) {
      optimizer.apply_gradients({{ReplicaGradient(ctx), w}});
    });
    reference.apply_gradients({{Values({s, 2 * s, -s}), plain}});
  }
  return w;
}

void ExpectEveryCopyEquals(const Variable& w, const Variable& plain) {
  const std::vector<float> expected = plain.value().ToVector();
  for (const Tensor& copy : w.components()) EXPECT_EQ(copy.ToVector(), expected);
}

TEST(OptimizerMirrored, EveryCopyGetsTheUpdateOfTheSummedGradient) {
  MirroredStrategy strategy(CpuDevices(4), "reduction_to_one_device");
  SGD sgd(1.0f), reference(1.0f);
  Variable plain;
  const Variable w = TrainBoth(strategy, sgd, reference, plain, 1);
  ASSERT_EQ(w.components().size(), 4u);
  for (const Tensor& copy : w.components())
    EXPECT_EQ(copy.ToVector(), (std::vector<float>{-9, -18, 13}));
  ExpectEveryCopyEquals(w, plain);
  EXPECT_EQ(sgd.iterations(), 1);  // once per step, not once per replica
}

TEST(OptimizerMirrored, MomentumSlotsAreMirroredAndMatchOneDevice) {
  MirroredStrategy strategy(CpuDevices(4), "reduction_to_one_device");
  SGD sgd(0.5f, 0.5f, true), reference(0.5f, 0.5f, true);
  Variable plain;
  const Variable w = TrainBoth(strategy, sgd, reference, plain, 3);
  ExpectEveryCopyEquals(w, plain);
  const Variable& m = sgd.slots().at("w/momentum");
  ASSERT_EQ(m.components().size(), 4u);
  EXPECT_EQ(m.strategy(), &strategy);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(m.components()[i].device(), w.components()[i].device());
  ExpectEveryCopyEquals(m, reference.slots().at("w/momentum"));
  EXPECT_EQ(sgd.iterations(), 3);
}

TEST(OptimizerMirrored, AdamMatchesOneDevice) {
  MirroredStrategy strategy(CpuDevices(4), "reduction_to_one_device");
  Adam adam(0.1f), reference(0.1f);
  Variable plain;
  const Variable w = TrainBoth(strategy, adam, reference, plain, 2);
  ExpectEveryCopyEquals(w, plain);
  ExpectEveryCopyEquals(adam.slots().at("w/m"), reference.slots().at("w/m"));
  ExpectEveryCopyEquals(adam.slots().at("w/v"), reference.slots().at("w/v"));
}

TEST(OptimizerMirrored, SeveralVariablesInOneCallAndPacking) {
  MirroredStrategy strategy(CpuDevices(4), "reduction_to_one_device");
  Variable a, b;
  {
    auto scope = strategy.scope();
    a = MakeVariable("a", {1, 1, 1});
    b = MakeVariable("b", {5});
  }
  SGD sgd(1.0f);
  CommunicationOptions options;
  options.bytes_per_pack = 4;  // one gradient per pack
  strategy.run([&](ReplicaContext& ctx) {
    sgd.apply_gradients({{ReplicaGradient(ctx), a}, {Values({1}, ctx.device()), b}}, options);
  });
  for (const Tensor& copy : a.components())
    EXPECT_EQ(copy.ToVector(), (std::vector<float>{-9, -19, 11}));
  for (const Tensor& copy : b.components()) EXPECT_EQ(copy.ToVector(), std::vector<float>{1});
}

TEST(OptimizerCentralStorage, ReplicaGradientsAreSummedIntoTheOneCopy) {
  const auto devices = CpuDevices(4);
  CentralStorageStrategy strategy(devices, devices[0]);
  SGD sgd(1.0f, 0.5f), reference(1.0f, 0.5f);
  Variable plain;
  const Variable w = TrainBoth(strategy, sgd, reference, plain, 2);
  ASSERT_EQ(w.components().size(), 1u);
  ExpectEveryCopyEquals(w, plain);
  EXPECT_EQ(sgd.slots().at("w/momentum").components().size(), 1u);
}

TEST(OptimizerOneDevice, OneReplica) {
  OneDeviceStrategy strategy(CpuDevices(2)[1]);
  Adam adam(0.1f), reference(0.1f);
  Variable plain;
  const Variable w = TrainBoth(strategy, adam, reference, plain, 2);
  ExpectEveryCopyEquals(w, plain);
  EXPECT_EQ(adam.slots().at("w/m").components().front().device(), strategy.devices()[0]);
}

TEST(OptimizerMirrored, CrossReplicaContextUpdatesEveryCopyWithTheSameGradient) {
  MirroredStrategy strategy(CpuDevices(4), "reduction_to_one_device");
  auto scope = strategy.scope();
  Variable w = MakeVariable("w", {1, 2});
  SGD sgd(1.0f, 0.5f);
  sgd.apply_gradients({{Values({1, 1}), w}});
  for (const Tensor& copy : w.components()) EXPECT_EQ(copy.ToVector(), (std::vector<float>{0, 1}));
  EXPECT_EQ(sgd.slots().at("w/momentum").components().size(), 4u);
}

// ---- errors --------------------------------------------------------------------------------

TEST(OptimizerErrors, GradientShapeMustMatchTheVariable) {
  Variable w = MakeVariable("w", {1, 2});
  SGD sgd;
  ExpectInvalidArgument(
      [&] {
        sgd.apply_gradients({{Values({1, 2, 3}), w}});
      },
      "the gradient of variable 'w' has shape [3] but the variable has shape [2]");
  EXPECT_EQ(sgd.iterations(), 0);
}

TEST(OptimizerErrors, ShapeMismatchInAReplicaContext) {
  MirroredStrategy strategy(CpuDevices(4), "reduction_to_one_device");
  Variable w;
  {
    auto scope = strategy.scope();
    w = MakeVariable("w", {1, 2});
  }
  SGD sgd;
  ExpectInvalidArgument(
      [&] {
        strategy.run([&](ReplicaContext& ctx) {
          sgd.apply_gradients({{Values({1}, ctx.device()), w}});
        });
      },
      "has shape [1] but the variable has shape [2]");
}

TEST(OptimizerErrors, VariableCreatedOutsideTheScope) {
  MirroredStrategy strategy(CpuDevices(4), "reduction_to_one_device");
  Variable x = MakeVariable("x", {1});
  SGD sgd;
  ExpectInvalidArgument(
      [&] {
        strategy.run([&](ReplicaContext& ctx) {
          sgd.apply_gradients({{Values({1}, ctx.device()), x}});
        });
      },
      "variable 'x' was created outside the scope of MirroredStrategy; create it inside "
      "strategy.scope()");
  EXPECT_EQ(x.value().ToVector(), std::vector<float>{1});
}

TEST(OptimizerErrors, UndefinedGradientNonTrainableAndEmpty) {
  Variable w = MakeVariable("w", {1});
  VariableSpec spec;
  spec.name = "frozen";
  spec.trainable = false;
  Variable frozen = Variable::Create(spec, {1}, {1});
  SGD sgd;
  ExpectInvalidArgument(
      [&] {
        sgd.apply_gradients({{Tensor(), w}});
      },
      "the gradient of variable 'w' is undefined");
  ExpectInvalidArgument(
      [&] {
        sgd.apply_gradients({{Values({1}), frozen}});
      },
      "variable 'frozen' is not trainable");
  ExpectInvalidArgument([&] { sgd.apply_gradients({}); }, "no gradients");
  Variable twin = MakeVariable("w", {1});
  ExpectInvalidArgument(
      [&] {
        sgd.apply_gradients({{Values({1}), w}, {Values({1}), twin}});
      },
      "variable name 'w' appears twice");
}

}  // namespace
}  // namespace chorus
