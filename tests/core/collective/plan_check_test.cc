// The check before a communicator creates its collectives (core/src/collective/plan_check.h):
// the message for each field that can differ, and the exchange itself with ranks as threads over
// an in-process store: agreement, a difference every rank reports, a late rank that is waited for,
// a rank that never arrives and is named.
#include "collective/plan_check.h"

#include <chorus/base/error.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "worker_names.h"

namespace chorus::internal {
namespace {

using ::testing::HasSubstr;

using test::WorkerName;

// Two ranks under AUTO choosing core_ring from the core.
PlanChoices Auto() {
  PlanChoices c;
  c.size = 2;
  c.shape = "2 ranks on 1 host, host memory";
  c.request = "AUTO";
  c.source = "AUTO";
  c.collectives = {{"core_ring", "core 1.0.0, ABI 1.1", ""}};
  return c;
}

std::string Mismatch(const PlanChoices& theirs) {
  return PlanMismatch(Auto(), "worker 0", theirs, "worker 1");
}

TEST(PlanCheck, EqualChoicesPass) { EXPECT_EQ(Mismatch(Auto()), ""); }

TEST(PlanCheck, SerializeRoundTripsEveryField) {
  PlanChoices c = Auto();
  c.fixed = "gloo";
  c.algorithm = "allreduce:0-1M=gloo;broadcast:0-inf=core_ring";
  c.tuning = "allreduce:0-inf=shm";
  c.tuning_from = "CHORUS_TUNING_FILE=/tmp/a:b [workers=2 hosts=1]";
  c.autotune = "shm, core_ring; 5 samples; with CHORUS_TUNING_CACHE";
  c.error = "line one\nline two: 12:";
  c.collectives.push_back({"shm+gloo", "hierarchical 1.1.0, ABI 1.1", "local=shm, cross=gloo"});
  const PlanChoices back = PlanChoices::Parse(c.Serialize());
  EXPECT_EQ(back.Serialize(), c.Serialize());
  EXPECT_EQ(back.error, c.error);
  ASSERT_EQ(back.collectives.size(), 2u);
  EXPECT_EQ(back.collectives[1].options, "local=shm, cross=gloo");
  EXPECT_THROW(PlanChoices::Parse("7:garbage"), Error);
}

TEST(PlanCheck, ShortSourceDropsAutosRanking) {
  EXPECT_EQ(ShortSource("AUTO: core_ring scores 5 for a job of 2 ranks"), "AUTO");
  EXPECT_EQ(ShortSource("CHORUS_COMMUNICATION=gloo"), "CHORUS_COMMUNICATION=gloo");
}

TEST(PlanCheck, AnotherCollectiveNamesTheVariableThatChoseIt) {
  PlanChoices gloo = Auto();
  gloo.source = "CHORUS_COMMUNICATION=gloo";
  gloo.fixed = "gloo";
  gloo.collectives = {{"gloo", "gloo 1.1.0, ABI 1.1", ""}};
  EXPECT_EQ(Mismatch(gloo),
            "worker 1 chose collective 'gloo' (CHORUS_COMMUNICATION=gloo) but worker 0 chose "
            "'core_ring' (AUTO); give every worker the same CHORUS_COMMUNICATION");
}

TEST(PlanCheck, AnotherCollectiveByScoresNamesThePluginsOfEach) {
  PlanChoices shm = Auto();
  shm.collectives = {{"shm", "shm 1.0.0, ABI 1.1", ""}, {"core_ring", "core 1.0.0, ABI 1.1", ""}};
  EXPECT_EQ(Mismatch(shm),
            "worker 1 chose collective 'shm' (AUTO) but worker 0 chose 'core_ring' (AUTO); give "
            "every worker the same plugins (CHORUS_PLUGIN_PATH, CHORUS_PLUGINS) and the same "
            "CHORUS_TUNING_FILE (worker 1 would create shm (shm 1.0.0, ABI 1.1), core_ring (core "
            "1.0.0, ABI 1.1); worker 0 core_ring (core 1.0.0, ABI 1.1))");
}

TEST(PlanCheck, AnotherRequest) {
  PlanChoices ring = Auto();
  ring.request = "RING";
  ring.source = "CommunicationOptions RING";
  EXPECT_EQ(Mismatch(ring),
            "worker 1 requests RING (CommunicationOptions RING) but worker 0 requests AUTO "
            "(AUTO); construct every worker's strategy with the same "
            "CommunicationOptions.implementation");
}

TEST(PlanCheck, OtherAlgorithmRules) {
  PlanChoices rules = Auto();
  rules.algorithm = "allreduce:0-1M=core_ring";
  EXPECT_EQ(Mismatch(rules),
            "worker 1 has CHORUS_ALGORITHM=allreduce:0-1M=core_ring but worker 0 has no "
            "CHORUS_ALGORITHM; give every worker the same CHORUS_ALGORITHM");
}

TEST(PlanCheck, AutotuningOnOneWorkerOnly) {
  PlanChoices tuning = Auto();
  tuning.autotune = "shm, core_ring; 5 samples";
  EXPECT_EQ(Mismatch(tuning),
            "worker 1 autotunes among shm, core_ring; 5 samples but worker 0 does not autotune; "
            "give every worker the same CHORUS_AUTOTUNE, CHORUS_AUTOTUNE_SAMPLES and "
            "CHORUS_AUTOTUNE_CANDIDATES, and CHORUS_TUNING_CACHE to all or none");
}

TEST(PlanCheck, OtherTuningRules) {
  PlanChoices tuned = Auto();
  tuned.tuning = "allreduce:0-inf=core_ring";
  tuned.tuning_from = "CHORUS_TUNING_FILE=/t [workers=2 hosts=1]";
  EXPECT_EQ(Mismatch(tuned),
            "worker 1 routes by CHORUS_TUNING_FILE=/t [workers=2 hosts=1] "
            "(allreduce:0-inf=core_ring) but worker 0 by no tuning file; give every worker the "
            "same CHORUS_TUNING_FILE, with the same contents");
}

TEST(PlanCheck, MoreCollectivesForTheSamePrimary) {
  PlanChoices more = Auto();
  more.collectives.push_back({"gloo", "gloo 1.1.0, ABI 1.1", ""});
  EXPECT_EQ(Mismatch(more),
            "worker 1 would create core_ring (core 1.0.0, ABI 1.1), gloo (gloo 1.1.0, ABI 1.1) "
            "but worker 0 would create core_ring (core 1.0.0, ABI 1.1); give every worker the "
            "same plugins (CHORUS_PLUGIN_PATH, CHORUS_PLUGINS)");
}

TEST(PlanCheck, AnotherPluginVersionOrAbi) {
  PlanChoices older = Auto();
  older.collectives[0].plugin = "core 1.0.0, ABI 1.0";
  EXPECT_EQ(Mismatch(older),
            "worker 1 serves collective 'core_ring' from plugin core 1.0.0, ABI 1.0 but worker 0 "
            "from core 1.0.0, ABI 1.1; install the same build of the plugin for every worker "
            "(CHORUS_PLUGIN_PATH)");
}

TEST(PlanCheck, OtherOptions) {
  PlanChoices options = Auto();
  options.collectives[0].options = "segment_bytes=4096";
  EXPECT_EQ(Mismatch(options),
            "worker 1 hands collective 'core_ring' the options segment_bytes=4096 but worker 0 "
            "none; give every worker the same collective options (CommunicatorConfig.options)");
}

TEST(PlanCheck, AnotherSize) {
  PlanChoices three = Auto();
  three.size = 3;
  EXPECT_THAT(Mismatch(three), HasSubstr("worker 1 counts 3 workers but worker 0 counts 2"));
}

TEST(PlanCheck, TheFixedCollectiveMattersOnlyWhenThereIsAChoice) {
  PlanChoices named = Auto();
  named.fixed = "core_ring";
  EXPECT_EQ(Mismatch(named), "");
  PlanChoices two = Auto();
  two.collectives.push_back({"gloo", "gloo 1.1.0, ABI 1.1", ""});
  PlanChoices two_named = two;
  two_named.fixed = "core_ring";
  two_named.source = "CHORUS_COMMUNICATION=core_ring";
  EXPECT_EQ(PlanMismatch(two, "worker 0", two_named, "worker 1"),
            "worker 1 runs on 'core_ring' everything no rule routes (CHORUS_COMMUNICATION="
            "core_ring) but worker 0 routes by scores (AUTO); give every worker the same "
            "CHORUS_COMMUNICATION");
}

// ---- The exchange, ranks as threads ----------------------------------------------------------

struct Outcome {
  bool joined = false;
  chorus_status status = CHORUS_OK;
  std::string message;
};

// Rank r publishes choices[r] (nullopt: it never joins) after delays_ms[r] (if given).
std::vector<Outcome> Exchange(const std::vector<std::optional<PlanChoices>>& choices,
                              double timeout_seconds, const std::vector<int>& delays_ms = {}) {
  const auto store = MakeInProcessStore();
  const int size = static_cast<int>(choices.size());
  std::vector<Outcome> outcomes(choices.size());
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    if (!choices[rank]) continue;
    threads.emplace_back([&, rank] {
      if (static_cast<size_t>(rank) < delays_ms.size()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delays_ms[rank]));
      }
      PlanExchange x;
      x.store = store.get();
      x.prefix = "plan/1/";
      x.rank = rank;
      x.size = size;
      x.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
      x.timeout_seconds = timeout_seconds;
      x.task_name = WorkerName;
      x.what = "communicator 'test'";
      Outcome& outcome = outcomes[static_cast<size_t>(rank)];
      outcome.joined = true;
      try {
        AgreeOnPlan(x, *choices[rank]);
      } catch (const Error& e) {
        outcome.status = e.status();
        outcome.message = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return outcomes;
}

PlanChoices OfSize(PlanChoices c, int size) {
  c.size = size;
  return c;
}

TEST(PlanExchange, RanksThatAgreeGoOn) {
  const PlanChoices c = OfSize(Auto(), 3);
  for (const Outcome& o : Exchange({c, c, c}, 30)) EXPECT_EQ(o.message, "");
}

TEST(PlanExchange, LateRanksAreWaitedFor) {
  const PlanChoices c = OfSize(Auto(), 3);
  for (const Outcome& o : Exchange({c, c, c}, 30, {150, 0, 300})) EXPECT_EQ(o.message, "");
}

TEST(PlanExchange, EveryRankReportsTheDifference) {
  const PlanChoices c = OfSize(Auto(), 3);
  PlanChoices other = c;
  other.collectives[0].options = "segment_bytes=1";
  const auto outcomes = Exchange({c, c, other}, 30);
  for (const Outcome& o : outcomes) {
    EXPECT_EQ(o.status, CHORUS_INVALID_ARGUMENT) << o.message;
    EXPECT_EQ(o.message,
              "communicator 'test': worker 2 hands collective 'core_ring' the options "
              "segment_bytes=1 but worker 0 none; give every worker the same collective options "
              "(CommunicatorConfig.options)");
  }
}

TEST(PlanExchange, ARankThatNeverArrivesIsNamed) {
  const PlanChoices c = OfSize(Auto(), 3);
  const auto outcomes = Exchange({c, c, std::nullopt}, 0.3);
  for (int rank : {0, 1}) {
    EXPECT_EQ(outcomes[rank].status, CHORUS_TIMEOUT) << outcomes[rank].message;
    EXPECT_THAT(outcomes[rank].message,
                HasSubstr("communicator 'test': worker 2 did not join within 0.3 s"));
  }
}

TEST(PlanExchange, ALeaderThatNeverArrivesIsNamed) {
  const PlanChoices c = Auto();
  const auto outcomes = Exchange({std::nullopt, c}, 0.3);
  EXPECT_EQ(outcomes[1].status, CHORUS_TIMEOUT);
  EXPECT_THAT(outcomes[1].message, HasSubstr("worker 0 did not join within 0.3 s"));
}

// A rank that cannot create the plan returns (its caller throws its own error); the others fail
// at once naming it.
TEST(PlanExchange, ARankWithAnErrorTellsTheOthers) {
  const PlanChoices c = OfSize(Auto(), 3);
  PlanChoices broken = c;
  broken.error = "no collective 'core_ring' is loaded";
  const auto outcomes = Exchange({c, broken, c}, 30);
  EXPECT_EQ(outcomes[1].message, "");
  for (int rank : {0, 2}) {
    EXPECT_EQ(outcomes[rank].status, CHORUS_INVALID_ARGUMENT);
    EXPECT_EQ(outcomes[rank].message,
              "communicator 'test': worker 1 cannot create what worker 0 creates (core_ring): no "
              "collective 'core_ring' is loaded");
  }
}

}  // namespace
}  // namespace chorus::internal
