// Autotuning (CHORUS_AUTOTUNE=1): the size bands, the tuning cache's checks (stale, truncated,
// another user's, torn by two writers), the candidates AUTO's plan gets, and a Communicator that
// times its candidates on its first all-reduces and makes every rank adopt the same winner, keeps
// it in the cache and starts decided from the cache (ranks as threads over an in-process store).
#include "collective/autotune.h"

#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>
#include <chorus/collective/selection.h>
#include <chorus/conformance/rank_threads.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/registry.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "scoped_variable.h"

namespace chorus {
namespace {

using internal::BandDecision;
using internal::BandOf;
using internal::ParseTuningCache;
using internal::ReadTuningCache;
using internal::TuningCacheKey;
using internal::WriteTuningCache;
using ::testing::HasSubstr;

TuningCacheKey Key() {
  TuningCacheKey key;
  key.workers = 2;
  key.hosts = 1;
  key.ranks_per_host = 2;
  key.chorus_version = "1.0.0";
  key.candidates = "shm (shm 1.1.0, ABI 1.5), core_ring (core 1.0.0, ABI 1.5)";
  return key;
}

std::vector<BandDecision> Decisions() {
  BandDecision small;
  small.band = BandOf(4096);
  small.winner = "shm";
  small.times_us = {{"shm", 2.5}, {"core_ring", 40.25}};
  BandDecision large;
  large.band = BandOf(uint64_t{1} << 20);
  large.winner = "core_ring";
  large.times_us = {{"shm", 900}, {"core_ring", 700}};
  return {small, large};
}

// A file in a folder of this test process's own, removed when the process ends.
std::string TempPath(const std::string& name) {
  struct Folder {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("chorus_autotune_test_" + std::to_string(getpid()));
    Folder() { std::filesystem::create_directories(path); }
    ~Folder() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Folder folder;
  return (folder.path / name).string();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  chmod(path.c_str(), 0644);
}

TEST(Autotune, BandsArePowersOfFourFromFourKiB) {
  EXPECT_EQ(BandOf(0).lo, 0u);
  EXPECT_EQ(BandOf(4095).hi, 4096u);
  EXPECT_EQ(BandOf(4096).lo, 4096u);
  EXPECT_EQ(BandOf(4096).hi, 16384u);
  EXPECT_EQ(BandOf(16383).lo, 4096u);
  EXPECT_EQ(BandOf(16384).lo, 16384u);
  EXPECT_EQ(BandOf(uint64_t{1} << 20).lo, uint64_t{1} << 20);
  EXPECT_EQ(BandOf(uint64_t{3} << 20).hi, uint64_t{4} << 20);
  EXPECT_EQ(BandOf(UINT64_MAX).hi, UINT64_MAX);
  EXPECT_EQ(internal::DescribeBand(BandOf(70000)), "64K-256K");
}

TEST(Autotune, TheFastestIsTheLowestSlowestRankMedianUnlessTheScoresPickIsClose) {
  EXPECT_EQ(internal::FastestCandidate({5, 3, 3, 9}, 4), 1u);
  // The scores' pick (index 0 here) keeps the band unless another is at least 10% faster.
  EXPECT_EQ(internal::FastestCandidate({10, 9.5, 12}, 0), 0u);
  EXPECT_EQ(internal::FastestCandidate({10, 8.9, 12}, 0), 1u);
  EXPECT_EQ(internal::MedianOf({9, 1, 5}), 5);
  EXPECT_EQ(internal::MedianOf({4, 1, 2, 3}), 2.5);
}

TEST(Autotune, ACacheReadsBackItsDecisionsAndIsATuningFile) {
  const std::string text = WriteTuningCache(Key(), Decisions());
  const auto read = ParseTuningCache(text, "cache", Key());
  EXPECT_EQ(read.problem, "");
  ASSERT_EQ(read.decisions.size(), 2u);
  EXPECT_EQ(read.decisions[0].winner, "shm");
  EXPECT_EQ(read.decisions[0].times_us[1].second, 40.25);
  EXPECT_EQ(read.decisions[1].band.lo, uint64_t{1} << 20);
  // As CHORUS_TUNING_FILE: the same decisions, for this job's shape.
  const TuningFile file = TuningFile::Parse(text, "cache");
  JobShape shape;
  shape.ranks = 2;
  shape.ranks_per_host = 2;
  EXPECT_EQ(DescribeRules(file.RulesFor(shape)), "allreduce:4K-16K=shm,1M-4M=core_ring");
}

TEST(Autotune, AStaleCacheIsIgnoredSayingWhy) {
  const std::string text = WriteTuningCache(Key(), Decisions());
  TuningCacheKey newer = Key();
  newer.chorus_version = "1.1.0";
  EXPECT_THAT(ParseTuningCache(text, "c", newer).problem,
              HasSubstr("was written by chorus 1.0.0, this is chorus 1.1.0"));
  TuningCacheKey bigger = Key();
  bigger.workers = 4;
  const auto shape = ParseTuningCache(text, "c", bigger);
  EXPECT_THAT(shape.problem, HasSubstr("is for a job of workers=2 hosts=1 ranks_per_host=2, this "
                                       "job is workers=4"));
  EXPECT_TRUE(shape.decisions.empty());
  TuningCacheKey other_plugins = Key();
  other_plugins.candidates += ", gloo (gloo 1.1.0, ABI 1.5)";
  EXPECT_THAT(ParseTuningCache(text, "c", other_plugins).problem,
              HasSubstr("other candidates or plugin versions"));
}

TEST(Autotune, ATruncatedOrForeignTextIsIgnoredSayingWhy) {
  const std::string text = WriteTuningCache(Key(), Decisions());
  const std::string cut = text.substr(0, text.rfind("#! end"));
  const auto truncated = ParseTuningCache(cut, "c", Key());
  EXPECT_THAT(truncated.problem, HasSubstr("is cut short"));
  EXPECT_TRUE(truncated.decisions.empty());
  EXPECT_THAT(ParseTuningCache("[workers=2 hosts=1]\nallreduce:0-inf=shm\n", "c", Key()).problem,
              HasSubstr("is not a chorus tuning cache"));
  std::string bad_band = text;
  bad_band.replace(bad_band.find("#! band 4096 16384"), 18, "#! band 4096 9999");
  EXPECT_THAT(ParseTuningCache(bad_band, "c", Key()).problem, HasSubstr("malformed band"));
}

TEST(Autotune, AFileNobodyElseMayWriteIsUsedAndAMissingOneIsNoProblem) {
  const std::string path = TempPath("mine");
  WriteFile(path, WriteTuningCache(Key(), Decisions()));
  const auto read = ReadTuningCache(path, Key());
  EXPECT_EQ(read.problem, "");
  EXPECT_EQ(read.decisions.size(), 2u);
  const auto missing = ReadTuningCache(TempPath("missing"), Key());
  EXPECT_EQ(missing.problem, "");
  EXPECT_TRUE(missing.decisions.empty());
}

TEST(Autotune, AFileOthersMayWriteOrAnotherUsersIsNotUsed) {
  const std::string path = TempPath("shared");
  WriteFile(path, WriteTuningCache(Key(), Decisions()));
  chmod(path.c_str(), 0666);
  const auto writable = ReadTuningCache(path, Key());
  EXPECT_THAT(writable.problem, HasSubstr("may be written by other users (mode 666)"));
  EXPECT_TRUE(writable.foreign);
  EXPECT_TRUE(writable.decisions.empty());
  chmod(path.c_str(), 0644);
  if (geteuid() != 0) GTEST_SKIP() << "giving the file to another user needs root";
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  const auto theirs = ReadTuningCache(path, Key());
  EXPECT_THAT(theirs.problem, HasSubstr("belongs to"));
  EXPECT_THAT(theirs.problem, HasSubstr("give the job a cache of its own"));
  EXPECT_TRUE(theirs.foreign);
}

TEST(Autotune, TwoWritersNeverLeaveATornFile) {
  const std::string path = TempPath("raced");
  TuningCacheKey a = Key();
  TuningCacheKey b = Key();
  b.workers = 3;  // another text, as another job's
  const std::string text_a = WriteTuningCache(a, Decisions());
  const std::string text_b = WriteTuningCache(b, Decisions());
  internal::ReplaceFileAtomically(path, text_a);
  std::atomic<bool> done{false};
  std::atomic<int> torn{0};
  std::thread reader([&] {
    while (!done.load()) {
      std::ifstream in(path, std::ios::binary);
      std::stringstream read;
      read << in.rdbuf();
      if (read.str() != text_a && read.str() != text_b) ++torn;
    }
  });
  std::thread writer_a([&] {
    for (int i = 0; i < 200; ++i) internal::ReplaceFileAtomically(path, text_a);
  });
  std::thread writer_b([&] {
    for (int i = 0; i < 200; ++i) internal::ReplaceFileAtomically(path, text_b);
  });
  writer_a.join();
  writer_b.join();
  done = true;
  reader.join();
  EXPECT_EQ(torn.load(), 0);
  // No temporary file is left beside it.
  int files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
    if (entry.path().filename().string().rfind("raced", 0) == 0) ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(Autotune, AnUnwritableCachePathIsAnErrorNamingIt) {
  try {
    internal::ReplaceFileAtomically("/nonexistent-folder/cache", "x");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_UNAVAILABLE);
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent-folder/cache"));
  }
}

TEST(Autotune, ABadVariableIsAnErrorNamingIt) {
  test::ScopedVariable autotune("CHORUS_AUTOTUNE", "yes");
  try {
    internal::AutotuneSettings::FromEnvironment();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("CHORUS_AUTOTUNE='yes' is not 0 or 1"));
  }
}

JobShape TwoRanksOnOneHost() {
  JobShape shape;
  shape.ranks = 2;
  shape.ranks_per_host = 2;
  return shape;
}

TEST(Autotune, AutosPlanIgnoresTheNamingVariablesAndTakesTheCandidates) {
  test::ScopedVariable communication("CHORUS_COMMUNICATION", "core_ring");
  test::ScopedVariable algorithm("CHORUS_ALGORITHM", "allreduce:0-inf=core_ring");
  {
    test::ScopedVariable off("CHORUS_AUTOTUNE", nullptr);
    const CollectivePlan plan = PlanAuto(Registry::Global(), TwoRanksOnOneHost());
    EXPECT_EQ(plan.fixed, "");
    EXPECT_TRUE(plan.variable_rules.empty());
    EXPECT_TRUE(plan.autotune_candidates.empty());
  }
  test::ScopedVariable on("CHORUS_AUTOTUNE", "1");
  test::ScopedVariable samples("CHORUS_AUTOTUNE_SAMPLES", "7");
  const CollectivePlan plan = PlanAuto(Registry::Global(), TwoRanksOnOneHost());
  if (plan.autotune_candidates.empty()) GTEST_SKIP() << "a single collective serves AUTO here";
  EXPECT_GE(plan.autotune_candidates.size(), 2u);
  EXPECT_EQ(plan.autotune_samples, 7);
  for (const auto& name : plan.autotune_candidates) {
    EXPECT_NE(std::find(plan.collectives.begin(), plan.collectives.end(), name),
              plan.collectives.end())
        << name << " is timed but not created";
  }
  // A job of one rank has nothing to tune.
  JobShape alone;
  EXPECT_TRUE(PlanAuto(Registry::Global(), alone).autotune_candidates.empty());
}

bool CollectiveLoaded(const std::string& name) {
  for (const auto& n : Registry::Global().CollectiveNames()) {
    if (n == name) return true;
  }
  return false;
}

// Two ranks autotune core_ring against gloo on 4 KiB all-reduces: every result is right while
// the candidates alternate, both ranks adopt the same winner at the same call, rank 0 writes the
// cache, and a second communicator starts from the cache with the band decided.
TEST(Autotune, EveryRankAdoptsTheSameWinnerKeepsItAndStartsFromIt) {
  if (!CollectiveLoaded("gloo")) GTEST_SKIP() << "the gloo plugin is not built here";
  constexpr int kRanks = 2;
  constexpr int kSamples = 2;
  const std::string cache = TempPath("communicator_cache");
  std::filesystem::remove(cache);
  CollectivePlan plan = PlanNamed(Registry::Global(), "core_ring", TwoRanksOnOneHost());
  plan.collectives = {"core_ring", "gloo"};
  plan.autotune_candidates = {"core_ring", "gloo"};
  plan.autotune_samples = kSamples;
  plan.autotune_cache = cache;
  plan.fixed.clear();
  plan.source = "AUTO (test)";
  const auto run = [&](const std::string& name, std::vector<std::vector<std::string>>& decisions,
                       std::vector<bool>& tuning_at_start) {
    auto store = MakeInProcessStore();
    const conformance::RankFailures failures = conformance::RunRankThreads(kRanks, [&](int rank) {
      CommunicatorConfig config;
      config.rank = rank;
      config.size = kRanks;
      config.store = store;
      config.name = name;
      config.timeout_seconds = 30;
      config.address = "127.0.0.1";
      auto comm = Communicator::Create(Registry::Global(), plan, config);
      tuning_at_start[rank] = comm->Tuning(CHORUS_OP_ALL_REDUCE, 4096);
      // 2 candidates x (1 warm-up + kSamples) calls decide the band; then some on the winner.
      for (int call = 0; call < 2 * (1 + kSamples) + 3; ++call) {
        std::vector<float> data(1024, static_cast<float>(rank + 1 + call));
        comm->AllReduce(data.data(), data.data(), data.size(), CHORUS_F32, CHORUS_REDUCE_SUM);
        const float expected = static_cast<float>(2 * call + 3);
        for (float v : data) ASSERT_EQ(v, expected) << "call " << call << " on rank " << rank;
      }
      EXPECT_FALSE(comm->Tuning(CHORUS_OP_ALL_REDUCE, 4096));
      decisions[rank] = comm->AutotuneDecisions();
    });
    ASSERT_EQ(failures.Joined(), "");
  };
  std::vector<std::vector<std::string>> first(kRanks);
  std::vector<bool> tuning_first(kRanks);
  run("tuned", first, tuning_first);
  EXPECT_TRUE(tuning_first[0]);
  ASSERT_EQ(first[0].size(), 1u);
  EXPECT_THAT(first[0][0], HasSubstr("all_reduce 4K-16K: core_ring "));
  EXPECT_EQ(first[0], first[1]);  // times and winner: the same on every rank
  const std::string winner = first[0][0].substr(first[0][0].rfind("-> ") + 3);

  // The cache holds the decision for this job's shape...
  std::ifstream in(cache);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("allreduce:4K-16K=" + winner));
  EXPECT_THAT(DescribeTuningCache(cache), HasSubstr("-> " + winner));
  EXPECT_THAT(DescribeTuningCache(cache), HasSubstr("usable by this user's jobs"));

  // ... and the next communicator starts decided.
  std::vector<std::vector<std::string>> second(kRanks);
  std::vector<bool> tuning_second(kRanks);
  run("from_cache", second, tuning_second);
  EXPECT_FALSE(tuning_second[0]);
  EXPECT_FALSE(tuning_second[1]);
  ASSERT_EQ(second[0].size(), 1u);
  EXPECT_EQ(second[0], first[0]);
}

}  // namespace
}  // namespace chorus
