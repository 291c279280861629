// SparseClusterSpec, as TensorFlow's tf.train.ClusterSpec (server_lib_test.py's ClusterSpecTest and
// server_lib_sparse_job_test.py), and SimpleClusterResolver over a spec with gaps.
#include <chorus/cluster_resolver/cluster_spec.h>

#include <memory>

#include "cluster_environment.h"

namespace chorus {
namespace {

using JobTasks = SparseClusterSpec::JobTasks;
using TaskMap = SparseClusterSpec::TaskMap;

// The message of the Error(NOT_FOUND) `call` throws, or "no error".
template <typename Call>
std::string NotFoundError(Call call) {
  try {
    call();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_NOT_FOUND) << e.what();
    return e.what();
  }
  return "no error";
}

// TensorFlow's testClusterSpecAccessors.
TEST(SparseClusterSpec, AccessorsAsTensorFlows) {
  const SparseClusterSpec spec({{"ps", {"ps0:2222", "ps1:2222"}},
                                {"worker", {"worker0:2222", "worker1:2222", "worker2:2222"}},
                                {"sparse", {{0, "sparse0:2222"}, {3, "sparse3:2222"}}}});
  EXPECT_EQ(
      spec.as_dict(),
      (std::map<std::string, JobTasks>{
          {"ps", std::vector<std::string>{"ps0:2222", "ps1:2222"}},
          {"worker", std::vector<std::string>{"worker0:2222", "worker1:2222", "worker2:2222"}},
          {"sparse", TaskMap{{0, "sparse0:2222"}, {3, "sparse3:2222"}}}}));
  EXPECT_EQ(spec.jobs(), (std::vector<std::string>{"ps", "sparse", "worker"}));

  EXPECT_EQ(spec.num_tasks("ps"), 2);
  EXPECT_EQ(spec.num_tasks("worker"), 3);
  EXPECT_EQ(spec.num_tasks("sparse"), 2);
  const std::string unknown =
      "no such job in the cluster: 'unknown' (its jobs: ps, sparse, worker); ask for a job it has";
  EXPECT_EQ(NotFoundError([&] { spec.num_tasks("unknown"); }), unknown);

  EXPECT_EQ(spec.task_address("ps", 0), "ps0:2222");
  EXPECT_EQ(spec.task_address("sparse", 0), "sparse0:2222");
  EXPECT_EQ(spec.task_address("sparse", 3), "sparse3:2222");
  EXPECT_EQ(NotFoundError([&] { spec.task_address("unknown", 0); }), unknown);
  EXPECT_EQ(NotFoundError([&] { spec.task_address("sparse", 2); }),
            "no task with index 2 in job 'sparse' (its task indices: 0, 3); ask for a task it has");
  EXPECT_EQ(NotFoundError([&] { spec.task_address("ps", -1); }),
            "no task with index -1 in job 'ps' (its task indices: 0, 1); ask for a task it has");

  EXPECT_EQ(spec.task_indices("ps"), (std::vector<int>{0, 1}));
  EXPECT_EQ(spec.task_indices("worker"), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(spec.task_indices("sparse"), (std::vector<int>{0, 3}));
  EXPECT_EQ(NotFoundError([&] { spec.task_indices("unknown"); }), unknown);

  using Optional = std::optional<std::string>;
  EXPECT_EQ(spec.job_tasks("ps"), (std::vector<Optional>{"ps0:2222", "ps1:2222"}));
  EXPECT_EQ(spec.job_tasks("worker"),
            (std::vector<Optional>{"worker0:2222", "worker1:2222", "worker2:2222"}));
  EXPECT_EQ(spec.job_tasks("sparse"),
            (std::vector<Optional>{"sparse0:2222", std::nullopt, std::nullopt, "sparse3:2222"}));
  EXPECT_EQ(NotFoundError([&] { spec.job_tasks("unknown"); }), unknown);
}

// server_lib_sparse_job_test.py's cluster: one task, index 37.
TEST(SparseClusterSpec, AJobOfOneTaskAtIndex37) {
  const SparseClusterSpec spec({{"local", {{37, "localhost:0"}}}});
  EXPECT_EQ(spec.num_tasks("local"), 1);
  EXPECT_EQ(spec.task_indices("local"), (std::vector<int>{37}));
  EXPECT_EQ(spec.task_address("local", 37), "localhost:0");
  EXPECT_EQ(spec.job_tasks("local").size(), 38u);
  EXPECT_EQ(spec.job_tasks("local")[37], "localhost:0");
  EXPECT_EQ(spec.as_dict(),
            (std::map<std::string, JobTasks>{{"local", TaskMap{{37, "localhost:0"}}}}));
  EXPECT_FALSE(spec.is_dense());
  EXPECT_EQ(ResolverError([&] { spec.ToDense(); }),
            "job 'local' has no task 0 (its task indices: 37), and a ClusterSpec lists task i at "
            "position i, so it cannot leave a task out (the strategies need tasks 0..n-1): give "
            "its task index 0");
}

// TensorFlow's testProtoDictDefEquivalencesWithSparseJobs (without the protocol buffer): what a
// ClusterDef holds, every job's tasks by index.
TEST(SparseClusterSpec, DenseAndSparseJobsByIndex) {
  const SparseClusterSpec spec(
      {{"ps", {"ps0:2222", "ps1:2222"}}, {"worker", {{0, "worker0:2222"}, {2, "worker2:2222"}}}});
  EXPECT_EQ(spec.tasks(), (SparseClusterSpec::SparseJobs{
                              {"ps", {{0, "ps0:2222"}, {1, "ps1:2222"}}},
                              {"worker", {{0, "worker0:2222"}, {2, "worker2:2222"}}}}));
  EXPECT_EQ(SparseClusterSpec(spec.tasks()), spec);
  EXPECT_EQ(
      ResolverError([&] { spec.ToDense(); }),
      "job 'worker' has no task 1 (its task indices: 0, 2), and a ClusterSpec lists task i at "
      "position i, so it cannot leave a task out (the strategies need tasks 0..n-1): number "
      "its tasks 0..1 or add the missing ones");
}

// TensorFlow's testProtoDictDefEquivalences and ...WithZeroWorker, through ToDense().
TEST(SparseClusterSpec, DenseRoundTrip) {
  for (const ClusterSpec& dense :
       {ClusterSpec{{"ps", {"ps0:2222", "ps1:2222"}},
                    {"worker", {"worker0:2222", "worker1:2222", "worker2:2222"}}},
        ClusterSpec{{"ps", {"ps0:2222", "ps1:2222"}}, {"worker", {}}}, ClusterSpec{}}) {
    const SparseClusterSpec spec(dense);
    EXPECT_TRUE(spec.is_dense());
    EXPECT_EQ(spec.ToDense(), dense);
    EXPECT_EQ(SparseClusterSpec(spec.ToDense()), spec);
    EXPECT_EQ(SparseClusterSpec(spec.tasks()), spec);
    for (const auto& [job, addresses] : dense) {
      EXPECT_EQ(spec.as_dict().at(job), JobTasks(addresses)) << job;
    }
  }
  // An empty job is dense: no tasks to list, whether given as a list or as a map.
  const SparseClusterSpec empty_job({{"ps", {"ps0:2222"}}, {"worker", {}}});
  EXPECT_EQ(empty_job.num_tasks("worker"), 0);
  EXPECT_TRUE(empty_job.task_indices("worker").empty());
  EXPECT_TRUE(empty_job.job_tasks("worker").empty());
  EXPECT_EQ(empty_job.as_dict().at("worker"), JobTasks(std::vector<std::string>{}));
  EXPECT_EQ(SparseClusterSpec(ClusterSpec{{"ps", {"ps0:2222"}}}, {{"worker", {}}}), empty_job);
}

TEST(SparseClusterSpec, EmptyIsTensorFlowsFalse) {
  EXPECT_TRUE(SparseClusterSpec().empty());
  EXPECT_TRUE(SparseClusterSpec(ClusterSpec{}).empty());
  EXPECT_FALSE(SparseClusterSpec({{"job", {"host:port"}}}).empty());
  EXPECT_TRUE(SparseClusterSpec().jobs().empty());
}

// TensorFlow's testEq and testNe.
TEST(SparseClusterSpec, Equality) {
  EXPECT_EQ(SparseClusterSpec(), SparseClusterSpec(ClusterSpec{}));
  EXPECT_EQ(SparseClusterSpec({{"job", {"host:2222"}}}),
            SparseClusterSpec({{"job", {"host:2222"}}}));
  EXPECT_EQ(SparseClusterSpec({{"job", {{0, "host:2222"}}}}),
            SparseClusterSpec({{"job", {"host:2222"}}}));
  EXPECT_EQ(SparseClusterSpec(SparseClusterSpec::SparseJobs{{"job", {{0, "host:2222"}}}}),
            SparseClusterSpec(ClusterSpec{{"job", {"host:2222"}}}));
  EXPECT_NE(SparseClusterSpec(), SparseClusterSpec({{"job", {"host:2223"}}}));
  EXPECT_NE(SparseClusterSpec({{"job1", {"host:2222"}}}),
            SparseClusterSpec({{"job2", {"host:2222"}}}));
  EXPECT_NE(SparseClusterSpec({{"job", {"host:2222"}}}),
            SparseClusterSpec({{"job", {"host:2223"}}}));
  EXPECT_NE(SparseClusterSpec({{"job", {"host:2222", "host:2223"}}}),
            SparseClusterSpec({{"job", {"host:2223", "host:2222"}}}));
  EXPECT_NE(SparseClusterSpec({{"job", {{1, "host:2222"}}}}),
            SparseClusterSpec({{"job", {"host:2222"}}}));
}

TEST(SparseClusterSpec, MixesDenseAndSparseJobs) {
  const ClusterSpec dense = {{"ps", {"ps0:2222", "ps1:2222"}}};
  const SparseClusterSpec::SparseJobs sparse = {{"worker", {{1, "w1:2222"}, {3, "w3:2222"}}}};
  const SparseClusterSpec spec(dense, sparse);
  EXPECT_EQ(spec, SparseClusterSpec({{"ps", {"ps0:2222", "ps1:2222"}},
                                     {"worker", {{1, "w1:2222"}, {3, "w3:2222"}}}}));
  EXPECT_EQ(spec.task_address("worker", 3), "w3:2222");
  EXPECT_EQ(spec.num_tasks("ps"), 2);
  EXPECT_FALSE(spec.is_dense());
}

TEST(SparseClusterSpec, RefusesWhatNoClusterCanMean) {
  EXPECT_EQ(ResolverError([] {
              SparseClusterSpec({{"worker", {{-1, "w:1"}}}});
            }),
            "task index -1 of job 'worker' is negative; task indices count from 0");
  EXPECT_EQ(ResolverError([] {
              SparseClusterSpec({{"worker", {{2, ""}}}});
            }),
            "the address of worker 2 is empty; give every task its \"host:port\", e.g. "
            "\"localhost:2222\"");
  EXPECT_EQ(ResolverError([] {
              SparseClusterSpec({{"worker", {"w0:1", ""}}});
            }),
            "the address of worker 1 is empty; give every task its \"host:port\", e.g. "
            "\"localhost:2222\"");
  EXPECT_EQ(ResolverError([] {
              SparseClusterSpec({{"ps", {"a:1"}}, {"worker", {{4, "a:1"}}}});
            }),
            "address 'a:1' is used by both ps 0 and worker 4; give every task its own host:port");
  EXPECT_EQ(ResolverError([] {
              SparseClusterSpec({{"worker", {{1, "a:1"}, {1, "b:1"}}}});
            }),
            "worker 1 is given twice ('a:1' and 'b:1'); give each task index once");
  EXPECT_EQ(ResolverError([] {
              SparseClusterSpec({{"worker", {"a:1"}}, {"worker", {"b:1"}}});
            }),
            "job 'worker' is given twice; give each job once");
  EXPECT_EQ(ResolverError([] {
              SparseClusterSpec(ClusterSpec{{"worker", {"a:1"}}},
                                SparseClusterSpec::SparseJobs{{"worker", {{1, "b:1"}}}});
            }),
            "job 'worker' is given both as a list and as a map of task index to address; give "
            "it once");
  EXPECT_EQ(ResolverError([] {
              SparseClusterSpec(ClusterSpec{{"", {"a:1"}}});
            }),
            "a job has an empty name; name every job, e.g. \"worker\" (tasks are "
            "/job:<name>/task:i)");
}

TEST(SparseClusterSpec, ListsIndicesInRuns) {
  const SparseClusterSpec spec(SparseClusterSpec::SparseJobs{
      {"w", {{0, "a:1"}, {1, "b:1"}, {2, "c:1"}, {5, "d:1"}, {7, "e:1"}, {8, "f:1"}}}});
  EXPECT_EQ(NotFoundError([&] { spec.task_address("w", 4); }),
            "no task with index 4 in job 'w' (its task indices: 0..2, 5, 7, 8); ask for a task "
            "it has");
  EXPECT_EQ(ResolverError([&] { spec.ToDense(); }),
            "job 'w' has no task 3 (its task indices: 0..2, 5, 7, 8), and a ClusterSpec lists "
            "task i at position i, so it cannot leave a task out (the strategies need tasks "
            "0..n-1): number its tasks 0..5 or add the missing ones");
}

TEST(SimpleClusterResolverWithGaps, ADenseSpecMakesTheSameResolverAsAClusterSpec) {
  const ClusterSpec dense = {{"chief", {"c:1"}}, {"worker", {"w0:1", "w1:1"}}};
  SimpleClusterResolver resolver(SparseClusterSpec(dense), "worker", 1, "grpc");
  SimpleClusterResolver expected(dense, "worker", 1, "grpc");
  EXPECT_EQ(resolver.cluster_spec(), dense);
  EXPECT_EQ(resolver.cluster_spec_with_gaps(), SparseClusterSpec(dense));
  EXPECT_EQ(expected.cluster_spec_with_gaps(), SparseClusterSpec(dense));
  EXPECT_EQ(resolver.id_in_cluster(), expected.id_in_cluster());
  EXPECT_EQ(resolver.num_workers(), 3);
  EXPECT_EQ(resolver.master(), "grpc://w1:1");
  EXPECT_EQ(resolver.master("chief", 0), expected.master("chief", 0));
  // The checks of the ClusterSpec constructor, with its messages.
  EXPECT_EQ(ResolverError([] {
              SimpleClusterResolver(SparseClusterSpec({{"worker", {"a:1"}}}), "worker", 1);
            }),
            ResolverError([] {
              SimpleClusterResolver({{"worker", {"a:1"}}}, "worker", 1);
            }));
  EXPECT_EQ(ResolverError([] {
              SimpleClusterResolver(SparseClusterSpec({{"master", {"a:1"}}}), "master", 0);
            }),
            "unknown task type 'master' in the cluster; TensorFlow 2 calls the coordinating task "
            "'chief': rename 'master' to 'chief'");
}

TEST(SimpleClusterResolverWithGaps, RefusesGapsAmongTheChiefAndTheWorkers) {
  EXPECT_EQ(ResolverError([] {
              SimpleClusterResolver(
                  SparseClusterSpec({{"worker", {{1, "w1:2222"}, {3, "w3:2222"}}}}), "worker", 1);
            }),
            "the worker job has no task 0 (its task indices: 1, 3), and the chief and the workers "
            "take part in collectives, which number them 0..n-1 (as TensorFlow's "
            "MultiWorkerMirroredStrategy needs contiguous worker indices): number its tasks 0..1 "
            "or add the missing ones");
  EXPECT_EQ(ResolverError([] {
              SimpleClusterResolver(
                  SparseClusterSpec({{"chief", {{1, "c:1"}}}, {"worker", {"w0:1"}}}), "worker", 0);
            }),
            "the chief job has no task 0 (its task indices: 1), and the chief and the workers take "
            "part in collectives, which number them 0..n-1 (as TensorFlow's "
            "MultiWorkerMirroredStrategy needs contiguous worker indices): give its task index 0");
}

// A ps job with gaps: every task by its index, the collectives as for a dense spec.
TEST(SimpleClusterResolverWithGaps, APsJobWithGapsKeepsItsIndices) {
  const SparseClusterSpec spec(
      {{"chief", {"c:1"}}, {"worker", {"w0:1", "w1:1"}}, {"ps", {{1, "p1:1"}, {3, "p3:1"}}}});
  SimpleClusterResolver resolver(spec, "ps", 3, "grpc");
  EXPECT_EQ(resolver.task_type(), "ps");
  EXPECT_EQ(resolver.task_id(), 3);
  EXPECT_EQ(resolver.cluster_spec_with_gaps(), spec);
  EXPECT_EQ(resolver.master(), "grpc://p3:1");
  EXPECT_EQ(resolver.master("ps", 1), "grpc://p1:1");
  EXPECT_EQ(resolver.master("worker", 1, "http"), "http://w1:1");
  EXPECT_EQ(ResolverError([&] { resolver.master("ps", 0); }),
            "master(): no task with index 0 in job 'ps' (its task indices: 1, 3); ask for a task "
            "it has");
  EXPECT_EQ(resolver.num_accelerators("ps", 1), (std::map<std::string, int>{}));
  EXPECT_EQ(ResolverError([&] { resolver.num_accelerators("ps", 2); }),
            "master(): no task with index 2 in job 'ps' (its task indices: 1, 3); ask for a task "
            "it has");
  EXPECT_EQ(resolver.num_workers(), 3);
  EXPECT_EQ(resolver.leader_address(), "c:1");
  EXPECT_EQ(resolver.AddressOf(2), "w1:1");
  EXPECT_EQ(resolver.TaskNameOf(2), "worker 1");
  EXPECT_FALSE(resolver.is_leader());
  EXPECT_EQ(ResolverError([&] { resolver.id_in_cluster(); }),
            "ps 3 has no id in the cluster: only the chief and the workers take part in "
            "collectives; ask for the id of a chief or worker task");

  const std::string no_dense_form =
      "SimpleClusterResolver: cluster_spec(): job 'ps' has no task 0 (its task indices: 1, 3), "
      "and a ClusterSpec lists task i at position i, so it cannot show the job without "
      "renumbering its tasks; read cluster_spec_with_gaps() instead, or close the gap: number "
      "its tasks 0..1 or add the missing ones";
  EXPECT_EQ(ResolverError([&] { resolver.cluster_spec(); }), no_dense_form);
  // What needs the whole spec as a ClusterSpec fails with it.
  EXPECT_EQ(ResolverError([&] { ValidateParameterServerCluster(resolver); }), no_dense_form);
  EXPECT_EQ(ResolverError([&] {
              UnionClusterResolver({std::make_shared<SimpleClusterResolver>(spec, "worker", 0)});
            }),
            no_dense_form);

  SimpleClusterResolver worker(spec, "worker", 1);
  EXPECT_EQ(worker.id_in_cluster(), 2);
  EXPECT_EQ(worker.master(), "w1:1");
  worker.SetTask("ps", 1);
  EXPECT_EQ(worker.master(), "p1:1");
}

TEST(SimpleClusterResolverWithGaps, TheTaskMustBeOneTheSpecHas) {
  const SparseClusterSpec spec({{"worker", {"w0:1"}}, {"ps", {{1, "p1:1"}, {3, "p3:1"}}}});
  const std::string not_a_task =
      "task index 2 is not a task of the ps job (its task indices: 1, 3); set the task index to "
      "one of them";
  EXPECT_EQ(ResolverError([&] { SimpleClusterResolver(spec, "ps", 2); }), not_a_task);
  SimpleClusterResolver resolver(spec, "ps", 1);
  EXPECT_EQ(ResolverError([&] { resolver.SetTask("ps", 2); }), not_a_task);
  EXPECT_EQ(resolver.task_type(), "ps");
  EXPECT_EQ(resolver.task_id(), 1);
  EXPECT_EQ(ResolverError([&] { resolver.SetTask("worker", 1); }),
            "task index 1 is out of range: the cluster has 1 worker task (indices 0..0); set the "
            "task index within it");
}

TEST(SimpleClusterResolverWithGaps, AnEvaluatorWithAGap) {
  SimpleClusterResolver resolver(
      SparseClusterSpec({{"worker", {"w0:1"}}, {"evaluator", {{2, "e:1"}}}}), "evaluator", 2);
  EXPECT_EQ(resolver.master(), "e:1");
  EXPECT_EQ(resolver.num_workers(), 1);
  EXPECT_EQ(resolver.leader_address(), "w0:1");
}

// The spec takes any job name and address, as TensorFlow's; the resolver checks them as
// TF_CONFIG's.
TEST(SimpleClusterResolverWithGaps, ChecksJobsAndAddressesLikeTFConfig) {
  const SparseClusterSpec trainer({{"worker", {"w0:1"}}, {"trainer", {{1, "t:1"}}}});
  EXPECT_EQ(trainer.task_address("trainer", 1), "t:1");
  EXPECT_EQ(ResolverError([&] { SimpleClusterResolver(trainer, "worker", 0); }),
            "unknown task type 'trainer' in the cluster; the task types are chief, worker, ps and "
            "evaluator");
  const SparseClusterSpec port_zero({{"worker", {"w0:1"}}, {"ps", {{1, "localhost:0"}}}});
  EXPECT_TRUE(Contains(ResolverError([&] { SimpleClusterResolver(port_zero, "worker", 0); }),
                       "address 'localhost:0' of ps 1 has a port 0 outside 1..65535"));
}

}  // namespace
}  // namespace chorus
