// The collectives "algorithm@transport" the registry makes of every algorithm and transport it
// has loaded (ABI 1.3): names, the alias ring@tcp = core_ring, scores (algorithm x transport /
// 100), selection by name and by AUTO, and a pair running over the core's tcp with ranks as
// threads: its own barrier, and the core's ring for the operations it does not implement. The
// fake plugin "fake_barrier" ships an algorithm that implements only the barrier and scores 80.
#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>
#include <chorus/collective/selection.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/loader.h>
#include <chorus/runtime/registry.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "fake_plugin_options.h"

namespace chorus {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

using test::OnlyFakePlugins;

JobShape Ranks(int ranks, int hosts) {
  JobShape shape;
  shape.ranks = ranks;
  shape.hosts = hosts;
  shape.ranks_per_host = ranks / hosts;
  return shape;
}

class AlgorithmPairs : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override { Clear(); }
  static void Clear() {
    for (const char* name : {"CHORUS_COMMUNICATION", "CHORUS_ALGORITHM", "CHORUS_TUNING_FILE"}) {
      unsetenv(name);
    }
  }
  Registry registry_{OnlyFakePlugins("fake_barrier")};
};

TEST_F(AlgorithmPairs, EveryAlgorithmMeetsEveryTransport) {
  // The core's ring over its tcp is core_ring, not made again; the fake's algorithm over tcp is.
  const auto names = registry_.CollectiveNames();
  EXPECT_THAT(names, Contains("core_ring"));
  EXPECT_THAT(names, Contains("fake_barrier@tcp"));
  EXPECT_THAT(names, Not(Contains("ring@tcp")));
  EXPECT_EQ(registry_.FindCollective("ring@tcp", "test").api->name, std::string("core_ring"));
  const auto pair = registry_.FindCollective("fake_barrier@tcp", "test");
  ASSERT_EQ(pair.parts.size(), 2u);
  EXPECT_EQ(pair.parts[0]->name(), "fake_barrier");
  EXPECT_EQ(pair.parts[1]->name(), "core");
  // The builtin plugin's name still stands for its one own collective.
  EXPECT_EQ(registry_.FindCollective("core", "test").api->name, std::string("core_ring"));
  EXPECT_EQ(CanonicalCollectiveName(registry_, "ring@tcp"), "core_ring");

  Registry bare(OnlyFakePlugins("none"));
  EXPECT_EQ(bare.CollectiveNames(), std::vector<std::string>{"core_ring"});
}

TEST_F(AlgorithmPairs, APairScoresItsAlgorithmTimesItsTransport) {
  const auto pair = registry_.FindCollective("fake_barrier@tcp", "test");
  // 80 x tcp's 10 / 100 under AUTO; tcp carries RING at 50 but the fake scores 0 there.
  EXPECT_EQ(ScoreValue(pair.api->capabilities, ScoreArgs(CHORUS_OP_BARRIER, CHORUS_U8, 0,
                                                         Ranks(4, 2), CHORUS_REQUEST_AUTO)),
            8u);
  EXPECT_EQ(ScoreValue(pair.api->capabilities, ScoreArgs(CHORUS_OP_BARRIER, CHORUS_U8, 0,
                                                         Ranks(4, 2), CHORUS_REQUEST_RING)),
            0u);
  // Only the algorithm's ops are declared: the ring it falls back on is chosen by name only.
  const Score all_reduce = ScoreOf(
      pair.api->capabilities,
      ScoreArgs(CHORUS_OP_ALL_REDUCE, CHORUS_F32, 1 << 20, Ranks(4, 2), CHORUS_REQUEST_AUTO));
  EXPECT_EQ(all_reduce.value, 0u);
  EXPECT_THAT(all_reduce.reason, HasSubstr("does not implement all_reduce"));

  // AUTO routes the barrier to the pair (8 > core_ring's 5) and keeps all_reduce on core_ring.
  const CollectivePlan plan =
      PlanCollectives(registry_, CommunicationImplementation::kAuto, Ranks(4, 2));
  EXPECT_EQ(plan.collectives.front(), "core_ring");
  EXPECT_THAT(plan.collectives, Contains("fake_barrier@tcp"));
  EXPECT_EQ(Decide(registry_, plan, CHORUS_OP_BARRIER, CHORUS_U8, 0).collective,
            "fake_barrier@tcp");
  EXPECT_EQ(Decide(registry_, plan, CHORUS_OP_ALL_REDUCE, CHORUS_F32, 1 << 20).collective,
            "core_ring");
}

TEST_F(AlgorithmPairs, VariablesNameAPair) {
  setenv("CHORUS_COMMUNICATION", "fake_barrier@tcp", 1);
  EXPECT_EQ(PlanCollectives(registry_, CommunicationImplementation::kAuto, Ranks(2, 1)).fixed,
            "fake_barrier@tcp");
  setenv("CHORUS_COMMUNICATION", "ring@tcp", 1);
  EXPECT_EQ(PlanCollectives(registry_, CommunicationImplementation::kAuto, Ranks(2, 1)).fixed,
            "core_ring");
  setenv("CHORUS_COMMUNICATION", "AUTO", 1);
  setenv("CHORUS_ALGORITHM", "allreduce:0-64K=fake_barrier@tcp,64K-inf=ring@tcp", 1);
  const CollectivePlan plan =
      PlanCollectives(registry_, CommunicationImplementation::kAuto, Ranks(2, 1));
  EXPECT_EQ(Decide(registry_, plan, CHORUS_OP_ALL_REDUCE, CHORUS_F32, 4096).collective,
            "fake_barrier@tcp");
  EXPECT_EQ(Decide(registry_, plan, CHORUS_OP_ALL_REDUCE, CHORUS_F32, 1 << 20).collective,
            "core_ring");
  // An unknown pair lists what there is.
  setenv("CHORUS_COMMUNICATION", "fake_barrier@ucx_not_here", 1);
  try {
    PlanCollectives(registry_, CommunicationImplementation::kAuto, Ranks(2, 1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'fake_barrier@ucx_not_here', which no loaded plugin"));
    EXPECT_THAT(e.what(), HasSubstr("fake_barrier@tcp"));
  }
}

// Three ranks as threads over an in-process store: the pair's own barrier, and all_reduce and
// broadcast on the core's ring over the same tcp endpoints.
TEST_F(AlgorithmPairs, APairRunsItsAlgorithmAndTheRingForTheRest) {
  constexpr int kRanks = 3;
  auto store = MakeInProcessStore();
  std::vector<std::string> errors(kRanks);
  std::vector<std::vector<float>> results(kRanks);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kRanks; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        CommunicatorConfig config;
        config.rank = rank;
        config.size = kRanks;
        config.store = store;
        config.timeout_seconds = 30;
        auto comm = Communicator::Create(
            registry_, PlanNamed(registry_, "fake_barrier@tcp", Ranks(kRanks, 1)), config);
        comm->Barrier();
        std::vector<float> data(1001, static_cast<float>(rank + 1));
        comm->AllReduce(data.data(), data.data(), data.size(), CHORUS_F32, CHORUS_REDUCE_SUM);
        comm->Barrier();
        results[rank] = data;
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
    ASSERT_EQ(results[rank].size(), 1001u);
    EXPECT_TRUE(
        std::all_of(results[rank].begin(), results[rank].end(), [](float v) { return v == 6.0f; }))
        << "rank " << rank;
  }
}

}  // namespace
}  // namespace chorus
