// Strategies: run, replica contexts, merge_call and its misuse, collectives in replica context,
// reduce/gather across replicas, CommunicationOptions.
#include <chorus/base/error.h>
#include <chorus/distribute/strategies.h>
#include <chorus/runtime/registry.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "cpu_devices_for_tests.h"

namespace chorus {
namespace {

using test::CpuDevices;
using test::ExpectMessage;
using test::Filled;

TEST(Strategy, RunGivesEachReplicaItsIdDeviceAndThread) {
  MirroredStrategy strategy(CpuDevices(4), "reduction_to_one_device");
  EXPECT_EQ(strategy.num_replicas_in_sync(), 4);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::thread::id replica_0_thread;
  PerReplica ids = strategy.run([&](ReplicaContext& ctx) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      threads.insert(std::this_thread::get_id());
      if (ctx.replica_id_in_sync_group() == 0) replica_0_thread = std::this_thread::get_id();
    }
    EXPECT_EQ(CurrentReplicaContext(), &ctx);
    EXPECT_EQ(CurrentStrategy(), &strategy);
    EXPECT_FALSE(InCrossReplicaContext());
    return Filled(ctx.device(), {1}, static_cast<float>(ctx.replica_id_in_sync_group()));
  });
  EXPECT_EQ(threads.size(), 4u);
  EXPECT_EQ(replica_0_thread, std::this_thread::get_id());  // the caller is replica 0
  ASSERT_EQ(ids.size(), 4u);
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_EQ(ids[r].ToVector(), std::vector<float>{static_cast<float>(r)});
    EXPECT_EQ(ids[r].device(), strategy.devices()[r]);
  }
  EXPECT_EQ(CurrentReplicaContext(), nullptr);
}

TEST(Strategy, PerReplicaArgumentsAreSplit) {
  MirroredStrategy strategy(CpuDevices(3), "reduction_to_one_device");
  const auto devices = strategy.devices();
  PerReplica in(
      {Filled(devices[0], {2}, 1), Filled(devices[1], {2}, 2), Filled(devices[2], {2}, 3)});
  PerReplica doubled = strategy.run(
      [](ReplicaContext& ctx, const Tensor& x, float factor) {
        std::vector<float> v = x.ToVector();
        for (float& e : v) e *= factor;
        return Tensor::FromVector(ctx.device(), x.shape(), v);
      },
      in, 2.0f);
  EXPECT_EQ(doubled[2].ToVector(), (std::vector<float>{6, 6}));
}

TEST(Strategy, AllReduceInReplicaContextSumMeanAndPacked) {
  for (int64_t bytes_per_pack : {0, 8, 1 << 20}) {
    CommunicationOptions options;
    options.bytes_per_pack = bytes_per_pack;
    MirroredStrategy strategy(CpuDevices(4), "reduction_to_one_device", options);
    strategy.run([](ReplicaContext& ctx) {
      const float id = static_cast<float>(ctx.replica_id_in_sync_group());
      const Tensor sum = ctx.all_reduce(CHORUS_REDUCE_SUM, Filled(ctx.device(), {3}, id));
      EXPECT_EQ(sum.ToVector(), std::vector<float>(3, 6.0f));
      EXPECT_EQ(sum.device(), ctx.device());
      const auto several = ctx.all_reduce(
          CHORUS_REDUCE_MEAN, {Filled(ctx.device(), {5}, id), Filled(ctx.device(), {1}, 2 * id),
                               Filled(ctx.device(), {0}, 0), Filled(ctx.device(), {2, 3}, 1)});
      EXPECT_EQ(several[0].ToVector(), std::vector<float>(5, 1.5f));
      EXPECT_EQ(several[1].ToVector(), std::vector<float>(1, 3.0f));
      EXPECT_EQ(several[2].num_elements(), 0);
      EXPECT_EQ(several[3].shape(), (Shape{2, 3}));
      EXPECT_EQ(several[3].ToVector(), std::vector<float>(6, 1.0f));
    });
  }
}

// Tensors of 64 KiB or more are reduced straight from their storage into their own packs (out
// of place), beside packed small ones: the sums are right and no input changes.
TEST(Strategy, AllReduceOfLargeAndSmallTensorsLeavesTheInputsAlone) {
  for (int64_t bytes_per_pack : {0, 8, 1 << 20}) {
    CommunicationOptions options;
    options.bytes_per_pack = bytes_per_pack;
    MirroredStrategy strategy(CpuDevices(3), "reduction_to_one_device", options);
    strategy.run([](ReplicaContext& ctx) {
      const float id = static_cast<float>(ctx.replica_id_in_sync_group());
      const std::vector<Tensor> inputs = {
          Filled(ctx.device(), {3}, id), Filled(ctx.device(), {200, 100}, id + 1),
          Filled(ctx.device(), {1}, 2 * id), Filled(ctx.device(), {16384}, 10 * id)};
      const auto sums = ctx.all_reduce(CHORUS_REDUCE_SUM, inputs);
      ASSERT_EQ(sums.size(), 4u);
      EXPECT_EQ(sums[0].ToVector(), std::vector<float>(3, 3.0f));
      EXPECT_EQ(sums[1].shape(), (Shape{200, 100}));
      EXPECT_EQ(sums[1].ToVector(), std::vector<float>(20000, 6.0f));
      EXPECT_EQ(sums[2].ToVector(), std::vector<float>(1, 6.0f));
      EXPECT_EQ(sums[3].ToVector(), std::vector<float>(16384, 30.0f));
      EXPECT_EQ(inputs[1].ToVector(), std::vector<float>(20000, id + 1));
      EXPECT_EQ(inputs[3].ToVector(), std::vector<float>(16384, 10 * id));
      for (const Tensor& sum : sums) EXPECT_EQ(sum.device(), ctx.device());
      const Tensor mean = ctx.all_reduce(CHORUS_REDUCE_MEAN, inputs[1]);
      EXPECT_EQ(mean.ToVector(), std::vector<float>(20000, 2.0f));
    });
  }
}

TEST(Strategy, AllReduceOfMismatchedShapesIsAnError) {
  MirroredStrategy strategy(CpuDevices(2), "reduction_to_one_device");
  ExpectMessage(
      [&] {
        strategy.run([](ReplicaContext& ctx) {
          ctx.all_reduce(CHORUS_REDUCE_SUM,
                         Filled(ctx.device(), {2 + ctx.replica_id_in_sync_group()}, 1));
        });
      },
      "all_reduce: tensor 0 is f32[3] on replica 1 but f32[2] on replica 0");
}

TEST(Strategy, AllGatherConcatenatesUnevenValues) {
  MirroredStrategy strategy(CpuDevices(3), "reduction_to_one_device");
  strategy.run([](ReplicaContext& ctx) {
    const int id = ctx.replica_id_in_sync_group();
    const Tensor gathered =
        ctx.all_gather(Filled(ctx.device(), {id, 2}, static_cast<float>(id)), 0);
    EXPECT_EQ(gathered.shape(), (Shape{3, 2}));
    EXPECT_EQ(gathered.ToVector(), (std::vector<float>{1, 1, 2, 2, 2, 2}));
  });
}

TEST(Strategy, MergeCallRunsOnceInCrossReplicaContext) {
  MirroredStrategy strategy(CpuDevices(4), "reduction_to_one_device");
  std::atomic<int> merges{0};
  strategy.run([&](ReplicaContext& ctx) {
    const int total = ctx.merge_call<int, int>(
        [&](Strategy& s, const std::vector<int>& values) {
          ++merges;
          EXPECT_TRUE(InCrossReplicaContext());
          EXPECT_EQ(&s, &ctx.strategy());
          return values[0] + values[1] + values[2] + values[3];
        },
        ctx.replica_id_in_sync_group() + 1);
    EXPECT_EQ(total, 10);
  });
  EXPECT_EQ(merges.load(), 1);
}

TEST(Strategy, AReplicaSkippingMergeCallIsReportedNotWaitedFor) {
  MirroredStrategy strategy(CpuDevices(3), "reduction_to_one_device");
  ExpectMessage(
      [&] {
        strategy.run([](ReplicaContext& ctx) {
          if (ctx.replica_id_in_sync_group() == 2) return;
          ctx.merge_call<int, int>([](Strategy&, const std::vector<int>&) { return 0; }, 0);
        });
      },
      "every replica must make the same merge_call/all_reduce calls in the same order");
  // The strategy is usable again afterwards.
  PerReplica ok = strategy.run([](ReplicaContext& ctx) { return Filled(ctx.device(), {1}, 1); });
  EXPECT_EQ(ok.size(), 3u);
}

TEST(Strategy, DifferentCollectivesOnDifferentReplicasAreReported) {
  MirroredStrategy strategy(CpuDevices(2), "reduction_to_one_device");
  ExpectMessage(
      [&] {
        strategy.run([](ReplicaContext& ctx) {
          if (ctx.replica_id_in_sync_group() == 0) {
            ctx.all_reduce(CHORUS_REDUCE_SUM, Filled(ctx.device(), {1}, 1));
          } else {
            ctx.merge_call<int, int>([](Strategy&, const std::vector<int>&) { return 0; }, 0);
          }
        });
      },
      "called merge_call while replica 0 called all_reduce");
}

TEST(Strategy, AReplicaExceptionIsRethrownWithItsMessage) {
  MirroredStrategy strategy(CpuDevices(3), "reduction_to_one_device");
  // Replica 0 runs on the caller's thread, the others on their own.
  for (int broken : {0, 1}) {
    try {
      strategy.run([broken](ReplicaContext& ctx) {
        if (ctx.replica_id_in_sync_group() == broken) {
          throw std::runtime_error("replica " + std::to_string(broken) + " broke");
        }
        ctx.all_reduce(CHORUS_REDUCE_SUM, Filled(ctx.device(), {1}, 1));
      });
      FAIL();
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("replica " + std::to_string(broken) + " broke"),
                std::string::npos)
          << e.what();
    }
    EXPECT_EQ(CurrentReplicaContext(), nullptr);
  }
}

TEST(Strategy, ASlowReplicaTimesOutTheOthers) {
  CommunicationOptions options;
  options.timeout_seconds = 0.2;
  MirroredStrategy strategy(CpuDevices(2), "reduction_to_one_device", options);
  try {
    strategy.run([](ReplicaContext& ctx) {
      if (ctx.replica_id_in_sync_group() == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(800));
      }
      ctx.all_reduce(CHORUS_REDUCE_SUM, Filled(ctx.device(), {1}, 1));
    });
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("waited 0.2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("CHORUS_TIMEOUT_SECONDS"), std::string::npos);
  }
}

TEST(Strategy, ReduceMeanAlongTheBatchAxisWeighsUnevenBatches) {
  MirroredStrategy strategy(CpuDevices(3), "reduction_to_one_device");
  const auto d = strategy.devices();
  // Replica batches of 3, 1 and 0 examples (a short final batch).
  PerReplica losses({Tensor::FromVector(d[0], {3}, {1, 2, 3}), Tensor::FromVector(d[1], {1}, {6}),
                     Tensor::FromVector(d[2], {0}, {})});
  EXPECT_EQ(strategy.reduce(CHORUS_REDUCE_MEAN, losses, 0).ToVector(), std::vector<float>{3.0f});
  EXPECT_EQ(strategy.reduce(CHORUS_REDUCE_SUM, losses, 0).ToVector(), std::vector<float>{12.0f});
  PerReplica same({Filled(d[0], {2}, 1), Filled(d[1], {2}, 2), Filled(d[2], {2}, 6)});
  EXPECT_EQ(strategy.reduce(CHORUS_REDUCE_MEAN, same).ToVector(), (std::vector<float>{3, 3}));
  EXPECT_EQ(strategy.gather(losses, 0).ToVector(), (std::vector<float>{1, 2, 3, 6}));
  EXPECT_EQ(strategy.experimental_local_results(losses).size(), 3u);
}

TEST(Strategy, RunInsideRunAndMixedScopesAreErrors) {
  MirroredStrategy a(CpuDevices(2), "reduction_to_one_device");
  OneDeviceStrategy b(CpuDevices(1)[0]);
  ExpectMessage([&] { a.run([&](ReplicaContext&) { a.run([](ReplicaContext&) {}); }); },
                "run() was called inside a replica function");
  auto scope = a.scope();
  ExpectMessage([&] { auto inner = b.scope(); }, "inside the scope of another strategy");
}

TEST(Strategy, DuplicateDevicesAndNoDevicesAreErrors) {
  auto devices = CpuDevices(2);
  ExpectMessage(
      [&] {
        MirroredStrategy s({devices[0], devices[0]}, "reduction_to_one_device");
      },
      "is given twice");
  ExpectMessage([&] { OneDeviceStrategy s(Device{}); }, "replica device 0 is undefined");
}

TEST(Strategy, AnUnknownCrossDeviceOpsNameListsTheAvailableOnes) {
  ExpectMessage([&] { MirroredStrategy s(CpuDevices(2), "ncll"); },
                "the cross_device_ops argument names cross-device ops 'ncll'");
}

TEST(CommunicationOptions, CallOptionsOverrideTheStrategysAndTheEnvironmentFillsTheRest) {
  CommunicationOptions strategy_options;
  strategy_options.bytes_per_pack = 100;
  strategy_options.timeout_seconds = 5;
  CommunicationOptions call;
  call.timeout_seconds = 7;
  const auto merged = CommunicationOptions::Merge(strategy_options, call);
  EXPECT_EQ(*merged.bytes_per_pack, 100);
  EXPECT_EQ(*merged.timeout_seconds, 7);
  setenv("CHORUS_BYTES_PER_PACK", "4096", 1);
  setenv("CHORUS_TIMEOUT_SECONDS", "9", 1);
  const auto resolved = CommunicationOptions{}.Resolved();
  EXPECT_EQ(*resolved.bytes_per_pack, 4096);
  EXPECT_EQ(*resolved.timeout_seconds, 9);
  EXPECT_EQ(*merged.Resolved().bytes_per_pack, 100);  // explicit beats the variable
  setenv("CHORUS_BYTES_PER_PACK", "lots", 1);
  ExpectMessage([] { CommunicationOptions{}.Resolved(); }, "CHORUS_BYTES_PER_PACK='lots'");
  unsetenv("CHORUS_BYTES_PER_PACK");
  unsetenv("CHORUS_TIMEOUT_SECONDS");
}

}  // namespace
}  // namespace chorus
