// The resolvers' common checks (SimpleClusterResolver), ValidateParameterServerCluster, and the
// choice among the launchers' variables.
#include "cluster_environment.h"

namespace chorus {
namespace {

TEST(SimpleClusterResolver, ChecksLikeTFConfig) {
  SimpleClusterResolver resolver({{"worker", {"a:1", "b:1"}}}, "worker", 1, "grpc");
  EXPECT_EQ(resolver.name(), "SimpleClusterResolver");
  EXPECT_EQ(resolver.id_in_cluster(), 1);
  EXPECT_EQ(resolver.rpc_layer(), "grpc");
  EXPECT_EQ(ResolverError([] {
              SimpleClusterResolver({{"worker", {"a:1"}}}, "worker", 1);
            }),
            "task index 1 is out of range: the cluster has 1 worker task (indices 0..0); set the "
            "task index within it");
  EXPECT_EQ(ResolverError([] {
              SimpleClusterResolver({{"master", {"a:1"}}}, "master", 0);
            }),
            "unknown task type 'master' in the cluster; TensorFlow 2 calls the coordinating task "
            "'chief': rename 'master' to 'chief'");
}

TEST(ValidateParameterServerCluster, NamesTheProblemAndTheFix) {
  const std::string what = "ParameterServerStrategy: ";
  const auto resolver = [](ClusterSpec spec, const std::string& type) {
    return SimpleClusterResolver(std::move(spec), type, 0);
  };
  ValidateParameterServerCluster(
      resolver({{"chief", {"c:1"}}, {"worker", {"w:1"}}, {"ps", {"p:1"}}}, "chief"));
  ValidateParameterServerCluster(
      resolver({{"worker", {"w:1"}}, {"ps", {"p:1"}}, {"evaluator", {"e:1"}}}, "ps"));
  EXPECT_EQ(ResolverError([&] {
              ValidateParameterServerCluster(
                  resolver({{"chief", {"c:1"}}, {"worker", {"w:1"}}}, "chief"));
            }),
            what +
                "the cluster has no \"ps\" job (its jobs: chief 1, worker 1), and a "
                "parameter-server cluster needs at least one ps task; add one, e.g. \"ps\": "
                "[\"host:2222\"] in TF_CONFIG's cluster");
  EXPECT_EQ(ResolverError([&] {
              ValidateParameterServerCluster(
                  resolver({{"chief", {"c:1"}}, {"worker", {"w:1"}}, {"ps", {}}}, "chief"));
            }),
            what +
                "the cluster has an empty \"ps\" job (its jobs: chief 1, ps 0, worker 1), and a "
                "parameter-server cluster needs at least one ps task; add one, e.g. \"ps\": "
                "[\"host:2222\"] in TF_CONFIG's cluster");
  EXPECT_EQ(
      ResolverError([&] {
        ValidateParameterServerCluster(resolver({{"chief", {"c:1"}}, {"ps", {"p:1"}}}, "chief"));
      }),
      what +
          "the cluster has no \"worker\" job (its jobs: chief 1, ps 1), and a "
          "parameter-server cluster needs at least one worker task; add one, e.g. "
          "\"worker\": [\"host:2222\"] in TF_CONFIG's cluster");
  // More than one chief and unknown jobs, which a resolver of another kind might hand over.
  class Unchecked : public ClusterResolver {
   public:
    explicit Unchecked(ClusterSpec spec) : spec_(std::move(spec)) {}
    const ClusterSpec& cluster_spec() const override { return spec_; }
    const std::string& task_type() const override { return type_; }
    int task_id() const override { return 0; }
    std::string name() const override { return "Unchecked"; }

   private:
    ClusterSpec spec_;
    std::string type_ = "chief";
  };
  EXPECT_EQ(ResolverError([] {
              ValidateParameterServerCluster(
                  Unchecked({{"chief", {"c:1", "c:2"}}, {"worker", {"w:1"}}, {"ps", {"p:1"}}}));
            }),
            what +
                "the cluster has 2 chief tasks; there must be at most one, the coordinator: make "
                "the others workers");
  EXPECT_EQ(ResolverError([] {
              ValidateParameterServerCluster(
                  Unchecked({{"chief", {"c:1"}}, {"trainer", {"t:1"}}, {"ps", {"p:1"}}}));
            }),
            what +
                "unknown task type 'trainer' in the cluster; the task types are chief, worker, "
                "ps and evaluator");
  EXPECT_EQ(ResolverError([] {
              ValidateParameterServerCluster(
                  Unchecked({{"master", {"c:1"}}, {"worker", {"w:1"}}, {"ps", {"p:1"}}}));
            }),
            what +
                "unknown task type 'master' in the cluster; TensorFlow 2 calls the coordinating "
                "task 'chief': rename 'master' to 'chief'");
}

TEST_F(ClusterEnvironment, TFConfigComesFirst) {
  Set("TF_CONFIG", R"({"cluster": {"worker": ["a:1"]}})");
  Set("RANK", "0");
  Set("WORLD_SIZE", "1");
  Set("SLURM_PROCID", "0");
  auto resolved = ResolveClusterFromEnvironment();
  ASSERT_NE(resolved, nullptr);
  EXPECT_EQ(resolved->name(), "TFConfigClusterResolver");
}

}  // namespace
}  // namespace chorus
