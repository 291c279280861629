// Selection by declared scores (plugin.h 1.1) and its precedence: constructor argument >
// variables > tuning file > scores. The fake plugin "fake_scored" declares 90 for host
// all_reduce and nothing else, as a vendor's tuned all-reduce would.
#include <chorus/base/error.h>
#include <chorus/collective/communicator.h>
#include <chorus/collective/selection.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/loader.h>
#include <chorus/runtime/registry.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "fake_plugin_options.h"

namespace chorus {
namespace {

using ::testing::HasSubstr;

using test::OnlyFakePlugins;

JobShape TwoRanksOnOneHost() {
  JobShape shape;
  shape.ranks = 2;
  shape.hosts = 1;
  shape.ranks_per_host = 2;
  return shape;
}

// Every variable selection reads, unset around each test.
class SelectionTest : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override { Clear(); }
  static void Clear() {
    for (const char* name : {"CHORUS_COMMUNICATION", "CHORUS_ALGORITHM", "CHORUS_TUNING_FILE",
                             "CHORUS_CROSS_DEVICE_OPS"}) {
      unsetenv(name);
    }
  }
  // A tuning file with `text`, removed with the test.
  std::string TuningFile(const std::string& text) {
    path_ = std::filesystem::temp_directory_path() /
            ("chorus_tuning_" + std::to_string(::getpid()) + ".txt");
    std::ofstream(path_) << text;
    return path_.string();
  }
  ~SelectionTest() override {
    if (!path_.empty()) std::filesystem::remove(path_);
  }

  Registry registry_{OnlyFakePlugins("fake_scored")};
  std::filesystem::path path_;
};

TEST_F(SelectionTest, AutoTakesTheHighestScorePerOperation) {
  const CollectivePlan plan =
      PlanCollectives(registry_, CommunicationImplementation::kAuto, TwoRanksOnOneHost());
  EXPECT_EQ(plan.collectives, (std::vector<std::string>{"fake_scored_fast", "core_ring"}));
  EXPECT_THAT(plan.source, HasSubstr("fake_scored_fast scores 90"));
  const Decision all_reduce = Decide(registry_, plan, CHORUS_OP_ALL_REDUCE, CHORUS_F32, 1 << 20);
  EXPECT_EQ(all_reduce.collective, "fake_scored_fast");
  EXPECT_THAT(all_reduce.source, HasSubstr("score 90 (fake_scored_fast 90, core_ring 5)"));
  // It declares nothing for broadcast: the core's ring, the reference, serves it.
  EXPECT_EQ(Decide(registry_, plan, CHORUS_OP_BROADCAST, CHORUS_F32, 1 << 20).collective,
            "core_ring");
  // A table without capabilities (fake_scored_plain) is never chosen by AUTO.
  for (const auto& ranked :
       RankCollectives(registry_, ScoreArgs(CHORUS_OP_ALL_REDUCE, CHORUS_F32, 4096,
                                            TwoRanksOnOneHost(), CHORUS_REQUEST_AUTO))) {
    if (ranked.name == "fake_scored_plain") {
      EXPECT_EQ(ranked.score.value, 0u);
      EXPECT_THAT(ranked.score.reason, HasSubstr("chosen by name only"));
    }
  }
}

TEST_F(SelectionTest, TheTuningFileBeatsTheScores) {
  setenv(
      "CHORUS_TUNING_FILE",
      TuningFile("# measured elsewhere\n[workers=2 hosts=1]\nallreduce:0-64K=core_ring\n").c_str(),
      1);
  const CollectivePlan plan =
      PlanCollectives(registry_, CommunicationImplementation::kAuto, TwoRanksOnOneHost());
  const Decision small = Decide(registry_, plan, CHORUS_OP_ALL_REDUCE, CHORUS_F32, 4096);
  EXPECT_EQ(small.collective, "core_ring");
  EXPECT_THAT(small.source, HasSubstr("CHORUS_TUNING_FILE=" + path_.string()));
  EXPECT_THAT(small.source, HasSubstr("[workers=2 hosts=1]"));
  // Sizes the file does not cover go by the scores.
  EXPECT_EQ(Decide(registry_, plan, CHORUS_OP_ALL_REDUCE, CHORUS_F32, 1 << 20).collective,
            "fake_scored_fast");
  // A section for another shape does not apply.
  JobShape four = TwoRanksOnOneHost();
  four.ranks = four.ranks_per_host = 4;
  const CollectivePlan other = PlanCollectives(registry_, CommunicationImplementation::kAuto, four);
  EXPECT_EQ(Decide(registry_, other, CHORUS_OP_ALL_REDUCE, CHORUS_F32, 4096).collective,
            "fake_scored_fast");
}

TEST_F(SelectionTest, TheVariableBeatsTheTuningFile) {
  setenv("CHORUS_TUNING_FILE", TuningFile("allreduce:0-inf=fake_scored_fast\n").c_str(), 1);
  setenv("CHORUS_COMMUNICATION", "core_ring", 1);
  const CollectivePlan plan =
      PlanCollectives(registry_, CommunicationImplementation::kAuto, TwoRanksOnOneHost());
  const Decision d = Decide(registry_, plan, CHORUS_OP_ALL_REDUCE, CHORUS_F32, 4096);
  EXPECT_EQ(d.collective, "core_ring");
  EXPECT_EQ(d.source, "CHORUS_COMMUNICATION=core_ring");
  // CHORUS_ALGORITHM's rules go first of all.
  setenv("CHORUS_ALGORITHM", "allreduce:0-1K=fake_scored_plain", 1);
  const CollectivePlan routed =
      PlanCollectives(registry_, CommunicationImplementation::kAuto, TwoRanksOnOneHost());
  EXPECT_EQ(Decide(registry_, routed, CHORUS_OP_ALL_REDUCE, CHORUS_F32, 512).collective,
            "fake_scored_plain");
}

TEST_F(SelectionTest, TheConstructorArgumentBeatsTheVariableAndTheTuningFile) {
  setenv("CHORUS_COMMUNICATION", "fake_scored_fast", 1);
  setenv("CHORUS_ALGORITHM", "allreduce:0-inf=fake_scored_fast", 1);
  setenv("CHORUS_TUNING_FILE", TuningFile("allreduce:0-inf=fake_scored_fast\n").c_str(), 1);
  // RING: the core's ring answers it (50); the fake does not (0).
  const CollectivePlan plan =
      PlanCollectives(registry_, CommunicationImplementation::kRing, TwoRanksOnOneHost());
  EXPECT_EQ(plan.collectives.front(), "core_ring");
  EXPECT_EQ(plan.request, CHORUS_REQUEST_RING);
  EXPECT_THAT(plan.source, HasSubstr("CommunicationOptions RING"));
  EXPECT_TRUE(plan.tuning_rules.empty());
  EXPECT_TRUE(plan.variable_rules.empty());
  EXPECT_EQ(plan.collectives, std::vector<std::string>{"core_ring"});
  EXPECT_EQ(Decide(registry_, plan, CHORUS_OP_ALL_REDUCE, CHORUS_F32, 4096).collective,
            "core_ring");
  // NCCL: nothing here answers it, and the error says so.
  try {
    PlanCollectives(registry_, CommunicationImplementation::kNccl, TwoRanksOnOneHost());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
    EXPECT_THAT(e.what(), HasSubstr("no loaded collective answers NCCL requests"));
    EXPECT_THAT(e.what(), HasSubstr("Available: core_ring, fake_scored_fast, fake_scored_plain"));
  }
}

TEST_F(SelectionTest, AnUnknownNameInTheVariableListsTheAvailableOnes) {
  setenv("CHORUS_COMMUNICATION", "nosuch", 1);
  try {
    PlanCollectives(registry_, CommunicationImplementation::kAuto, TwoRanksOnOneHost());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("CHORUS_COMMUNICATION=nosuch names a collective 'nosuch', "
                                    "which no loaded plugin provides"));
    EXPECT_THAT(e.what(), HasSubstr("Available: core_ring, fake_scored_fast, fake_scored_plain"));
    EXPECT_THAT(e.what(), HasSubstr("also takes AUTO, RING and NCCL"));
  }
}

TEST_F(SelectionTest, A10PluginIsChosenByNameOnly) {
  Registry registry(OnlyFakePlugins("fake_abi_1_0"));
  const CollectivePlan automatic =
      PlanCollectives(registry, CommunicationImplementation::kAuto, TwoRanksOnOneHost());
  EXPECT_EQ(automatic.collectives, std::vector<std::string>{"core_ring"});
  setenv("CHORUS_COMMUNICATION", "fake_abi_1_0", 1);
  const CollectivePlan named =
      PlanCollectives(registry, CommunicationImplementation::kAuto, TwoRanksOnOneHost());
  EXPECT_EQ(named.collectives, std::vector<std::string>{"fake_abi_1_0"});
  // And it runs: one rank's all_reduce through the 1.0 table.
  CommunicatorConfig config;
  config.store = MakeInProcessStore();
  auto comm = Communicator::Create(registry, named, config);
  float value = 3;
  comm->AllReduce(&value, &value, 1, CHORUS_F32, CHORUS_REDUCE_SUM);
  EXPECT_EQ(value, 3.0f);
}

// What parsing `text` as the tuning file t.txt throws ("" when nothing).
std::string TuningFileError(const std::string& text) {
  try {
    TuningFile::Parse(text, "t.txt");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(SelectionTest, ATuningFileWithAMistakeNamesTheLine) {
  EXPECT_THAT(TuningFileError("[workers=2 hosts=1\n"), HasSubstr("t.txt:1: a section is"));
  EXPECT_THAT(TuningFileError("\n[workers=0]\n"),
              HasSubstr("t.txt:2: workers: '0' is not a positive"));
  EXPECT_THAT(TuningFileError("[ranks=2]\n"), HasSubstr("t.txt:1: unknown key 'ranks'"));
  EXPECT_THAT(
      TuningFileError("[workers=2]\nallreduce:0-1X=shm\n"),
      HasSubstr("t.txt (rules from line 2)='allreduce:0-1X=shm': '1X' has an unknown suffix"));
  // An unknown collective is an error at selection, naming the file.
  setenv("CHORUS_TUNING_FILE", TuningFile("allreduce:0-inf=nosuch\n").c_str(), 1);
  try {
    PlanCollectives(registry_, CommunicationImplementation::kAuto, TwoRanksOnOneHost());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("CHORUS_TUNING_FILE=" + path_.string()));
    EXPECT_THAT(e.what(), HasSubstr("'nosuch', which no loaded plugin provides"));
  }
  setenv("CHORUS_TUNING_FILE", "/no/such/file", 1);
  EXPECT_THROW(PlanCollectives(registry_, CommunicationImplementation::kAuto, TwoRanksOnOneHost()),
               Error);
}

// A tuning file that cannot mean anything is an error naming the file and the lines, not a
// silent choice: a directory (which a stream reads as an empty file), a path that does not exist,
// two sections for one job shape (the first used to win without a word), a key given twice.
TEST_F(SelectionTest, ATuningFileThatIsADirectoryIsNamed) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  setenv("CHORUS_TUNING_FILE", dir.c_str(), 1);
  try {
    PlanCollectives(registry_, CommunicationImplementation::kAuto, TwoRanksOnOneHost());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
    EXPECT_THAT(e.what(), HasSubstr("CHORUS_TUNING_FILE=" + dir +
                                    " is a directory, not a file; "
                                    "point it at a tuning file"));
  }
  setenv("CHORUS_TUNING_FILE", "/no/such/file", 1);
  try {
    PlanCollectives(registry_, CommunicationImplementation::kAuto, TwoRanksOnOneHost());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("CHORUS_TUNING_FILE=/no/such/file cannot be read: No such "
                                    "file or directory"));
  }
}

TEST_F(SelectionTest, TwoSectionsForOneJobShapeNameBothLines) {
  EXPECT_THAT(
      TuningFileError("[workers=2 hosts=1]\nallreduce:0-inf=a\n# more\n[workers=2 hosts=1]\n"
                      "allreduce:0-inf=b\n"),
      HasSubstr("t.txt:4: a second section [workers=2 hosts=1] for the same job shape as "
                "the one at t.txt:1"));
  // "hosts=*" is what leaving hosts out means.
  EXPECT_THAT(TuningFileError("[workers=4]\nallreduce:0-inf=a\n[workers=4 hosts=*]\n"),
              HasSubstr("t.txt:3: a second section [workers=4 hosts=*] for the same job shape as "
                        "the one at t.txt:1"));
  EXPECT_THAT(TuningFileError("\nallreduce:0-inf=a\n[]\nallreduce:0-inf=b\n"),
              HasSubstr("t.txt:3: a section [workers=* hosts=*] for every job, but the rules "
                        "before the first section (from t.txt:2) already apply to every job"));
  EXPECT_THAT(TuningFileError("[workers=2 workers=3]\n"),
              HasSubstr("t.txt:1: 'workers' appears twice in one section"));
  // Different shapes are fine.
  EXPECT_EQ(TuningFileError("allreduce:0-inf=a\n[workers=2]\n[workers=2 hosts=1]\n[hosts=1]\n"),
            "");
}

// Two ranks whose plugin sets differ would never meet in their collectives' rendezvous: each
// learns it at once, with both lists, before anything waits.
TEST_F(SelectionTest, WorkersThatWouldCreateDifferentCollectivesAreToldWhy) {
  Registry bare(OnlyFakePlugins("none"));
  auto store = MakeInProcessStore();
  std::string errors[2];
  std::thread ranks[2];
  for (int rank = 0; rank < 2; ++rank) {
    ranks[rank] = std::thread([&, rank] {
      const Registry& registry = rank == 0 ? registry_ : bare;
      try {
        CommunicatorConfig config;
        config.rank = rank;
        config.size = 2;
        config.store = store;
        config.timeout_seconds = 30;
        config.task_names = {"worker 0", "worker 1"};
        Communicator::Create(
            registry,
            PlanCollectives(registry, CommunicationImplementation::kAuto, TwoRanksOnOneHost()),
            config);
      } catch (const Error& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (const auto& error : errors) {
    EXPECT_THAT(error, HasSubstr("worker 1 chose collective 'core_ring' (AUTO) but worker 0 chose "
                                 "'fake_scored_fast' (AUTO); give every worker the same plugins "
                                 "(CHORUS_PLUGIN_PATH, CHORUS_PLUGINS)"));
    EXPECT_THAT(error, HasSubstr("(worker 1 would create core_ring (core 1.0.0, ABI 1.6); worker 0 "
                                 "fake_scored_fast (fake_scored 0.0.1, ABI 1.6), core_ring"));
  }
}

// A worker that lacks a collective of the plan fails with its own error, and tells the others,
// who fail at once with it instead of waiting out their time-out.
TEST_F(SelectionTest, AWorkerThatCannotCreateThePlanTellsTheOthersAtOnce) {
  Registry bare(OnlyFakePlugins("none"));
  const CollectivePlan plan =
      PlanCollectives(registry_, CommunicationImplementation::kAuto, TwoRanksOnOneHost());
  ASSERT_EQ(plan.collectives.front(), "fake_scored_fast");
  auto store = MakeInProcessStore();
  std::string errors[2];
  std::thread ranks[2];
  const auto start = std::chrono::steady_clock::now();
  for (int rank = 0; rank < 2; ++rank) {
    ranks[rank] = std::thread([&, rank] {
      try {
        CommunicatorConfig config;
        config.rank = rank;
        config.size = 2;
        config.store = store;
        config.timeout_seconds = 60;
        config.task_names = {"worker 0", "worker 1"};
        Communicator::Create(rank == 0 ? registry_ : bare, plan, config);
      } catch (const Error& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_THAT(errors[1], HasSubstr("fake_scored_fast"));
  EXPECT_THAT(errors[0], HasSubstr("worker 1 cannot create what worker 0 creates "
                                   "(fake_scored_fast, core_ring): "));
  EXPECT_THAT(errors[0], HasSubstr("fake_scored_fast"));
}

}  // namespace
}  // namespace chorus
