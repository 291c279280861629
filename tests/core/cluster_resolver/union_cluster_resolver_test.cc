// UnionClusterResolver, as TensorFlow's UnionResolver over clusters of lists.
#include <memory>

#include "cluster_environment.h"

namespace chorus {
namespace {

std::shared_ptr<const ClusterResolver> Simple(ClusterSpec spec, std::string task_type, int task_id,
                                              std::string rpc_layer = "") {
  return std::make_shared<SimpleClusterResolver>(std::move(spec), std::move(task_type), task_id,
                                                 std::move(rpc_layer));
}

TEST(UnionClusterResolver, MergesTheClustersAndTakesTheFirstTask) {
  UnionClusterResolver resolver(
      {Simple({{"worker", {"worker0:2222", "worker1:2222"}}}, "worker", 1, "grpc"),
       Simple({{"ps", {"ps0:2222", "ps1:2222"}}}, "ps", 0)});
  EXPECT_EQ(resolver.cluster_spec(), (ClusterSpec{{"ps", {"ps0:2222", "ps1:2222"}},
                                                  {"worker", {"worker0:2222", "worker1:2222"}}}));
  EXPECT_EQ(resolver.task_type(), "worker");
  EXPECT_EQ(resolver.task_id(), 1);
  EXPECT_EQ(resolver.rpc_layer(), "grpc");
  EXPECT_EQ(resolver.master(), "grpc://worker1:2222");
  EXPECT_EQ(resolver.master("ps", 1), "grpc://ps1:2222");
  EXPECT_EQ(resolver.master("ps", 0, "http"), "http://ps0:2222");
  EXPECT_EQ(resolver.name(), "UnionClusterResolver");
}

TEST(UnionClusterResolver, AJobInSeveralClustersGetsTheTasksOfEachInOrder) {
  UnionClusterResolver resolver({Simple({{"worker", {"a:1", "b:1"}}}, "worker", 0),
                                 Simple({{"worker", {"c:1"}}, {"chief", {"d:1"}}}, "chief", 0)});
  EXPECT_EQ(resolver.cluster_spec(),
            (ClusterSpec{{"chief", {"d:1"}}, {"worker", {"a:1", "b:1", "c:1"}}}));
  EXPECT_EQ(resolver.num_workers(), 4);
}

TEST(UnionClusterResolver, OverridesComeBeforeTheFirstResolver) {
  TaskOverrides overrides;
  overrides.task_type = "ps";
  overrides.task_id = 1;
  overrides.rpc_layer = "grpc";
  UnionClusterResolver resolver(
      {Simple({{"worker", {"w:1"}}}, "worker", 0), Simple({{"ps", {"p:1", "p:2"}}}, "ps", 0)},
      overrides);
  EXPECT_EQ(resolver.task_type(), "ps");
  EXPECT_EQ(resolver.task_id(), 1);
  EXPECT_EQ(resolver.rpc_layer(), "grpc");
  EXPECT_EQ(resolver.master("ps", 1), "grpc://p:2");
}

TEST(UnionClusterResolver, AcceleratorsOfTheFirstResolver) {
  // TensorFlow's example: a resolver that overrides the GPU count of another.
  auto gpu_override =
      std::make_shared<SimpleClusterResolver>(ClusterSpec{{"worker", {"w:1", "w:2"}}}, "worker", 0);
  gpu_override->set_num_accelerators({{"GPU", 1}});
  UnionClusterResolver resolver({gpu_override, Simple({{"worker", {"w:1", "w:2"}}}, "worker", 0)});
  EXPECT_EQ(resolver.num_accelerators(), (std::map<std::string, int>{{"GPU", 1}}));
}

TEST(UnionClusterResolver, NoResolverOrANullOneIsAnError) {
  EXPECT_EQ(ResolverError([] { UnionClusterResolver unused({}); }),
            "UnionClusterResolver needs at least one ClusterResolver; pass the resolvers to "
            "unite");
  EXPECT_EQ(ResolverError([] {
              UnionClusterResolver unused({Simple({{"worker", {"w:1"}}}, "worker", 0), nullptr});
            }),
            "UnionClusterResolver: resolver 1 is null; pass a ClusterResolver in its place");
}

}  // namespace
}  // namespace chorus
