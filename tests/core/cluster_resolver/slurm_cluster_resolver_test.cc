// Slurm: node lists, the job's and the step's variables, tasks per node, task overrides, and the
// GPUs num_accelerators() reads from Slurm.
#include "cluster_environment.h"
#include "scoped_variable.h"

namespace chorus {
namespace {

TEST(SlurmHostList, Expands) {
  using Hosts = std::vector<std::string>;
  EXPECT_EQ(ExpandSlurmHostList("node1"), Hosts{"node1"});
  EXPECT_EQ(ExpandSlurmHostList("a,b,c"), (Hosts{"a", "b", "c"}));
  EXPECT_EQ(ExpandSlurmHostList("n[1-3,5],m07"), (Hosts{"n1", "n2", "n3", "n5", "m07"}));
  EXPECT_EQ(ExpandSlurmHostList("node[01-03,07],gpu5"),
            (Hosts{"node01", "node02", "node03", "node07", "gpu5"}));
  EXPECT_EQ(ExpandSlurmHostList("n[8-11]"), (Hosts{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(ExpandSlurmHostList("n[098-101]"), (Hosts{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(ExpandSlurmHostList("a[1-2],b[3,4]-ib"), (Hosts{"a1", "a2", "b3-ib", "b4-ib"}));
  EXPECT_EQ(ExpandSlurmHostList("a[1-2]b[3-4]"), (Hosts{"a1b3", "a1b4", "a2b3", "a2b4"}));
  EXPECT_EQ(ExpandSlurmHostList("[1-2]"), (Hosts{"1", "2"}));
  EXPECT_EQ(ExpandSlurmHostList(" x[1] "), Hosts{"x1"});
}

TEST(SlurmHostList, MalformedListsAreQuoted) {
  const std::string fix = "; write it as Slurm does, e.g. \"node[01-03,07],gpu5\"";
  EXPECT_EQ(ResolverError([] { ExpandSlurmHostList("n[1-3"); }),
            "Slurm node list 'n[1-3' has a '[' without a ']'" + fix);
  EXPECT_EQ(ResolverError([] { ExpandSlurmHostList("n1-3]"); }),
            "Slurm node list 'n1-3]' has a ']' without a '['" + fix);
  EXPECT_EQ(ResolverError([] { ExpandSlurmHostList("n[3-1]"); }),
            "Slurm node list 'n[3-1]' has a range '3-1' that runs backwards" + fix);
  EXPECT_EQ(ResolverError([] { ExpandSlurmHostList("n[a-b]"); }),
            "Slurm node list 'n[a-b]' has a range 'a-b' that is not N or N-M" + fix);
  EXPECT_EQ(ResolverError([] { ExpandSlurmHostList("n[1,]"); }),
            "Slurm node list 'n[1,]' has a range '' that is not N or N-M" + fix);
  EXPECT_EQ(ResolverError([] { ExpandSlurmHostList("a,,b"); }),
            "Slurm node list 'a,,b' has an empty host name" + fix);
  EXPECT_EQ(ResolverError([] { ExpandSlurmHostList(""); }), "Slurm node list '' is empty" + fix);
  EXPECT_EQ(ResolverError([] { ExpandSlurmHostList("n[1-[2]]"); }),
            "Slurm node list 'n[1-[2]]' has nested brackets" + fix);
  EXPECT_EQ(
      ResolverError([] { ExpandSlurmHostList("n[1-99999999]"); }),
      "Slurm node list 'n[1-99999999]' has a range '1-99999999' of more than 1048576 hosts" + fix);
}

TEST_F(ClusterEnvironment, SlurmBlockLayout) {
  Set("SLURM_NODELIST", "n[1-3],gpu7");
  Set("SLURM_NTASKS", "7");
  Set("SLURM_TASKS_PER_NODE", "2(x3),1");
  Set("SLURM_PROCID", "3");
  SlurmClusterResolver resolver(9000);
  EXPECT_EQ(resolver.name(), "SlurmClusterResolver");
  EXPECT_EQ(resolver.cluster_spec().at("worker"),
            (std::vector<std::string>{"n1:9000", "n1:9001", "n2:9000", "n2:9001", "n3:9000",
                                      "n3:9001", "gpu7:9000"}));
  EXPECT_EQ(resolver.task_type(), "worker");
  EXPECT_EQ(resolver.id_in_cluster(), 3);
  EXPECT_EQ(resolver.task_name(), "worker 3");
  EXPECT_EQ(resolver.leader_address(), "n1:9000");
  EXPECT_EQ(resolver.AddressOf(6), "gpu7:9000");

  auto resolved = ResolveClusterFromEnvironment();
  ASSERT_NE(resolved, nullptr);
  EXPECT_EQ(resolved->name(), "SlurmClusterResolver");
  EXPECT_EQ(resolved->AddressOf(0), "n1:8888");  // the default port base
}

TEST_F(ClusterEnvironment, SlurmWithoutTasksPerNode) {
  Set("SLURM_JOB_NODELIST", "a,b");
  Set("SLURM_NTASKS", "4");
  Set("SLURM_PROCID", "0");
  EXPECT_EQ(SlurmClusterResolver(100).cluster_spec().at("worker"),
            (std::vector<std::string>{"a:100", "a:101", "b:100", "b:101"}));
  Set("SLURM_NTASKS_PER_NODE", "2");
  EXPECT_EQ(SlurmClusterResolver(100).num_workers(), 4);
  unsetenv("SLURM_NTASKS_PER_NODE");
  Set("SLURM_NTASKS", "3");
  EXPECT_EQ(ResolverError([] { SlurmClusterResolver resolver; }),
            "SLURM_NTASKS=3 tasks do not split evenly over 2 nodes, and neither "
            "SLURM_TASKS_PER_NODE nor SLURM_NTASKS_PER_NODE is set; set SLURM_TASKS_PER_NODE, "
            "e.g. \"2(x3),1\"");
}

TEST_F(ClusterEnvironment, SlurmVariableErrorsNameTheVariable) {
  EXPECT_EQ(ResolverError([] { SlurmClusterResolver resolver; }),
            "SLURM_NTASKS is not set, and SlurmClusterResolver needs it; start the process "
            "through its launcher or set the variable");
  Set("SLURM_NTASKS", "two");
  EXPECT_EQ(ResolverError([] { SlurmClusterResolver resolver; }),
            "SLURM_NTASKS='two' is not an integer in [1, 2147483647], which SlurmClusterResolver "
            "needs; fix the launcher's variable or unset it");
  Set("SLURM_NTASKS", "2");
  EXPECT_EQ(ResolverError([] { SlurmClusterResolver resolver; }),
            "SLURM_PROCID is not set, and SlurmClusterResolver needs it; start the process "
            "through its launcher or set the variable");
  Set("SLURM_PROCID", "2");
  EXPECT_EQ(ResolverError([] { SlurmClusterResolver resolver; }),
            "SLURM_PROCID='2' is not an integer in [0, 1], which SlurmClusterResolver needs; fix "
            "the launcher's variable or unset it");
  Set("SLURM_PROCID", "1");
  EXPECT_EQ(ResolverError([] { SlurmClusterResolver resolver; }),
            "SLURM_NODELIST is not set, and SlurmClusterResolver needs it; start the process "
            "with srun or set the variable");
  Set("SLURM_NODELIST", "a,b");
  Set("SLURM_TASKS_PER_NODE", "1(x3)");
  EXPECT_EQ(ResolverError([] { SlurmClusterResolver resolver; }),
            "SLURM_TASKS_PER_NODE='1(x3)' gives counts for 3 nodes, but SLURM_NODELIST='a,b' has "
            "2; make them describe the same nodes");
  Set("SLURM_TASKS_PER_NODE", "2,1");
  EXPECT_EQ(ResolverError([] { SlurmClusterResolver resolver; }),
            "the Slurm tasks per node add up to 3 tasks, but SLURM_NTASKS=2; make "
            "SLURM_TASKS_PER_NODE and SLURM_NTASKS agree");
  Set("SLURM_TASKS_PER_NODE", "1(y2)");
  EXPECT_EQ(ResolverError([] { SlurmClusterResolver resolver; }),
            "SLURM_TASKS_PER_NODE='1(y2)' has an item '1(y2)' that is not N or N(xM); write it "
            "as Slurm does, e.g. \"2(x3),1\"");
  Set("SLURM_TASKS_PER_NODE", "1(x2");
  EXPECT_EQ(ResolverError([] { SlurmClusterResolver resolver; }),
            "SLURM_TASKS_PER_NODE='1(x2' has an item '1(x2' that is not N or N(xM); write it as "
            "Slurm does, e.g. \"2(x3),1\"");
  Set("SLURM_TASKS_PER_NODE", "1(x2)");
  EXPECT_EQ(SlurmClusterResolver().task_id(), 1);
  EXPECT_EQ(ResolverError([] { SlurmClusterResolver resolver(65535); }), "no error");
  Set("SLURM_TASKS_PER_NODE", "2,0");
  EXPECT_EQ(ResolverError([] { SlurmClusterResolver resolver(65535); }),
            "SLURM_TASKS_PER_NODE='2,0' has an item '0' that is not N or N(xM); write it as "
            "Slurm does, e.g. \"2(x3),1\"");
  Set("SLURM_TASKS_PER_NODE", "2");
  Set("SLURM_NODELIST", "a");
  EXPECT_EQ(ResolverError([] { SlurmClusterResolver resolver(65535); }),
            "2 tasks on node a need ports up to 65536 from port base 65535; use a lower port "
            "base");
}

using Jobs = SlurmClusterResolver::Jobs;
using Addresses = std::vector<std::string>;

TEST_F(ClusterEnvironment, SlurmJobsTakeTheTasksInOrder) {
  Set("SLURM_STEP_NODELIST", "n[1-2]");
  Set("SLURM_STEP_NUM_TASKS", "3");
  Set("SLURM_STEP_TASKS_PER_NODE", "2,1");
  const std::vector<std::pair<std::string, int>> expected = {
      {"ps", 0}, {"worker", 0}, {"worker", 1}};
  for (int rank = 0; rank < 3; ++rank) {
    Set("SLURM_PROCID", std::to_string(rank));
    SlurmClusterResolver resolver({{"ps", 1}, {"worker", 2}}, 9000);
    EXPECT_EQ(resolver.cluster_spec().at("ps"), Addresses{"n1:9000"});
    EXPECT_EQ(resolver.cluster_spec().at("worker"), (Addresses{"n1:9001", "n2:9000"}));
    EXPECT_EQ(resolver.task_type(), expected[rank].first) << "rank " << rank;
    EXPECT_EQ(resolver.task_id(), expected[rank].second) << "rank " << rank;
    EXPECT_EQ(resolver.rpc_layer(), "grpc");  // TensorFlow's default
  }
  // As TensorFlow (which sorts its dict), the jobs go in order of their names, whatever order
  // they are given in.
  Set("SLURM_PROCID", "0");
  SlurmClusterResolver reversed({{"worker", 2}, {"ps", 1}}, 9000);
  EXPECT_EQ(reversed.task_name(), "ps 0");
  EXPECT_EQ(reversed.cluster_spec().at("worker"), (Addresses{"n1:9001", "n2:9000"}));
  ValidateParameterServerCluster(reversed);
  // Jobs with a chief: chief < ps < worker.
  Set("SLURM_PROCID", "2");
  SlurmClusterResolver with_chief({{"worker", 1}, {"ps", 1}, {"chief", 1}}, 9000);
  EXPECT_EQ(with_chief.cluster_spec(),
            (ClusterSpec{{"chief", {"n1:9000"}}, {"ps", {"n1:9001"}}, {"worker", {"n2:9000"}}}));
  EXPECT_EQ(with_chief.task_name(), "worker 0");
  EXPECT_EQ(with_chief.id_in_cluster(), 1);
}

TEST_F(ClusterEnvironment, SlurmStepVariablesWinOverTheJobs) {
  // The job has 4 tasks on 3 nodes; this srun step runs 3 of them on 2.
  Set("SLURM_NODELIST", "a,b,c");
  Set("SLURM_NTASKS", "4");
  Set("SLURM_TASKS_PER_NODE", "2,1,1");
  Set("SLURM_STEP_NODELIST", "b,c");
  Set("SLURM_STEP_NUM_TASKS", "3");
  Set("SLURM_STEP_TASKS_PER_NODE", "1,2");
  Set("SLURM_PROCID", "2");
  SlurmClusterResolver resolver(100);
  EXPECT_EQ(resolver.cluster_spec().at("worker"), (Addresses{"b:100", "c:100", "c:101"}));
  EXPECT_EQ(resolver.task_name(), "worker 2");
  EXPECT_EQ(resolver.rpc_layer(), "");  // the port-base constructor keeps chorus's default
  // Without the step's variables, the job's.
  unsetenv("SLURM_STEP_NODELIST");
  unsetenv("SLURM_STEP_NUM_TASKS");
  unsetenv("SLURM_STEP_TASKS_PER_NODE");
  EXPECT_EQ(SlurmClusterResolver(100).cluster_spec().at("worker"),
            (Addresses{"a:100", "a:101", "b:100", "c:100"}));
}

TEST_F(ClusterEnvironment, SlurmTasksPerNodeArgumentOverridesTheEnvironment) {
  Set("SLURM_STEP_NODELIST", "n[1-2]");
  Set("SLURM_STEP_NUM_TASKS", "4");
  Set("SLURM_STEP_TASKS_PER_NODE", "3,1");
  Set("SLURM_PROCID", "1");
  SlurmClusterResolver resolver({{"ps", 2}, {"worker", 2}}, 7000, 2, "");
  EXPECT_EQ(resolver.cluster_spec().at("ps"), (Addresses{"n1:7000", "n1:7001"}));
  EXPECT_EQ(resolver.cluster_spec().at("worker"), (Addresses{"n2:7000", "n2:7001"}));
  EXPECT_EQ(resolver.task_name(), "ps 1");
  EXPECT_EQ(ResolverError([] {
              SlurmClusterResolver({{"worker", 4}}, 7000, 0);
            }),
            "SlurmClusterResolver's tasks_per_node 0 is not in 1..65535; pass how many tasks run "
            "on each node, or leave it unset to read Slurm's variables");
  Set("SLURM_PROCID", "3");
  EXPECT_EQ(ResolverError([] {
              SlurmClusterResolver({{"worker", 2}}, 7000, 1);
            }),
            "SLURM_PROCID=3 is not one of the 2 tasks (2 nodes in SLURM_STEP_NODELIST, tasks per "
            "node from tasks_per_node=1); make tasks_per_node match the step's layout");
}

TEST_F(ClusterEnvironment, SlurmJobsThatDoNotAddUpAreRejected) {
  Set("SLURM_STEP_NODELIST", "n[1-2]");
  Set("SLURM_STEP_NUM_TASKS", "3");
  Set("SLURM_STEP_TASKS_PER_NODE", "2,1");
  Set("SLURM_PROCID", "0");
  EXPECT_EQ(ResolverError([] {
              SlurmClusterResolver({{"ps", 1}, {"worker", 3}});
            }),
            "SlurmClusterResolver's jobs ask for 4 tasks (ps 1, worker 3), but the Slurm step has "
            "3 (2 nodes in SLURM_STEP_NODELIST, tasks per node from SLURM_STEP_TASKS_PER_NODE); "
            "make the jobs' counts add up to 3");
  EXPECT_EQ(ResolverError([] {
              SlurmClusterResolver({{"ps", 1}, {"ps", 2}});
            }),
            "SlurmClusterResolver's jobs name 'ps' twice; give each job once with its number of "
            "tasks");
  EXPECT_EQ(ResolverError([] {
              SlurmClusterResolver({{"ps", -1}, {"worker", 4}});
            }),
            "SlurmClusterResolver's job 'ps' has -1 tasks; give every job a count of 0 or more");
  EXPECT_EQ(ResolverError([] {
              SlurmClusterResolver({{"master", 1}, {"worker", 2}});
            }),
            "unknown task type 'master' in the cluster; TensorFlow 2 calls the coordinating task "
            "'chief': rename 'master' to 'chief'");
  Set("SLURM_STEP_TASKS_PER_NODE", "2,x");
  EXPECT_EQ(ResolverError([] {
              SlurmClusterResolver({{"worker", 3}});
            }),
            "SLURM_STEP_TASKS_PER_NODE='2,x' has an item 'x' that is not N or N(xM); write it as "
            "Slurm does, e.g. \"2(x3),1\"");
}

TEST_F(ClusterEnvironment, SlurmMasterIsTheTaskWithItsRpcLayer) {
  Set("SLURM_STEP_NODELIST", "n[1-2]");
  Set("SLURM_STEP_NUM_TASKS", "3");
  Set("SLURM_STEP_TASKS_PER_NODE", "2,1");
  Set("SLURM_PROCID", "1");
  SlurmClusterResolver resolver({{"ps", 1}, {"worker", 2}}, 9000);
  EXPECT_EQ(resolver.master(), "grpc://n1:9001");
  EXPECT_EQ(resolver.master("ps", 0), "grpc://n1:9000");
  EXPECT_EQ(resolver.master("worker", 1, "ucx"), "ucx://n2:9000");
  resolver.set_rpc_layer("");
  EXPECT_EQ(resolver.master(), "n1:9001");
  EXPECT_EQ(ResolverError([&] { resolver.master("worker", 2); }),
            "master(): the cluster has no task worker 2 (its jobs: ps 1, worker 2); ask for a "
            "task type and index it has");
  EXPECT_EQ(FormatMasterUrl("h:1", "grpc"), "grpc://h:1");
  EXPECT_EQ(FormatMasterUrl("h:1", ""), "h:1");
}

TEST_F(ClusterEnvironment, TaskTypeAndIdOverrides) {
  Set("SLURM_STEP_NODELIST", "n1");
  Set("SLURM_STEP_NUM_TASKS", "3");
  Set("SLURM_PROCID", "0");
  SlurmClusterResolver resolver({{"ps", 1}, {"worker", 2}});
  resolver.SetTask("worker", 1);
  EXPECT_EQ(resolver.task_name(), "worker 1");
  EXPECT_EQ(resolver.master(), "grpc://n1:8890");
  EXPECT_EQ(ResolverError([&] { resolver.SetTask("ps", 1); }),
            "task index 1 is out of range: the cluster has 1 ps task (indices 0..0); set the task "
            "index within it");
  EXPECT_EQ(resolver.task_name(), "worker 1") << "a rejected override changes nothing";

  const std::string tf_config = R"({"cluster": {"chief": ["c:1"], "worker": ["w:1", "w:2"],
                                    "ps": ["p:1"]}, "task": {"type": "worker", "index": 1}})";
  const auto as_ps = TFConfigClusterResolver::Parse(tf_config, {"ps", 0, "grpc"});
  EXPECT_EQ(as_ps.task_name(), "ps 0");
  EXPECT_EQ(as_ps.master(), "grpc://p:1");
  EXPECT_EQ(TFConfigClusterResolver::Parse(tf_config, {std::nullopt, 0, std::nullopt}).task_name(),
            "worker 0");
  // Only the type overridden: the index is still TF_CONFIG's, 1, which the chief job lacks.
  EXPECT_EQ(ResolverError([&] {
              TFConfigClusterResolver::Parse(tf_config, {"chief", std::nullopt, std::nullopt});
            }),
            "TF_CONFIG: task index 1 is out of range: the cluster has 1 chief task (indices "
            "0..0); set the task index within it");
}

// --- GPUs: num_accelerators() ---------------------------------------------------------------

using Counts = std::map<std::string, int>;

// A step of 3 tasks, 2 on n1 and 1 on n2 (at most 2 tasks on a node), with every GPU variable
// cleared for the test and put back after it.
class SlurmGpus : public ClusterEnvironment {
 protected:
  void SetUp() override {
    ClusterEnvironment::SetUp();
    Set("SLURM_STEP_NODELIST", "n[1-2]");
    Set("SLURM_STEP_NUM_TASKS", "3");
    Set("SLURM_STEP_TASKS_PER_NODE", "2,1");
    Set("SLURM_PROCID", "0");
  }
  // The GPUs of a resolver made now, from the variables as they are.
  static Counts Gpus() { return SlurmClusterResolver().num_accelerators(); }
  static std::string GpusError() {
    return ResolverError([] { SlurmClusterResolver().num_accelerators(); });
  }
  // What this process's device enumerators count (the last fallback).
  static Counts LocalDevices() {
    return TFConfigClusterResolver::Parse(
               R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}})")
        .num_accelerators();
  }

 private:
  test::ScopedVariable step_gpus_{"SLURM_STEP_GPUS", nullptr};
  test::ScopedVariable job_gpus_{"SLURM_JOB_GPUS", nullptr};
  test::ScopedVariable cuda_visible_devices_{"CUDA_VISIBLE_DEVICES", nullptr};
  test::ScopedVariable gpus_per_task_{"SLURM_GPUS_PER_TASK", nullptr};
  test::ScopedVariable gpus_on_node_{"SLURM_GPUS_ON_NODE", nullptr};
};

TEST_F(SlurmGpus, EachVariableAlone) {
  Set("SLURM_STEP_GPUS", "0-3,6");
  EXPECT_EQ(Gpus(), (Counts{{"GPU", 5}}));
  Set("SLURM_STEP_GPUS", "2");
  EXPECT_EQ(Gpus(), (Counts{{"GPU", 1}}));
  unsetenv("SLURM_STEP_GPUS");

  Set("SLURM_JOB_GPUS", "1,3");
  EXPECT_EQ(Gpus(), (Counts{{"GPU", 2}}));
  Set("SLURM_JOB_GPUS", "4-7");
  EXPECT_EQ(Gpus(), (Counts{{"GPU", 4}}));
  unsetenv("SLURM_JOB_GPUS");

  Set("CUDA_VISIBLE_DEVICES", "0,1,2");
  EXPECT_EQ(Gpus(), (Counts{{"GPU", 3}}));
  Set("CUDA_VISIBLE_DEVICES", "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6,MIG-GPU-1/2/0");
  EXPECT_EQ(Gpus(), (Counts{{"GPU", 2}}));
  Set("CUDA_VISIBLE_DEVICES", "0,-1,2");  // as CUDA: a negative index ends the list
  EXPECT_EQ(Gpus(), (Counts{{"GPU", 1}}));
  unsetenv("CUDA_VISIBLE_DEVICES");

  Set("SLURM_GPUS_PER_TASK", "2");
  EXPECT_EQ(Gpus(), (Counts{{"GPU", 2}}));
  Set("SLURM_GPUS_PER_TASK", "a100:2");
  EXPECT_EQ(Gpus(), (Counts{{"GPU", 2}}));
  unsetenv("SLURM_GPUS_PER_TASK");

  Set("SLURM_GPUS_ON_NODE", "4");
  EXPECT_EQ(Gpus(), (Counts{{"GPU", 4}}));
  Set("SLURM_GPUS_ON_NODE", "gpu:h100:3");
  EXPECT_EQ(Gpus(), (Counts{{"GPU", 3}}));
  unsetenv("SLURM_GPUS_ON_NODE");

  // None set: this process's devices, as the other resolvers count them.
  EXPECT_EQ(Gpus(), LocalDevices());
}

TEST_F(SlurmGpus, PrecedenceOrder) {
  Set("SLURM_STEP_GPUS", "0");
  Set("SLURM_JOB_GPUS", "0,1");
  Set("CUDA_VISIBLE_DEVICES", "0,1,2");
  Set("SLURM_GPUS_PER_TASK", "4");
  Set("SLURM_GPUS_ON_NODE", "5");
  SlurmClusterResolver resolver;
  EXPECT_EQ(resolver.num_accelerators(), (Counts{{"GPU", 1}}));
  unsetenv("SLURM_STEP_GPUS");  // read on each call, not when the resolver was made
  EXPECT_EQ(resolver.num_accelerators(), (Counts{{"GPU", 2}}));
  unsetenv("SLURM_JOB_GPUS");
  EXPECT_EQ(resolver.num_accelerators(), (Counts{{"GPU", 3}}));
  unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(resolver.num_accelerators(), (Counts{{"GPU", 4}}));
  unsetenv("SLURM_GPUS_PER_TASK");
  EXPECT_EQ(resolver.num_accelerators(), (Counts{{"GPU", 5}}));
  unsetenv("SLURM_GPUS_ON_NODE");
  EXPECT_EQ(resolver.num_accelerators(), LocalDevices());
  // Every task is answered alike; a task the cluster lacks is an error.
  Set("SLURM_STEP_GPUS", "0-1");
  EXPECT_EQ(resolver.num_accelerators("worker", 2), (Counts{{"GPU", 2}}));
  EXPECT_TRUE(Contains(ResolverError([&] { resolver.num_accelerators("worker", 3); }),
                       "the cluster has no task worker 3"));
}

TEST_F(SlurmGpus, ZeroGpusIsEmpty) {
  Set("SLURM_GPUS_ON_NODE", "2");
  for (const char* none : {"", "NoDevFiles", "-1"}) {
    Set("CUDA_VISIBLE_DEVICES", none);
    EXPECT_EQ(Gpus(), Counts{}) << "CUDA_VISIBLE_DEVICES='" << none << "'";
  }
  // A set but empty SLURM_STEP_GPUS is Slurm's answer too: it wins over CUDA_VISIBLE_DEVICES.
  Set("CUDA_VISIBLE_DEVICES", "0,1");
  Set("SLURM_STEP_GPUS", "");
  EXPECT_EQ(Gpus(), Counts{});
  unsetenv("SLURM_STEP_GPUS");
  unsetenv("CUDA_VISIBLE_DEVICES");
  Set("SLURM_GPUS_ON_NODE", "0");
  EXPECT_EQ(Gpus(), Counts{});
}

TEST_F(SlurmGpus, ExplicitCountsWin) {
  Set("SLURM_STEP_GPUS", "0-7");
  SlurmClusterResolver resolver;
  EXPECT_EQ(resolver.max_tasks_per_node(), 2);
  EXPECT_EQ(resolver.num_accelerators(), (Counts{{"GPU", 8}}));
  // As TensorFlow: gpus_per_task defaults to gpus_per_node / the most tasks on a node.
  resolver.SetGpus(4);
  EXPECT_EQ(resolver.num_accelerators(), (Counts{{"GPU", 2}}));
  resolver.SetGpus(5);
  EXPECT_EQ(resolver.num_accelerators(), (Counts{{"GPU", 2}}));
  resolver.SetGpus(4, 1);
  EXPECT_EQ(resolver.num_accelerators(), (Counts{{"GPU", 1}}));
  resolver.SetGpus(std::nullopt, 3);
  EXPECT_EQ(resolver.num_accelerators(), (Counts{{"GPU", 3}}));
  resolver.SetGpus(1);  // 1 / 2 tasks: no GPU for a task
  EXPECT_EQ(resolver.num_accelerators(), Counts{});
  resolver.SetGpus(0, 0);
  EXPECT_EQ(resolver.num_accelerators(), Counts{});
  // The tasks_per_node argument is the layout the division uses.
  SlurmClusterResolver one_per_node({{"worker", 2}}, 8888, 1);
  one_per_node.SetGpus(4);
  EXPECT_EQ(one_per_node.num_accelerators(), (Counts{{"GPU", 4}}));
  // set_num_accelerators() wins over both.
  resolver.SetGpus(4, 2);
  resolver.set_num_accelerators({{"TPU", 1}});
  EXPECT_EQ(resolver.num_accelerators(), (Counts{{"TPU", 1}}));
  // Clearing the counts reads Slurm again.
  SlurmClusterResolver cleared;
  cleared.SetGpus(4, 2);
  cleared.SetGpus(std::nullopt, std::nullopt);
  EXPECT_EQ(cleared.num_accelerators(), (Counts{{"GPU", 8}}));
}

TEST_F(SlurmGpus, BadExplicitCountsAreRejected) {
  SlurmClusterResolver resolver;
  resolver.SetGpus(4, 2);
  EXPECT_EQ(ResolverError([&] { resolver.SetGpus(4, 3); }),
            "SlurmClusterResolver's gpus_per_task 3 on 2 tasks of a node needs 6 GPUs, but "
            "gpus_per_node is 4; lower gpus_per_task or raise gpus_per_node");
  EXPECT_EQ(ResolverError([&] { resolver.SetGpus(-1); }),
            "SlurmClusterResolver's gpus_per_node -1 is negative; pass how many GPUs there are, "
            "or leave it unset to read Slurm's variables");
  EXPECT_EQ(ResolverError([&] { resolver.SetGpus(std::nullopt, -2); }),
            "SlurmClusterResolver's gpus_per_task -2 is negative; pass how many GPUs there are, "
            "or leave it unset to read Slurm's variables");
  EXPECT_EQ(resolver.num_accelerators(), (Counts{{"GPU", 2}})) << "a rejected count keeps it";
}

TEST_F(SlurmGpus, MalformedValuesAreNamed) {
  const std::string list_fix =
      "' that is not a GPU index N or a range N-M (N <= M); write it as Slurm does, e.g. "
      "\"0-3,6\"";
  Set("SLURM_STEP_GPUS", "0-x");
  EXPECT_EQ(GpusError(), "SLURM_STEP_GPUS='0-x' has an item '0-x" + list_fix);
  Set("SLURM_STEP_GPUS", "0,,1");
  EXPECT_EQ(GpusError(), "SLURM_STEP_GPUS='0,,1' has an item '" + list_fix);
  unsetenv("SLURM_STEP_GPUS");
  Set("SLURM_JOB_GPUS", "3-1");
  EXPECT_EQ(GpusError(), "SLURM_JOB_GPUS='3-1' has an item '3-1" + list_fix);
  Set("SLURM_JOB_GPUS", "0-99999999");
  EXPECT_EQ(GpusError(),
            "SLURM_JOB_GPUS='0-99999999' names more than 1048576 GPUs; write the GPU indices Slurm "
            "gave the step, e.g. \"0-3,6\"");
  unsetenv("SLURM_JOB_GPUS");
  Set("CUDA_VISIBLE_DEVICES", "0,gpu1");
  EXPECT_EQ(GpusError(),
            "CUDA_VISIBLE_DEVICES='0,gpu1' has an item 'gpu1' that is not a GPU index or UUID; "
            "write a comma list such as \"0,1\" or \"GPU-<uuid>\", or \"\" for no GPU");
  unsetenv("CUDA_VISIBLE_DEVICES");
  const std::string count_fix =
      " is not a GPU count N or TYPE:N (N at most 1048576); write it as Slurm does, e.g. \"2\" "
      "or \"a100:2\"";
  Set("SLURM_GPUS_PER_TASK", "a100:x");
  EXPECT_EQ(GpusError(), "SLURM_GPUS_PER_TASK='a100:x'" + count_fix);
  unsetenv("SLURM_GPUS_PER_TASK");
  Set("SLURM_GPUS_ON_NODE", "");
  EXPECT_EQ(GpusError(), "SLURM_GPUS_ON_NODE=''" + count_fix);
  Set("SLURM_GPUS_ON_NODE", "-2");
  EXPECT_EQ(GpusError(), "SLURM_GPUS_ON_NODE='-2'" + count_fix);
  // The constructor reads no GPU variable: only num_accelerators() reports it.
  EXPECT_EQ(ResolverError([] { SlurmClusterResolver resolver; }), "no error");
  // An explicit count wins, so a bad variable is not read.
  SlurmClusterResolver resolver;
  resolver.SetGpus(std::nullopt, 1);
  EXPECT_EQ(resolver.num_accelerators(), (Counts{{"GPU", 1}}));
}

}  // namespace
}  // namespace chorus
