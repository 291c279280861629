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
#include <atomic>
#include <chrono>
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

  // Runs `body` on ranks as threads over one in-process store; each rank's error ("" if none).
  template <typename Body>
  std::vector<std::string> OnRanks(int size, Body body) {
    auto store = MakeInProcessStore();
    std::vector<std::string> errors(static_cast<size_t>(size));
    std::vector<std::thread> ranks;
    for (int rank = 0; rank < size; ++rank) {
      ranks.emplace_back([&, rank] {
        try {
          CommunicatorConfig config;
          config.rank = rank;
          config.size = size;
          config.store = store;
          config.timeout_seconds = 30;
          body(rank, config);
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(rank)] = e.what();
        }
      });
    }
    for (auto& t : ranks) t.join();
    return errors;
  }
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
  std::vector<std::vector<float>> results(kRanks);
  const auto errors = OnRanks(kRanks, [&](int rank, CommunicatorConfig config) {
    auto comm = Communicator::Create(
        registry_, PlanNamed(registry_, "fake_barrier@tcp", Ranks(kRanks, 1)), config);
    comm->Barrier();
    std::vector<float> data(1001, static_cast<float>(rank + 1));
    comm->AllReduce(data.data(), data.data(), data.size(), CHORUS_F32, CHORUS_REDUCE_SUM);
    comm->Barrier();
    results[static_cast<size_t>(rank)] = data;
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
    ASSERT_EQ(results[rank].size(), 1001u);
    EXPECT_TRUE(
        std::all_of(results[rank].begin(), results[rank].end(), [](float v) { return v == 6.0f; }))
        << "rank " << rank;
  }
}

// ABI 1.6, with the fake "fake_vendor16" (an algorithm and a transport that check the context
// their tables declare) and "fake_unknown" (an algorithm that scores CHORUS_SCORE_UNKNOWN).
class AbiOneSix : public AlgorithmPairs {
 protected:
  Registry vendor_{OnlyFakePlugins("fake_vendor16,fake_unknown")};
};

TEST_F(AbiOneSix, ScoresAndRunsGetTheirTablesContext) {
  // The pair's score asks the algorithm with its capabilities' context (else the fake says 0).
  const auto pair = vendor_.FindCollective("fake_vendor16@tcp", "test");
  EXPECT_EQ(ScoreValue(pair.api->capabilities, ScoreArgs(CHORUS_OP_BARRIER, CHORUS_U8, 0,
                                                         Ranks(2, 1), CHORUS_REQUEST_AUTO)),
            8u);
  // Its run gets the algorithm table's context (else the fake fails the barrier).
  const auto errors = OnRanks(2, [&](int, CommunicatorConfig config) {
    auto comm =
        Communicator::Create(vendor_, PlanNamed(vendor_, "fake_vendor16@tcp", Ranks(2, 1)), config);
    comm->Barrier();
  });
  EXPECT_EQ(errors, std::vector<std::string>(2, ""));
}

TEST_F(AbiOneSix, ATransportGetsItsContextTheJobAndAnObjectIdTheSameOnEveryRank) {
  const auto errors = OnRanks(3, [&](int, CommunicatorConfig config) {
    Communicator::Create(vendor_, PlanNamed(vendor_, "fake_vendor16@fake_vendor16", Ranks(3, 1)),
                         config);
  });
  // The fake's create fails on purpose, saying what it was handed.
  std::vector<std::string> handed;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string& error = errors[static_cast<size_t>(rank)];
    const auto at = error.find("(context ");
    ASSERT_NE(at, std::string::npos) << error;
    const std::string what = error.substr(at, error.find(')', at) - at);
    EXPECT_THAT(what, HasSubstr("context ok, job "));
    EXPECT_THAT(what, HasSubstr(", task " + std::to_string(rank) + " of 3, object "));
    // The same job and object on every rank: drop the task's words.
    const auto task = what.find(", task ");
    handed.push_back(what.substr(0, task) + what.substr(what.find(", object ")));
  }
  EXPECT_EQ(handed[0], handed[1]);
  EXPECT_EQ(handed[0], handed[2]);
  // A second communicator of the same job: the same job id, another object id.
  const auto store = MakeInProcessStore();
  std::vector<std::string> objects;
  for (int round = 0; round < 2; ++round) {
    CommunicatorConfig config;
    config.store = store;
    config.timeout_seconds = 30;
    try {
      Communicator::Create(vendor_, PlanNamed(vendor_, "fake_vendor16@fake_vendor16", Ranks(1, 1)),
                           config);
      FAIL() << "the fake transport's create should fail";
    } catch (const Error& e) {
      const std::string message = e.what();
      objects.push_back(message.substr(message.find(", job ")));
    }
  }
  ASSERT_EQ(objects.size(), 2u);
  const auto job_of = [](const std::string& text) { return text.substr(0, text.find(',', 2)); };
  EXPECT_EQ(job_of(objects[0]), job_of(objects[1]));
  EXPECT_NE(objects[0], objects[1]);
}

TEST_F(AbiOneSix, AJobIdOfTheCallersIsHandedOnAndABadOneIsRefused) {
  CommunicatorConfig config;
  config.store = MakeInProcessStore();
  config.timeout_seconds = 30;
  config.job_id = "train-7";
  const CollectivePlan plan = PlanNamed(vendor_, "fake_vendor16@fake_vendor16", Ranks(1, 1));
  try {
    Communicator::Create(vendor_, plan, config);
    FAIL() << "the fake transport's create should fail";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("job train-7, task 0 of 1, object train-7-"));
  }
  config.job_id = "my job";
  try {
    Communicator::Create(vendor_, plan, config);
    FAIL() << "a job id with a blank should be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
    EXPECT_THAT(e.what(), HasSubstr("job_id 'my job' must be at most 47 characters"));
  }
}

TEST_F(AbiOneSix, AnAlgorithmQuotesTheTransportsWordsThroughP2pLastError) {
  const auto errors = OnRanks(2, [&](int rank, CommunicatorConfig config) {
    config.check_signatures = false;  // whose exchange would run on the ring, not the fake
    auto comm =
        Communicator::Create(vendor_, PlanNamed(vendor_, "fake_vendor16@tcp", Ranks(2, 1)), config);
    // Rank 1 closes its connections at once: rank 0's barrier loses its peer.
    if (rank == 0) comm->Barrier();
  });
  EXPECT_EQ(errors[1], "");
  // The fake's message, then what chorus_p2p.last_error gave it: the tcp transport's words.
  EXPECT_THAT(errors[0], HasSubstr("fake_vendor16: a message of the barrier failed: "));
  const std::string after = errors[0].substr(errors[0].find("barrier failed: ") + 16);
  EXPECT_THAT(after, HasSubstr("rank 1")) << errors[0];
}

TEST_F(AbiOneSix, AnUnknownScoreRanksBelowEveryKnownOneAndIsAlwaysAnAutotuningCandidate) {
  const JobShape two = Ranks(2, 1);  // args.memory points into it
  const auto args = ScoreArgs(CHORUS_OP_BARRIER, CHORUS_U8, 0, two, CHORUS_REQUEST_AUTO);
  const auto pair = vendor_.FindCollective("fake_unknown@tcp", "test");
  const Score score = ScoreOf(pair.api->capabilities, args);
  EXPECT_TRUE(score.unknown);
  EXPECT_EQ(score.value, 1u);
  EXPECT_EQ(score.Text(), "unknown");
  // Unknown x known is unknown; it ranks below core_ring's 5 and the known pairs.
  const auto ranked = RankCollectives(vendor_, args);
  ASSERT_FALSE(ranked.empty());
  EXPECT_NE(ranked.front().name, "fake_unknown@tcp");
  EXPECT_EQ(
      Decide(vendor_, PlanCollectives(vendor_, CommunicationImplementation::kAuto, Ranks(2, 1)),
             CHORUS_OP_BARRIER, CHORUS_U8, 0)
          .collective,
      "fake_vendor16@fake_vendor16");
  // Autotuning measures it, whatever CHORUS_AUTOTUNE_CANDIDATES says: ring@fake_unknown (the
  // core's ring over the fake's transport, which scores unknown) beside the best known one.
  // Without a measurement the known one serves.
  setenv("CHORUS_AUTOTUNE", "1", 1);
  setenv("CHORUS_AUTOTUNE_CANDIDATES", "1", 1);
  const CollectivePlan plan =
      PlanCollectives(vendor_, CommunicationImplementation::kAuto, Ranks(2, 1));
  unsetenv("CHORUS_AUTOTUNE");
  unsetenv("CHORUS_AUTOTUNE_CANDIDATES");
  EXPECT_THAT(plan.autotune_candidates, Contains("ring@fake_vendor16"));  // 50 x 30 / 100
  EXPECT_THAT(plan.autotune_candidates, Contains("ring@fake_unknown"));
  EXPECT_EQ(
      Decide(vendor_, PlanCollectives(vendor_, CommunicationImplementation::kAuto, Ranks(2, 1)),
             CHORUS_OP_ALL_REDUCE, CHORUS_F32, 1 << 20)
          .collective,
      "ring@fake_vendor16");
}

TEST_F(AbiOneSix, HostOfRankNumbersHostsInTheOrderOfTheirFirstRank) {
  const JobShape shape = JobShape::FromHostIds({"b", "a", "b", "c", "a", "c"});
  EXPECT_EQ(shape.host_of_rank, (std::vector<uint32_t>{0, 1, 0, 2, 1, 2}));
  const auto args = ScoreArgs(CHORUS_OP_ALL_REDUCE, CHORUS_F32, 4, shape, CHORUS_REQUEST_AUTO);
  ASSERT_NE(args.host_of_rank, nullptr);
  EXPECT_EQ(args.host_of_rank[3], 2u);
  EXPECT_EQ(shape.WithinOneHost().host_of_rank, (std::vector<uint32_t>{0, 0}));
  EXPECT_EQ(shape.OnePerHost().host_of_rank, (std::vector<uint32_t>{0, 1, 2}));
  // A shape known by its counts alone hands no array.
  EXPECT_EQ(
      ScoreArgs(CHORUS_OP_ALL_REDUCE, CHORUS_F32, 4, Ranks(4, 2), CHORUS_REQUEST_AUTO).host_of_rank,
      nullptr);
}

}  // namespace
}  // namespace chorus
