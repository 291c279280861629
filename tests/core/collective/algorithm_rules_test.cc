// CHORUS_ALGORITHM: the rules' grammar and errors, and a Communicator that routes each operation
// by size to the collective a rule names (ranks as threads over an in-process store).
#include <chorus/base/error.h>
#include <chorus/collective/algorithm_rules.h>
#include <chorus/collective/communicator.h>
#include <chorus/conformance/rank_threads.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/registry.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace chorus {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(const std::string& text) {
  try {
    ParseAlgorithmRules(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
    return e.what();
  }
  return "";
}

TEST(AlgorithmRules, ParsesRangesWithSuffixesAndInf) {
  const auto rules =
      ParseAlgorithmRules("allreduce:0-64K=shm,64K-inf=gloo; all_gather:1M-2M=core_ring");
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0].op, CHORUS_OP_ALL_REDUCE);
  EXPECT_EQ(rules[0].min_bytes, 0u);
  EXPECT_EQ(rules[0].max_bytes, 65536u);
  EXPECT_EQ(rules[0].collective, "shm");
  EXPECT_EQ(rules[1].max_bytes, UINT64_MAX);
  EXPECT_EQ(rules[2].op, CHORUS_OP_ALL_GATHER);
  EXPECT_EQ(rules[2].min_bytes, 1u << 20);
  EXPECT_EQ(RouteFor(rules, CHORUS_OP_ALL_REDUCE, 65535), "shm");
  EXPECT_EQ(RouteFor(rules, CHORUS_OP_ALL_REDUCE, 65536), "gloo");
  EXPECT_EQ(RouteFor(rules, CHORUS_OP_ALL_GATHER, 5), std::nullopt);
  EXPECT_EQ(RouteFor(rules, CHORUS_OP_BROADCAST, 5), std::nullopt);
  EXPECT_EQ(DescribeRules(rules), "allreduce:0-64K=shm,64K-inf=gloo;allgather:1M-2M=core_ring");
}

TEST(AlgorithmRules, AutoAndEmptyMeanNoRules) {
  EXPECT_TRUE(ParseAlgorithmRules("AUTO").empty());
  EXPECT_TRUE(ParseAlgorithmRules("  ").empty());
}

TEST(AlgorithmRules, BadTextNamesTheProblem) {
  EXPECT_THAT(ErrorOf("allreduse:0-inf=gloo"), HasSubstr("'allreduse' is not an operation"));
  EXPECT_THAT(ErrorOf("0-inf=gloo"), HasSubstr("has no 'op:'"));
  EXPECT_THAT(ErrorOf("allreduce:0-1X=gloo"), HasSubstr("unknown suffix 'X'"));
  EXPECT_THAT(ErrorOf("allreduce:64K-1K=gloo"), HasSubstr("is empty"));
  EXPECT_THAT(ErrorOf("allreduce:0-inf="), HasSubstr("names no collective"));
  EXPECT_THAT(ErrorOf("allreduce:0=gloo"), HasSubstr("is not lo-hi=name"));
  EXPECT_THAT(ErrorOf("allreduce:0-64K=a,32K-inf=b"),
              HasSubstr("the ranges 0-64K and 32K-inf of allreduce overlap"));
  EXPECT_THAT(ErrorOf("allreduce:x-inf=gloo"), HasSubstr("CHORUS_ALGORITHM='allreduce:x-inf"));
}

bool HasCollective(const std::string& name) {
  for (const auto& n : Registry::Global().CollectiveNames()) {
    if (n == name) return true;
  }
  return false;
}

TEST(AlgorithmRules, AnUnknownCollectiveListsTheAvailableOnes) {
  try {
    PlanNamed(Registry::Global(), "core_ring", JobShape{},
              ParseAlgorithmRules("allreduce:0-inf=no_such_collective"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no_such_collective"));
    EXPECT_THAT(e.what(), HasSubstr("Available: core_ring"));
  }
}

// Three ranks; all_reduce below 1 KiB runs on gloo, the rest on core_ring. Both give the sum.
TEST(AlgorithmRules, ACommunicatorRoutesEachSizeToItsCollective) {
  if (!HasCollective("gloo")) GTEST_SKIP() << "the gloo plugin is not built here";
  constexpr int kRanks = 3;
  auto store = MakeInProcessStore();
  std::vector<std::vector<std::string>> used(kRanks);
  std::vector<std::vector<float>> small(kRanks), large(kRanks);
  const conformance::RankFailures failures = conformance::RunRankThreads(kRanks, [&](int rank) {
    CommunicatorConfig config;
    config.rank = rank;
    config.size = kRanks;
    config.store = store;
    config.timeout_seconds = 30;
    config.address = "127.0.0.1";
    const auto plan = PlanNamed(Registry::Global(), "core_ring", JobShape{},
                                ParseAlgorithmRules("allreduce:0-1K=gloo"));
    auto comm = Communicator::Create(Registry::Global(), plan, config);
    small[rank].assign(3, static_cast<float>(rank + 1));
    large[rank].assign(1001, static_cast<float>(rank + 1));
    used[rank].push_back(comm->BackendFor(CHORUS_OP_ALL_REDUCE, 3 * sizeof(float)));
    used[rank].push_back(comm->BackendFor(CHORUS_OP_ALL_REDUCE, 1001 * sizeof(float)));
    used[rank].push_back(comm->BackendFor(CHORUS_OP_BROADCAST, 4));
    comm->AllReduce(small[rank].data(), small[rank].data(), 3, CHORUS_F32, CHORUS_REDUCE_SUM);
    comm->AllReduce(large[rank].data(), large[rank].data(), 1001, CHORUS_F32, CHORUS_REDUCE_SUM);
  });
  ASSERT_EQ(failures.Joined(), "");
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(used[rank], (std::vector<std::string>{"gloo", "core_ring", "core_ring"}));
    EXPECT_EQ(small[rank], std::vector<float>(3, 6.0f));
    EXPECT_EQ(large[rank], std::vector<float>(1001, 6.0f));
  }
}

}  // namespace
}  // namespace chorus
