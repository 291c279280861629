// The kit's checks of declared scores (tools/chorus-conformance/src/score_checks.h) on
// capabilities built here, against the core's real references (core_ring = ring@tcp, 5 under
// AUTO; reduction_to_one_device, 5): a score out of range or one that changes fails naming the
// rule and the point of the grid; a table AUTO never chooses gets a note, not a failure.
#include "score_checks.h"

#include <chorus/runtime/loader.h>
#include <chorus/runtime/registry.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chorus/plugin_sdk.hpp>
#include <memory>
#include <string>

namespace chorus::conformance::internal {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// The core alone: its tables are the references.
const PluginLibrary& Core() {
  static const auto* registry = new Registry(LoaderOptions{{}, std::string("none")});
  return *registry->FindPlugin(kBuiltinPluginName);
}

ScoreFindings Check(ScoredKind kind, const std::string& name, const chorus_capabilities& c,
                    uint32_t runs_ops = sdk::kAllCollectiveOps) {
  return CheckScores(kind, name, c, runs_ops, CoreReference(Core(), kind));
}

chorus_capabilities Host(uint32_t (*score)(const chorus_score_args*),
                         uint32_t ops = sdk::kAllCollectiveOps) {
  return sdk::Capabilities(sdk::kHostMemory, CHORUS_SHAPE_ANY, ops, score);
}

uint32_t AutoOnly(const chorus_score_args* args, uint32_t value) {
  return args->request == CHORUS_REQUEST_AUTO ? value : 0;
}

TEST(ScoreChecks, AScoreAboveTheMaximumFailsNamingThePointAndTheRule) {
  // 250 for all_reduce of 1 MiB and more (a vendor's "x2.5" without a clamp), 90 below.
  const auto c = Host([](const chorus_score_args* a) -> uint32_t {
    return a->op == CHORUS_OP_ALL_REDUCE && a->bytes >= (1u << 20) ? 250 : 90;
  });
  const ScoreFindings findings = Check(ScoredKind::kCollective, "vendor", c);
  // Three in full, then a count of the rest.
  ASSERT_THAT(findings.failures, SizeIs(4));
  EXPECT_THAT(findings.failures[0],
              AllOf(HasSubstr("collective 'vendor' scores 250 for all_reduce of 1 MiB (f32) on "
                              "2 ranks on 1 host, host memory, AUTO request"),
                    HasSubstr("above CHORUS_SCORE_MAX (100), so the core takes it as 0"),
                    HasSubstr("[rule: every score within 0..CHORUS_SCORE_MAX]")));
  EXPECT_THAT(findings.failures[3],
              HasSubstr("more points of the grid break the rule 'every score within "
                        "0..CHORUS_SCORE_MAX'"));
  EXPECT_THAT(findings.notes, IsEmpty()) << "90 beats the core's 5 elsewhere";
}

TEST(ScoreChecks, TheShapeOfTheJobIsNamed) {
  const auto c = Host([](const chorus_score_args* a) -> uint32_t {
    return a->hosts == 2 && a->op == CHORUS_OP_BARRIER ? 0xffffffffu : 20;
  });
  const ScoreFindings findings = Check(ScoredKind::kCollective, "vendor", c);
  ASSERT_THAT(findings.failures, SizeIs(3));  // one per request
  EXPECT_THAT(findings.failures[0],
              HasSubstr("scores 4294967295 for barrier on 4 ranks on 2 hosts of 2, host memory"));
}

TEST(ScoreChecks, AScoreThatChangesFailsNamingTheRule) {
  const auto c = Host([](const chorus_score_args*) -> uint32_t {
    static std::atomic<uint32_t> calls{0};
    return calls++ % 2 == 0 ? 10 : 11;
  });
  const ScoreFindings findings = Check(ScoredKind::kCollective, "vendor", c);
  ASSERT_FALSE(findings.failures.empty());
  EXPECT_THAT(findings.failures[0], AllOf(HasSubstr("scores 10, then 11 for all_reduce of 0 B"),
                                          HasSubstr("[rule: the same answer when asked twice]")));
}

TEST(ScoreChecks, AnAllZeroScorePrintsTheNoteAndPasses) {
  const auto c = Host([](const chorus_score_args*) -> uint32_t { return 0; });
  const ScoreFindings findings = Check(ScoredKind::kCollective, "quiet", c);
  EXPECT_THAT(findings.failures, IsEmpty());
  EXPECT_THAT(findings.notes,
              ElementsAre(AllOf(
                  HasSubstr("collective 'quiet' scores 0 under AUTO for every operation, size, "
                            "dtype and job shape the kit asks: AUTO never picks it; only a name "
                            "selects it (CHORUS_COMMUNICATION=quiet"),
                  HasSubstr("chorus-info --all shows '-' for it in every row"),
                  HasSubstr("A note, not a failure"))));
}

TEST(ScoreChecks, AScoreNeverAboveTheReferencePrintsTheNote) {
  // The collective template's 1; a tie with core_ring's 5 does not win either (the core is first).
  for (uint32_t score : {1u, 5u}) {
    const auto c = sdk::Capabilities(
        sdk::kHostMemory, CHORUS_SHAPE_ANY, sdk::kAllCollectiveOps,
        score == 1 ? +[](const chorus_score_args* a) { return AutoOnly(a, 1); }
                   : +[](const chorus_score_args* a) { return AutoOnly(a, 5); });
    const ScoreFindings findings = Check(ScoredKind::kCollective, "slow", c);
    EXPECT_THAT(findings.failures, IsEmpty());
    EXPECT_THAT(
        findings.notes,
        ElementsAre(AllOf(HasSubstr("collective 'slow' scores at most " + std::to_string(score) +
                                    " under AUTO, never above the core's core_ring = "
                                    "ring@tcp (5)"),
                          HasSubstr("chorus-info --all shows it below core_ring = ring@tcp in "
                                    "every row, never as the pick"))));
  }
}

TEST(ScoreChecks, TheNoteNamesTheRequestsThatChooseIt) {
  // ring_grpc's: 4 under AUTO, 60 for tf.distribute's RING.
  const auto c = Host([](const chorus_score_args* a) -> uint32_t {
    return a->request == CHORUS_REQUEST_AUTO ? 4 : a->request == CHORUS_REQUEST_RING ? 60 : 0;
  });
  EXPECT_THAT(Check(ScoredKind::kCollective, "ring_grpc", c).notes,
              ElementsAre(HasSubstr("only a name selects it (CHORUS_COMMUNICATION=ring_grpc, a "
                                    "CHORUS_ALGORITHM rule or the tuning file), or a RING request "
                                    "(it scores up to 60 for RING)")));
}

TEST(ScoreChecks, AScoreAboveTheReferenceSomewhereMakesNoNote) {
  const auto c = Host([](const chorus_score_args* a) -> uint32_t {
    return a->request == CHORUS_REQUEST_AUTO && a->bytes == 4096 ? 6 : 1;
  });
  const ScoreFindings findings = Check(ScoredKind::kCollective, "small_messages", c);
  EXPECT_THAT(findings.failures, IsEmpty());
  EXPECT_THAT(findings.notes, IsEmpty());
}

TEST(ScoreChecks, MemoryTheReferenceDoesNotServeIsNotCompared) {
  // core_ring serves host memory only: 1 on cuda memory is the best there.
  static const char* const kCuda[] = {"cuda", nullptr};
  const auto c = sdk::Capabilities(kCuda, CHORUS_SHAPE_ANY, sdk::kAllCollectiveOps,
                                   [](const chorus_score_args* a) { return AutoOnly(a, 1); });
  EXPECT_THAT(Check(ScoredKind::kCollective, "gpu", c).notes, IsEmpty());
}

TEST(ScoreChecks, CrossDeviceOpsAreComparedWithReductionToOneDevice) {
  const auto c = sdk::Capabilities(sdk::kAnyMemory, CHORUS_SHAPE_ANY, sdk::kAllCrossDeviceOps,
                                   [](const chorus_score_args* a) { return AutoOnly(a, 1); });
  const ScoreFindings findings =
      CheckScores(ScoredKind::kCrossDeviceOps, "template_reduce", c, sdk::kAllCrossDeviceOps,
                  CoreReference(Core(), ScoredKind::kCrossDeviceOps));
  EXPECT_THAT(findings.failures, IsEmpty());
  EXPECT_THAT(findings.notes,
              ElementsAre(AllOf(HasSubstr("cross-device ops 'template_reduce' score at most 1 "
                                          "under AUTO, never above the core's "
                                          "reduction_to_one_device (5)"),
                                HasSubstr("(CHORUS_CROSS_DEVICE_OPS=template_reduce)"))));
}

TEST(ScoreChecks, AnAlgorithmScoringOneNamesItsPairOverTcp) {
  const auto c = Host([](const chorus_score_args* a) { return AutoOnly(a, 1); });
  const ScoreFindings findings = Check(ScoredKind::kAlgorithm, "direct", c);
  EXPECT_THAT(findings.failures, IsEmpty());
  EXPECT_THAT(findings.notes,
              ElementsAre(AllOf(
                  HasSubstr("algorithm 'direct' scores at most 1 under AUTO; its pairs "
                            "direct@<transport> score direct x transport / 100, so even over a "
                            "transport that scores 100 they never rise above the core's core_ring "
                            "= ring@tcp (5)"),
                  HasSubstr("(CHORUS_COMMUNICATION=direct@tcp)"),
                  HasSubstr("chorus-info --all shows direct@tcp 0 (= direct 1 x tcp 10 / 100)"))));
}

TEST(ScoreChecks, ATransportScoringOneNamesTheRingOverIt) {
  const auto c = Host([](const chorus_score_args* a) { return AutoOnly(a, 1); }, 0);
  const ScoreFindings findings = Check(ScoredKind::kTransport, "store", c);
  EXPECT_THAT(findings.failures, IsEmpty()) << "a transport's ops are ignored";
  EXPECT_THAT(
      findings.notes,
      ElementsAre(AllOf(HasSubstr("transport 'store' scores at most 1 under AUTO; its "
                                  "pairs <algorithm>@store score algorithm x store / 100"),
                        HasSubstr("(CHORUS_COMMUNICATION=ring@store)"),
                        HasSubstr("chorus-info --all shows ring@store 0 (= ring 50 x store 1 / "
                                  "100)"))));
  // ucx's 30: its pairs beat core_ring with a good algorithm (ring@ucx = 15).
  const auto fast = Host([](const chorus_score_args* a) { return AutoOnly(a, 30); }, 0);
  EXPECT_THAT(Check(ScoredKind::kTransport, "ucx", fast).notes, IsEmpty());
}

TEST(ScoreChecks, AnAlgorithmScoringAnOperationItDoesNotRunFails) {
  // Declares broadcast in its capabilities, but run() implements all_reduce only.
  const auto c = Host([](const chorus_score_args* a) { return AutoOnly(a, 60); },
                      CHORUS_OP_BIT(CHORUS_OP_ALL_REDUCE) | CHORUS_OP_BIT(CHORUS_OP_BROADCAST));
  const ScoreFindings findings =
      Check(ScoredKind::kAlgorithm, "tree", c, CHORUS_OP_BIT(CHORUS_OP_ALL_REDUCE));
  EXPECT_THAT(findings.failures,
              ElementsAre(AllOf(HasSubstr("algorithm 'tree': capabilities.ops declares broadcast, "
                                          "which supported_ops lacks (it scores up to 60 there)"),
                                HasSubstr("[rule: a score > 0 only for an operation in ops that "
                                          "the table runs]"))));
}

TEST(ScoreChecks, AnAlgorithmWithoutHostMemoryFails) {
  static const char* const kCuda[] = {"cuda", nullptr};
  const auto c = sdk::Capabilities(kCuda, CHORUS_SHAPE_ANY, sdk::kAllCollectiveOps,
                                   [](const chorus_score_args* a) { return AutoOnly(a, 60); });
  EXPECT_THAT(Check(ScoredKind::kAlgorithm, "gpu_tree", c).failures,
              ElementsAre(HasSubstr("lists neither \"host\" nor \"*\"")));
}

TEST(ScoreChecks, TheReferenceItselfGetsNoNote) {
  const ScoreReference reference = CoreReference(Core(), ScoredKind::kCollective);
  ASSERT_NE(reference.capabilities, nullptr);
  const ScoreFindings findings =
      CheckScores(ScoredKind::kCollective, "core_ring", *reference.capabilities,
                  sdk::kAllCollectiveOps, reference);
  EXPECT_THAT(findings.failures, IsEmpty());
  EXPECT_THAT(findings.notes, IsEmpty());
}

TEST(ScoreChecks, ATableWithoutCapabilitiesIsNotedAsChosenByNameOnly) {
  EXPECT_THAT(NoCapabilitiesNote(ScoredKind::kCollective, "old"),
              AllOf(HasSubstr("collective 'old' declares no capabilities: AUTO never picks it; "
                              "only a name selects it (CHORUS_COMMUNICATION=old"),
                    HasSubstr("chosen by name only")));
  EXPECT_THAT(NoCapabilitiesNote(ScoredKind::kAlgorithm, "direct"),
              HasSubstr("its pairs are chosen by name only (CHORUS_COMMUNICATION=direct@tcp)"));
}

TEST(ScoreChecks, SizesAreNamedInBinaryUnits) {
  EXPECT_EQ(ScoreSizeName(0), "0 B");
  EXPECT_EQ(ScoreSizeName(1), "1 B");
  EXPECT_EQ(ScoreSizeName(4096), "4 KiB");
  EXPECT_EQ(ScoreSizeName(uint64_t{64} << 20), "64 MiB");
  EXPECT_EQ(ScoreSizeName(uint64_t{1} << 30), "1 GiB");
  EXPECT_EQ(ScoreSizeName(1000), "1000 B");
}

}  // namespace
}  // namespace chorus::conformance::internal
