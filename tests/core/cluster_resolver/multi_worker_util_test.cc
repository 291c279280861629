// multi_worker_util: TensorFlow's multi_worker_util_test cases (is_chief) and the answers for an
// evaluator, a ps task and the collective leader that TensorFlow's implementation gives.
#include <chorus/cluster_resolver/multi_worker_util.h>

#include "cluster_environment.h"

namespace chorus {
namespace {

namespace mwu = multi_worker_util;

const ClusterSpec kWithChief = {{"chief", {"127.0.0.1:1234"}},
                                {"worker", {"127.0.0.1:8964", "127.0.0.1:2333"}},
                                {"ps", {"127.0.0.1:1926", "127.0.0.1:3141"}},
                                {"evaluator", {"127.0.0.1:5000"}}};
const ClusterSpec kWithoutChief = {{"worker", {"127.0.0.1:8964", "127.0.0.1:2333"}}};

TEST(MultiWorkerUtil, IsChiefInAClusterWithChief) {
  EXPECT_TRUE(mwu::is_chief(kWithChief, "chief", 0));
  EXPECT_FALSE(mwu::is_chief(kWithChief, "worker", 0));
  // The evaluator is a chief of its own.
  EXPECT_TRUE(mwu::is_chief(kWithChief, "evaluator", 0));
  EXPECT_FALSE(mwu::is_chief(kWithChief, "ps", 0));
}

TEST(MultiWorkerUtil, IsChiefInAClusterWithoutChief) {
  EXPECT_TRUE(mwu::is_chief(kWithoutChief, "worker", 0));
  EXPECT_FALSE(mwu::is_chief(kWithoutChief, "worker", 1));
  EXPECT_EQ(ResolverError([] { mwu::is_chief(kWithoutChief, "chief", 0); }),
            "task_type 'chief' is not a job of the cluster spec; add it or ask for a job the "
            "cluster has");
  EXPECT_EQ(ResolverError([] { mwu::is_chief(kWithoutChief, "worker", 2); }),
            "task_id 2 is not a task of job 'worker', which has 2 tasks");
  EXPECT_EQ(ResolverError([] { mwu::is_chief(kWithoutChief, "master", 0); }),
            "unrecognized task_type 'master': the task types are chief, worker, evaluator and ps");
}

TEST(MultiWorkerUtil, WorkerCountAndIdInCluster) {
  EXPECT_EQ(mwu::worker_count(kWithChief, "chief"), 3);
  EXPECT_EQ(mwu::worker_count(kWithChief, "worker"), 3);
  EXPECT_EQ(mwu::worker_count(kWithChief, "evaluator"), 1);
  EXPECT_EQ(mwu::id_in_cluster(kWithChief, "chief", 0), 0);
  EXPECT_EQ(mwu::id_in_cluster(kWithChief, "worker", 1), 2);
  EXPECT_EQ(mwu::id_in_cluster(kWithChief, "evaluator", 0), 0);
  EXPECT_EQ(mwu::id_in_cluster(kWithoutChief, "worker", 1), 1);
  EXPECT_EQ(ResolverError([] { mwu::worker_count(kWithChief, "ps"); }),
            "worker_count of task_type 'ps': only a chief, worker or evaluator task counts "
            "workers");
  EXPECT_EQ(ResolverError([] { mwu::id_in_cluster(kWithChief, "ps", 1); }),
            "there is no id for task_type 'ps': only chief, worker and evaluator tasks have one");
}

TEST(MultiWorkerUtil, CollectiveLeader) {
  EXPECT_EQ(mwu::collective_leader(kWithChief, "worker", 1), "/job:chief/replica:0/task:0");
  EXPECT_EQ(mwu::collective_leader(kWithoutChief, "worker", 1), "/job:worker/replica:0/task:0");
  EXPECT_EQ(mwu::collective_leader(kWithChief, "evaluator", 0), "");
  EXPECT_EQ(mwu::collective_leader({}, "worker", 0), "");  // a local process
}

TEST(MultiWorkerUtil, AtMostOneChiefAndOneEvaluator) {
  const ClusterSpec two_chiefs = {{"chief", {"a:1", "b:1"}}, {"worker", {"c:1"}}};
  EXPECT_EQ(ResolverError([&] { mwu::is_chief(two_chiefs, "worker", 0); }),
            "there must be at most one 'chief' task in the cluster");
  const ClusterSpec two_evaluators = {{"worker", {"c:1"}}, {"evaluator", {"a:1", "b:1"}}};
  EXPECT_EQ(ResolverError([&] { mwu::worker_count(two_evaluators, "worker"); }),
            "there must be at most one 'evaluator' task in the cluster");
}

}  // namespace
}  // namespace chorus
