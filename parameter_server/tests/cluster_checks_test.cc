// What ParameterServerStrategy and ServeIfServerTask make of the cluster, without processes.
#include <chorus/base/error.h>
#include <chorus/parameter_server/functions.h>
#include <chorus/parameter_server/parameter_server_strategy.h>
#include <gtest/gtest.h>

namespace chorus {
namespace {

std::string StrategyError(ClusterSpec spec, const std::string& type, int index) {
  try {
    ParameterServerStrategy strategy(std::make_unique<SimpleClusterResolver>(spec, type, index));
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT) << e.what();
    return e.what();
  }
  return "no error";
}

const ClusterSpec kGood = {{"chief", {"127.0.0.1:1"}},
                           {"worker", {"127.0.0.1:2", "127.0.0.1:3"}},
                           {"ps", {"127.0.0.1:4"}}};

TEST(ParameterServerCluster, NoPsIsRefusedWithAMessage) {
  ClusterSpec spec = kGood;
  spec.erase("ps");
  EXPECT_NE(StrategyError(spec, "chief", 0).find("no \"ps\" job"), std::string::npos);
}

TEST(ParameterServerCluster, NoWorkerIsRefusedWithAMessage) {
  ClusterSpec spec = kGood;
  spec.erase("worker");
  EXPECT_NE(StrategyError(spec, "chief", 0).find("no \"worker\" job"), std::string::npos);
}

TEST(ParameterServerCluster, TwoChiefsAreRefusedByTfConfig) {
  try {
    TFConfigClusterResolver::Parse(
        R"({"cluster": {"chief": ["a:1", "b:1"], "worker": ["c:1"], "ps": ["d:1"]},
            "task": {"type": "chief", "index": 0}})");
    FAIL() << "two chiefs were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chief"), std::string::npos) << e.what();
  }
}

TEST(ParameterServerCluster, APsRunningTheTrainingProgramIsToldToServe) {
  const std::string message = StrategyError(kGood, "ps", 0);
  EXPECT_NE(message.find("this process is ps 0"), std::string::npos) << message;
  EXPECT_NE(message.find("ServeIfServerTask"), std::string::npos) << message;
}

TEST(ParameterServerCluster, AWorkerRunningTheTrainingProgramIsToldToServe) {
  const std::string message = StrategyError(kGood, "worker", 1);
  EXPECT_NE(message.find("this process is worker 1"), std::string::npos) << message;
}

TEST(ParameterServerCluster, AnUnknownJobIsNamed) {
  ClusterSpec spec = kGood;
  spec["master"] = {"127.0.0.1:9"};
  const std::string message = StrategyError(spec, "chief", 0);
  EXPECT_NE(message.find("'master'"), std::string::npos) << message;
}

TEST(ServeIfServerTask, TheChiefAndAJobWithoutPsGoOn) {
  const SimpleClusterResolver chief(kGood, "chief", 0);
  EXPECT_FALSE(ServeIfServerTask(&chief));
  const SimpleClusterResolver collective_worker({{"worker", {"127.0.0.1:2", "127.0.0.1:3"}}},
                                                "worker", 0);
  EXPECT_FALSE(ServeIfServerTask(&collective_worker));
}

TEST(ShardedVariable, CreateOutsideAScopeIsRefused) {
  EXPECT_THROW(ShardedVariable::Create(VariableSpec{"w"}, Tensor()), Error);
}

}  // namespace
}  // namespace chorus
