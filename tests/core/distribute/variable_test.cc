// Variables under each strategy: placement, and tf.distribute's read/write rules in replica and
// cross-replica context.
#include <chorus/base/error.h>
#include <chorus/distribute/strategies.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>

#include "cpu_devices_for_tests.h"

namespace chorus {
namespace {

using test::CpuDevices;
using test::ExpectMessage;
using test::Filled;

VariableSpec Spec(const std::string& name, VariableAggregation aggregation,
                  VariableSynchronization sync = VariableSynchronization::kAuto,
                  bool trainable = true) {
  return VariableSpec{name, trainable, sync, aggregation};
}

class Mirrored4 : public ::testing::Test {
 protected:
  MirroredStrategy strategy_{CpuDevices(4), "reduction_to_one_device"};
  Tensor Replica(ReplicaContext& ctx, float scale) {
    return Filled(ctx.device(), {2},
                  scale * static_cast<float>(ctx.replica_id_in_sync_group() + 1));
  }
};

TEST_F(Mirrored4, AMirroredVariableHasACopyPerDevice) {
  Variable w;
  {
    auto scope = strategy_.scope();
    w = Variable::Create(Spec("w", VariableAggregation::kNone), {2}, {1, 2});
  }
  EXPECT_EQ(w.synchronization(), VariableSynchronization::kOnWrite);
  ASSERT_EQ(w.components().size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(w.components()[i].device(), strategy_.devices()[i]);
    EXPECT_EQ(w.components()[i].ToVector(), (std::vector<float>{1, 2}));
  }
  EXPECT_TRUE(strategy_.extended().variable_created_in_scope(w));
  EXPECT_EQ(strategy_.experimental_local_results(w).size(), 4u);
}

TEST_F(Mirrored4, ReplicaWriteWithoutAggregationIsAnError) {
  auto scope = strategy_.scope();
  Variable w = Variable::Create(Spec("w", VariableAggregation::kNone), {2}, {0, 0});
  ExpectMessage([&] { strategy_.run([&](ReplicaContext& ctx) { w.assign(Replica(ctx, 1)); }); },
                "variable 'w' is written in a replica context but its aggregation is NONE");
}

TEST_F(Mirrored4, ReplicaWritesAggregateIntoEveryCopy) {
  auto scope = strategy_.scope();
  Variable sum = Variable::Create(Spec("sum", VariableAggregation::kSum), {2}, {0, 0});
  Variable mean = Variable::Create(Spec("mean", VariableAggregation::kMean), {2}, {1, 1});
  Variable first =
      Variable::Create(Spec("first", VariableAggregation::kOnlyFirstReplica), {2}, {0, 0});
  strategy_.run([&](ReplicaContext& ctx) {
    sum.assign(Replica(ctx, 1));       // 1+2+3+4
    mean.assign_add(Replica(ctx, 2));  // 1 + mean(2,4,6,8)
    first.assign(Replica(ctx, 10));    // replica 0's 10
    EXPECT_EQ(sum.value().device(), ctx.device());
  });
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(sum.components()[i].ToVector(), (std::vector<float>{10, 10}));
    EXPECT_EQ(mean.components()[i].ToVector(), (std::vector<float>{6, 6}));
    EXPECT_EQ(first.components()[i].ToVector(), (std::vector<float>{10, 10}));
  }
}

TEST_F(Mirrored4, SyncOnReadVariablesAggregateWhenReadAcrossReplicas) {
  auto scope = strategy_.scope();
  Variable count = Variable::Create(
      Spec("count", VariableAggregation::kSum, VariableSynchronization::kOnRead, false), {2},
      {0, 0});
  Variable avg = Variable::Create(
      Spec("avg", VariableAggregation::kMean, VariableSynchronization::kOnRead, false), {2},
      {0, 0});
  strategy_.run([&](ReplicaContext& ctx) {
    count.assign_add(Replica(ctx, 1));
    avg.assign(Replica(ctx, 1));
    // Inside a replica the local value is seen.
    EXPECT_EQ(count.value().ToVector()[0], static_cast<float>(ctx.replica_id_in_sync_group() + 1));
  });
  EXPECT_EQ(count.value().ToVector(), (std::vector<float>{10, 10}));
  EXPECT_EQ(avg.value().ToVector(), (std::vector<float>{2.5f, 2.5f}));
  // A cross-replica assign of a SUM variable splits the value over the copies.
  count.assign(Filled(strategy_.devices()[0], {2}, 8));
  EXPECT_EQ(count.components()[3].ToVector(), (std::vector<float>{2, 2}));
  EXPECT_EQ(count.value().ToVector(), (std::vector<float>{8, 8}));
  ExpectMessage([&] { count.assign_add(Filled(strategy_.devices()[0], {2}, 1)); },
                "cannot be assign_add/assign_sub'ed in cross-replica context");
}

TEST_F(Mirrored4, SyncOnReadWithoutAggregationCannotBeReadAcrossReplicas) {
  auto scope = strategy_.scope();
  Variable v = Variable::Create(
      Spec("v", VariableAggregation::kNone, VariableSynchronization::kOnRead, false), {1}, {0});
  ExpectMessage([&] { v.value(); }, "is read in cross-replica context but its aggregation is NONE");
}

TEST_F(Mirrored4, BadSpecsAreErrors) {
  auto scope = strategy_.scope();
  ExpectMessage(
      [&] {
        Variable::Create(Spec("t", VariableAggregation::kSum, VariableSynchronization::kOnRead),
                         {1}, {0});
      },
      "ON_READ is only for non-trainable variables");
  ExpectMessage(
      [&] {
        Variable::Create(Spec("n", VariableAggregation::kSum, VariableSynchronization::kNone), {1},
                         {0});
      },
      "synchronization NONE is not supported under MirroredStrategy");
  ExpectMessage(
      [&] {
        strategy_.run([](ReplicaContext&) {
          Variable::Create(Spec("late", VariableAggregation::kNone), {1}, {0});
        });
      },
      "is created inside a replica function");
}

TEST_F(Mirrored4, AVariableCreatedOutsideTheScopeIsAClearError) {
  Variable outside = Variable::Create(Spec("outside", VariableAggregation::kSum), {1}, {0});
  EXPECT_EQ(outside.strategy(), nullptr);
  EXPECT_EQ(outside.components().size(), 1u);
  ExpectMessage([&] { strategy_.run([&](ReplicaContext&) { outside.value(); }); },
                "variable 'outside' was created outside the scope of MirroredStrategy");
}

TEST_F(Mirrored4, ExtendedUpdateTouchesEveryCopyAndOnlyInCrossReplicaContext) {
  auto scope = strategy_.scope();
  Variable w = Variable::Create(Spec("w", VariableAggregation::kNone), {1}, {0});
  strategy_.extended().update(w, [](const Tensor& copy, size_t i) {
    copy.Assign(Tensor::FromVector(copy.device(), {1}, {static_cast<float>(i)}));
  });
  EXPECT_EQ(w.components()[3].ToVector(), std::vector<float>{3});
  ExpectMessage(
      [&] { strategy_.run([&](ReplicaContext&) { strategy_.extended().update(w, nullptr); }); },
      "must be called in cross-replica context");
  {
    auto colocated = strategy_.extended().colocate_vars_with(w);
    Variable slot = Variable::Create(Spec("slot", VariableAggregation::kNone), {3}, {0, 0, 0});
    EXPECT_EQ(slot.components().size(), 4u);
    EXPECT_EQ(slot.strategy(), &strategy_);
  }
}

TEST(CentralStorage, OneCopyOnTheParameterDeviceUpdatedFromReplicas) {
  auto devices = CpuDevices(4);
  CentralStorageStrategy strategy({devices[1], devices[2], devices[3]}, devices[0]);
  auto scope = strategy.scope();
  Variable w = Variable::Create(Spec("w", VariableAggregation::kMean), {2}, {0, 0});
  ASSERT_EQ(w.components().size(), 1u);
  EXPECT_EQ(w.components()[0].device(), devices[0]);
  strategy.run([&](ReplicaContext& ctx) {
    w.assign(Filled(ctx.device(), {2}, static_cast<float>(ctx.replica_id_in_sync_group())));
  });
  EXPECT_EQ(w.value().ToVector(), (std::vector<float>{1, 1}));  // mean of 0, 1, 2
  Variable local = Variable::Create(
      Spec("local", VariableAggregation::kSum, VariableSynchronization::kOnRead, false), {1}, {0});
  EXPECT_EQ(local.components().size(), 3u);  // ON_READ stays on the compute devices
}

TEST(OneDevice, OneReplicaOneCopy) {
  OneDeviceStrategy strategy(CpuDevices(2)[1]);
  EXPECT_EQ(strategy.num_replicas_in_sync(), 1);
  auto scope = strategy.scope();
  Variable w = Variable::Create(Spec("w", VariableAggregation::kNone), {1}, {5});
  ASSERT_EQ(w.components().size(), 1u);
  EXPECT_EQ(w.components()[0].device(), strategy.devices()[0]);
  strategy.run([&](ReplicaContext&) { EXPECT_EQ(w.value().ToVector(), std::vector<float>{5}); });
}

}  // namespace
}  // namespace chorus
