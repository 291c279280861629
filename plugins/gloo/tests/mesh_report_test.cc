// The set-up check's verdict (src/mesh_report.h): from what each rank saw of its pairs, every rank
// tells a connected mesh from one a process that is not a rank got into, or from a plain failure.
#include "mesh_report.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include "gloo_errors.h"

namespace chorus::gloo_plugin {
namespace {

using testing::HasSubstr;

// Two ranks whose pair connected as it should: rank 0 accepted at 127.0.0.1:40000 the
// connection rank 1 made from 127.0.0.1:50001.
std::vector<RankReport> TwoConnectedRanks() {
  std::vector<RankReport> reports(2, RankReport(2));
  PairReport& accepting = reports[0][1];
  accepting.listens = true;
  accepting.listening = "127.0.0.1:40000";
  accepting.local = "127.0.0.1:40000";
  accepting.remote = "127.0.0.1:50001";
  PairReport& connecting = reports[1][0];
  connecting.listening = "127.0.0.1:40001";
  connecting.local = "127.0.0.1:50001";
  connecting.remote = "127.0.0.1:40000";
  return reports;
}

TEST(GlooMeshReport, AddressesAreWrittenWithHostOrderPorts) {
  sockaddr_storage v4{};
  auto& in = reinterpret_cast<sockaddr_in&>(v4);
  in.sin_family = AF_INET;
  in.sin_port = htons(40000);
  ::inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
  EXPECT_EQ(AddressText(v4), "127.0.0.1:40000");
  sockaddr_storage v6{};
  auto& in6 = reinterpret_cast<sockaddr_in6&>(v6);
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(40001);
  ::inet_pton(AF_INET6, "::1", &in6.sin6_addr);
  EXPECT_EQ(AddressText(v6), "[::1]:40001");
  // Gloo prints the port as stored, in network byte order.
  const std::string gloo_port = std::to_string(htons(40000));
  EXPECT_EQ(WithHostOrderPorts("connect [127.0.0.1]:" + gloo_port + ": Connection refused"),
            "connect [127.0.0.1]:40000: Connection refused");
  EXPECT_EQ(WithHostOrderPorts("Read error [::1]:" + gloo_port + ": reset; [x]:" + gloo_port),
            "Read error [::1]:40000: reset; [x]:40000");
  EXPECT_EQ(WithHostOrderPorts("no address here: ]:99999 [a]:"), "no address here: ]:99999 [a]:");
}

TEST(GlooMeshReport, ReportsRoundTrip) {
  RankReport report = TwoConnectedRanks()[0];
  report[1].error = "a:b\nc";
  report[1].early = "a connection from 127.0.0.1:5";
  report[1].released_with = "127.0.0.1:6";
  const auto decoded = DecodeReport(EncodeReport(report), 2);
  ASSERT_TRUE(decoded);
  EXPECT_EQ((*decoded)[1].listens, true);
  EXPECT_EQ((*decoded)[1].remote, "127.0.0.1:50001");
  EXPECT_EQ((*decoded)[1].error, "a:b\nc");
  EXPECT_EQ((*decoded)[1].early, report[1].early);
  EXPECT_EQ((*decoded)[1].released_with, "127.0.0.1:6");
  EXPECT_FALSE(DecodeReport(EncodeReport(report), 3));
  EXPECT_FALSE(DecodeReport("2:", 2));
  EXPECT_FALSE(DecodeReport(EncodeReport(report) + "x", 2));
}

TEST(GlooMeshReport, PairsWhoseEndsMatchAreConnected) {
  EXPECT_EQ(JudgeMesh(TwoConnectedRanks()).outcome, MeshVerdict::Outcome::kConnected);
}

// Gloo's accepting side took another process's connection for the peer's: the peer's own was
// refused.
TEST(GlooMeshReport, AListenerThatAcceptedAnotherProcessNamesIt) {
  auto reports = TwoConnectedRanks();
  reports[0][1].remote = "127.0.0.1:60000";
  reports[1][0].local.clear();
  reports[1][0].remote.clear();
  reports[1][0].error =
      "connect [127.0.0.1]:" + std::to_string(htons(40000)) + ": Connection refused";
  const MeshVerdict verdict = JudgeMesh(reports);
  EXPECT_EQ(verdict.outcome, MeshVerdict::Outcome::kIntruder);
  EXPECT_EQ(verdict.intruder,
            "rank 0's listener at 127.0.0.1:40000, meant for rank 1, accepted a connection from "
            "127.0.0.1:60000, but rank 1 could not connect (Gloo: connect [127.0.0.1]:40000: "
            "Connection refused)");
}

// The connecting side's socket accepted a connection before that rank connected the pair: only
// another process connects there.
TEST(GlooMeshReport, AConnectionBeforeTheRankConnectedIsAnIntruder) {
  auto reports = TwoConnectedRanks();
  reports[1][0].early = "a connection from 127.0.0.1:60001";
  const MeshVerdict verdict = JudgeMesh(reports);
  EXPECT_EQ(verdict.outcome, MeshVerdict::Outcome::kIntruder);
  EXPECT_THAT(verdict.intruder, HasSubstr("rank 1's listener at 127.0.0.1:40001, meant for rank "
                                          "0, had accepted a connection from 127.0.0.1:60001 "
                                          "before rank 1 connected the pair"));
}

// The accepting side lost a connection during the set-up, which the peer never closes.
TEST(GlooMeshReport, AListenerThatLostAConnectionSawAnIntruder) {
  auto reports = TwoConnectedRanks();
  reports[0][1].remote.clear();
  reports[0][1].error = "Connection closed by peer [127.0.0.1]:" + std::to_string(htons(60002));
  reports[1][0].local.clear();
  reports[1][0].error = "connect: Connection refused";
  const MeshVerdict verdict = JudgeMesh(reports);
  EXPECT_EQ(verdict.outcome, MeshVerdict::Outcome::kIntruder);
  EXPECT_THAT(verdict.intruder,
              HasSubstr("accepted a connection that then closed (Gloo: Connection closed by peer "
                        "[127.0.0.1]:60002)"));
}

// What this plugin connected only to release the peer's listener is not an outsider.
TEST(GlooMeshReport, AReleasingConnectionIsNotTakenForAnOutsider) {
  auto reports = TwoConnectedRanks();
  reports[0][1].remote = "127.0.0.1:50009";
  reports[1][0].released_with = "127.0.0.1:50009";
  reports[1][0].local.clear();
  reports[1][0].error = "Connection closed by peer";
  EXPECT_EQ(JudgeMesh(reports).outcome, MeshVerdict::Outcome::kFailed);
}

// A failure with no sign of another process is Gloo's, as it said it.
TEST(GlooMeshReport, AFailureWithoutAnOutsiderIsGloos) {
  auto reports = TwoConnectedRanks();
  reports[1][0].local.clear();
  reports[1][0].remote.clear();
  reports[1][0].error = "connect [10.0.0.9]:7: No route to host";
  reports[0][1].remote.clear();
  reports[0][1].error = "Connect timeout [10.0.0.9]:7";
  const MeshVerdict verdict = JudgeMesh(reports);
  EXPECT_EQ(verdict.outcome, MeshVerdict::Outcome::kFailed);
  EXPECT_EQ(verdict.rank, 0);
  EXPECT_EQ(verdict.error, "Connect timeout [10.0.0.9]:7");
}

}  // namespace
}  // namespace chorus::gloo_plugin
