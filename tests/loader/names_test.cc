// What a name that selects nothing is told. CHORUS_COMMUNICATION, CHORUS_ALGORITHM's rules and
// chorus-bench --backends all look collectives up through Registry::FindCollective: a close name
// gets "did you mean X?", and an algorithm or a transport named alone (each runs only as
// ALGORITHM@TRANSPORT) gets the pairs to name instead. The fakes: fake_barrier (an algorithm),
// fake_wire (a transport) and fake_scored (collectives fake_scored_fast and fake_scored_plain);
// the core brings the ring algorithm and the tcp transport.
#include <chorus/base/error.h>
#include <chorus/collective/selection.h>
#include <chorus/runtime/loader.h>
#include <chorus/runtime/registry.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "base/text.h"
#include "fake_plugin_options.h"

namespace chorus {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

using test::OnlyFakePlugins;

class Names : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override { Clear(); }
  static void Clear() {
    for (const char* name : {"CHORUS_COMMUNICATION", "CHORUS_ALGORITHM", "CHORUS_TUNING_FILE"}) {
      unsetenv(name);
    }
  }

  // What looking up `name` throws; "" when it is found.
  template <typename Find>
  static std::string Thrown(Find find) {
    try {
      find();
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
      return e.what();
    }
    return "";
  }
  std::string UnknownCollective(const std::string& name) const {
    return Thrown([&] { registry_.FindCollective(name, "CHORUS_COMMUNICATION=" + name); });
  }
  // What PlanCollectives throws for the variables set.
  std::string PlanError() const {
    JobShape shape;
    shape.ranks = 2;
    shape.ranks_per_host = 2;
    return Thrown([&] { PlanCollectives(registry_, CommunicationImplementation::kAuto, shape); });
  }

  Registry registry_{OnlyFakePlugins("fake_barrier,fake_wire,fake_scored")};
};

TEST_F(Names, TheFakesMakeThePairs) {
  EXPECT_EQ(
      registry_.CollectiveNames(),
      (std::vector<std::string>{"core_ring", "fake_scored_fast", "fake_scored_plain",
                                "ring@fake_wire", "fake_barrier@tcp", "fake_barrier@fake_wire"}));
}

TEST_F(Names, AnAlgorithmNamedAloneIsToldToAddATransport) {
  EXPECT_THAT(UnknownCollective("fake_barrier"),
              HasSubstr("names a collective 'fake_barrier', which no loaded plugin provides; "
                        "fake_barrier is an algorithm: name it with a transport, fake_barrier@tcp "
                        "or fake_barrier@fake_wire. Available: core_ring, "));
  // The core's ring: its pair with the core's tcp is core_ring, also named ring@tcp.
  EXPECT_THAT(UnknownCollective("ring"), HasSubstr("ring is an algorithm: name it with a "
                                                   "transport, ring@tcp or ring@fake_wire."));
}

TEST_F(Names, CHORUS_COMMUNICATIONNamingAnAlgorithmSaysSo) {
  setenv("CHORUS_COMMUNICATION", "fake_barrier", 1);
  EXPECT_THAT(PlanError(),
              AllOf(HasSubstr("CHORUS_COMMUNICATION=fake_barrier names a collective "
                              "'fake_barrier', which no loaded plugin provides; fake_barrier is "
                              "an algorithm: name it with a transport, fake_barrier@tcp or "
                              "fake_barrier@fake_wire."),
                    HasSubstr("Available: core_ring, fake_scored_fast")));
}

TEST_F(Names, ATransportNamedAloneIsToldToAddAnAlgorithm) {
  EXPECT_THAT(UnknownCollective("fake_wire"),
              HasSubstr("fake_wire is a transport: name an algorithm over it, ring@fake_wire or "
                        "fake_barrier@fake_wire."));
}

TEST_F(Names, AMisspelledNameGetsTheCloseOne) {
  EXPECT_THAT(UnknownCollective("fake_scored_fats"),
              HasSubstr("which no loaded plugin provides; did you mean fake_scored_fast? "
                        "Available: "));
  EXPECT_THAT(UnknownCollective("Core_Ring"), HasSubstr("did you mean core_ring?"));
  // A prefix or a part of a name.
  EXPECT_THAT(UnknownCollective("fake_scored_fastest"),
              HasSubstr("did you mean fake_scored_fast?"));
  // core_ring's other name is among the close ones.
  EXPECT_THAT(UnknownCollective("rnig@tcp"), HasSubstr("did you mean ring@tcp?"));
}

TEST_F(Names, AnAlgorithmOverATransportNotLoadedListsItsPairs) {
  EXPECT_THAT(UnknownCollective("ring@tpc"),
              HasSubstr("did you mean ring@tcp? (no transport 'tpc' is loaded; ring runs as "
                        "ring@tcp or ring@fake_wire)"));
  EXPECT_THAT(UnknownCollective("fake_barrier@mpi"),
              HasSubstr("no transport 'mpi' is loaded; fake_barrier runs as fake_barrier@tcp or "
                        "fake_barrier@fake_wire. Available: "));
}

TEST_F(Names, AnUnknownRuleInCHORUS_ALGORITHMGetsTheCloseName) {
  setenv("CHORUS_ALGORITHM", "allreduce:0-64K=fake_scored_fst", 1);
  EXPECT_THAT(PlanError(),
              AllOf(HasSubstr("CHORUS_ALGORITHM"), HasSubstr("did you mean fake_scored_fast?")));
}

TEST_F(Names, NothingCloseSuggestsNothing) {
  const std::string message = UnknownCollective("nosuch");
  EXPECT_THAT(message, HasSubstr("which no loaded plugin provides. Available: core_ring, "));
  EXPECT_THAT(message, Not(HasSubstr("did you mean")));
  // A plugin with several collectives is asked to name one, as before.
  EXPECT_THAT(UnknownCollective("fake_scored"), HasSubstr("a plugin with 2 of them: name one."));
}

TEST_F(Names, CrossDeviceOpsAndTransportsGetTheCloseNameToo) {
  EXPECT_THAT(Thrown([&] {
                registry_.FindCrossDeviceOps("reduction_to_one_devices", "CHORUS_CROSS_DEVICE_OPS");
              }),
              HasSubstr("did you mean reduction_to_one_device?"));
  EXPECT_THAT(Thrown([&] { registry_.FindTransport("tpc", "test"); }),
              HasSubstr("did you mean tcp?"));
}

TEST(ClosestName, FewEditsAPrefixOrAPartAndCaseIgnored) {
  const std::vector<std::string> names = {"gloo", "shm", "hierarchical", "ring@ucx"};
  EXPECT_EQ(ClosestName("glo", names), "gloo");
  EXPECT_EQ(ClosestName("GLOO", names), "gloo");
  EXPECT_EQ(ClosestName("hier", names), "hierarchical");  // a prefix
  EXPECT_EQ(ClosestName("gloo_ring", names), "gloo");     // contains it
  EXPECT_EQ(ClosestName("ring@uxc", names), "ring@ucx");  // 2 edits
  EXPECT_EQ(ClosestName("nosuch", names), "");
  EXPECT_EQ(ClosestName("x", names), "") << "1 edit from nothing, and too short for a part";
  EXPECT_EQ(ClosestName("", names), "");
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(ListOf({"a@tcp", "a@ucx", "a@ofi"}, " or "), "a@tcp, a@ucx or a@ofi");
}

}  // namespace
}  // namespace chorus
