// Cluster resolvers: TF_CONFIG as TensorFlow reads and checks it, Slurm's node lists and
// variables, torchrun's and Open MPI's variables, and the choice among them.
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_resolver.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace chorus {
namespace {

const char* const kLauncherVariables[] = {"TF_CONFIG",
                                          "RANK",
                                          "WORLD_SIZE",
                                          "MASTER_ADDR",
                                          "MASTER_PORT",
                                          "OMPI_COMM_WORLD_RANK",
                                          "OMPI_COMM_WORLD_SIZE",
                                          "SLURM_PROCID",
                                          "SLURM_NTASKS",
                                          "SLURM_NODELIST",
                                          "SLURM_JOB_NODELIST",
                                          "SLURM_TASKS_PER_NODE",
                                          "SLURM_NTASKS_PER_NODE",
                                          "SLURM_STEP_NUM_TASKS",
                                          "SLURM_STEP_NODELIST",
                                          "SLURM_STEP_TASKS_PER_NODE"};

// Unsets every variable a resolver reads, and puts back what was there after the test.
class ClusterEnvironment : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kLauncherVariables) {
      if (const char* value = getenv(name)) saved_[name] = value;
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kLauncherVariables) {
      auto it = saved_.find(name);
      if (it == saved_.end()) {
        unsetenv(name);
      } else {
        setenv(name, it->second.c_str(), 1);
      }
    }
  }
  static void Set(const char* name, const std::string& value) { setenv(name, value.c_str(), 1); }

 private:
  std::map<std::string, std::string> saved_;
};

// The message of the error `make` throws, or "no error".
template <typename Make>
std::string ResolverError(Make make) {
  try {
    make();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT) << e.what();
    return e.what();
  }
  return "no error";
}

std::string ParseError(const std::string& tf_config) {
  return ResolverError([&] { TFConfigClusterResolver::Parse(tf_config); });
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const std::string kExample =
    "e.g. {\"cluster\": {\"worker\": [\"host1:2222\", \"host2:2222\"]}, \"task\": {\"type\": "
    "\"worker\", \"index\": 0}}";
const std::string kAddressFix =
    "; write every address as \"host:port\" with a port in 1..65535, e.g. \"localhost:2222\" or "
    "\"[::1]:2222\"";

// --- TF_CONFIG: malformed -------------------------------------------------------------------

TEST(TFConfigClusterResolver, BadJsonQuotesTheValue) {
  const std::string message = ParseError("{\"cluster\": ");
  EXPECT_TRUE(Contains(message, "TF_CONFIG: '{\"cluster\": ' is not valid JSON (")) << message;
  EXPECT_TRUE(Contains(message, "); fix it, " + kExample)) << message;
}

TEST(TFConfigClusterResolver, NotAnObject) {
  EXPECT_EQ(
      ParseError("[1, 2]"),
      "TF_CONFIG: must be a JSON object with \"cluster\" and \"task\", not [1,2]; " + kExample);
}

TEST(TFConfigClusterResolver, MissingCluster) {
  EXPECT_EQ(ParseError(R"({"task": {"type": "worker", "index": 0}})"),
            "TF_CONFIG: there is no \"cluster\"; add the jobs and their addresses, " + kExample);
}

TEST(TFConfigClusterResolver, ClusterNotAnObject) {
  EXPECT_EQ(ParseError(R"({"cluster": ["a:1"]})"),
            "TF_CONFIG: \"cluster\" must be an object of job name to a list of \"host:port\" "
            "strings, not [\"a:1\"]; " +
                kExample);
}

TEST(TFConfigClusterResolver, JobNotAList) {
  EXPECT_EQ(ParseError(R"({"cluster": {"worker": "a:1"}})"),
            "TF_CONFIG: job \"worker\" must be a list of \"host:port\" strings, not \"a:1\"; "
            "write it as [\"host:port\", ...]");
}

TEST(TFConfigClusterResolver, AddressNotAString) {
  EXPECT_EQ(ParseError(R"({"cluster": {"worker": ["a:1", 2222]}})"),
            "TF_CONFIG: the address of worker 1 must be a \"host:port\" string, not 2222; quote "
            "it, e.g. \"host:2222\"");
}

TEST(TFConfigClusterResolver, AddressWithoutPort) {
  EXPECT_EQ(ParseError(R"({"cluster": {"worker": ["hostA"]}})"),
            "TF_CONFIG: address 'hostA' of worker 0 has no port" + kAddressFix);
}

TEST(TFConfigClusterResolver, AddressWithPortZeroOrTooLarge) {
  EXPECT_EQ(ParseError(R"({"cluster": {"worker": ["a:0"]}})"),
            "TF_CONFIG: address 'a:0' of worker 0 has a port 0 outside 1..65535" + kAddressFix);
  EXPECT_EQ(
      ParseError(R"({"cluster": {"chief": ["a:70000"]}})"),
      "TF_CONFIG: address 'a:70000' of chief 0 has a port 70000 outside 1..65535" + kAddressFix);
}

TEST(TFConfigClusterResolver, OtherBadAddresses) {
  EXPECT_EQ(ParseError(R"({"cluster": {"worker": ["a:http"]}})"),
            "TF_CONFIG: address 'a:http' of worker 0 has a port 'http' that is not a number" +
                kAddressFix);
  EXPECT_EQ(ParseError(R"({"cluster": {"worker": [":2222"]}})"),
            "TF_CONFIG: address ':2222' of worker 0 has no host" + kAddressFix);
  EXPECT_EQ(ParseError(R"({"cluster": {"worker": ["a:"]}})"),
            "TF_CONFIG: address 'a:' of worker 0 has an empty port" + kAddressFix);
  EXPECT_EQ(ParseError(R"({"cluster": {"worker": ["::1:2222"]}})"),
            "TF_CONFIG: address '::1:2222' of worker 0 has an IPv6 host without brackets, which "
            "makes the port ambiguous (write it as '[::1]:2222')" +
                kAddressFix);
  EXPECT_EQ(ParseError(R"({"cluster": {"worker": ["[::1]:2222"]}})"), "no error");
}

TEST(TFConfigClusterResolver, MasterIsRejectedForChief) {
  EXPECT_EQ(ParseError(R"({"cluster": {"master": ["a:1"], "worker": ["b:1"]},
                           "task": {"type": "worker", "index": 0}})"),
            "TF_CONFIG: unknown task type 'master' in the cluster; TensorFlow 2 calls the "
            "coordinating task 'chief': rename 'master' to 'chief'");
  EXPECT_EQ(ParseError(R"({"cluster": {"chief": ["a:1"]}, "task": {"type": "master"}})"),
            "TF_CONFIG: unknown task type 'master' for this task; TensorFlow 2 calls the "
            "coordinating task 'chief': rename 'master' to 'chief'");
  EXPECT_EQ(ParseError(R"({"cluster": {"trainer": ["a:1"]}})"),
            "TF_CONFIG: unknown task type 'trainer' in the cluster; the task types are chief, "
            "worker, ps and evaluator");
}

TEST(TFConfigClusterResolver, TwoChiefs) {
  EXPECT_EQ(ParseError(R"({"cluster": {"chief": ["a:1", "b:1"]},
                           "task": {"type": "chief", "index": 0}})"),
            "TF_CONFIG: the cluster has 2 chief tasks; there must be at most one: make the "
            "others workers");
}

TEST(TFConfigClusterResolver, TwoEvaluators) {
  EXPECT_EQ(ParseError(R"({"cluster": {"worker": ["a:1"], "evaluator": ["b:1", "c:1"]},
                           "task": {"type": "worker", "index": 0}})"),
            "TF_CONFIG: the cluster has 2 evaluator tasks; there must be at most one");
}

TEST(TFConfigClusterResolver, IndexOutOfRange) {
  const std::string cluster = R"({"cluster": {"worker": ["a:1", "b:1"]}, )";
  EXPECT_EQ(ParseError(cluster + R"("task": {"type": "worker", "index": 2}})"),
            "TF_CONFIG: task index 2 is out of range: the cluster has 2 worker tasks (indices "
            "0..1); set the task index within it");
  EXPECT_EQ(ParseError(cluster + R"("task": {"type": "worker", "index": -1}})"),
            "TF_CONFIG: task index -1 is out of range: the cluster has 2 worker tasks (indices "
            "0..1); set the task index within it");
  EXPECT_EQ(ParseError(cluster + R"("task": {"type": "worker", "index": 99999999999}})"),
            "TF_CONFIG: task index 99999999999 is out of range; set it to this task's index in "
            "its job");
  EXPECT_EQ(ParseError(cluster + R"("task": {"type": "worker", "index": 1.5}})"),
            "TF_CONFIG: task \"index\" must be an integer, not 1.5; e.g. \"index\": 0");
}

TEST(TFConfigClusterResolver, DuplicateAddress) {
  EXPECT_EQ(ParseError(R"({"cluster": {"chief": ["a:1"], "worker": ["b:1", "a:1"]},
                           "task": {"type": "chief", "index": 0}})"),
            "TF_CONFIG: address 'a:1' is used by both chief 0 and worker 1; give every task its "
            "own host:port");
}

TEST(TFConfigClusterResolver, MissingTaskWithSeveralTasks) {
  EXPECT_EQ(ParseError(R"({"cluster": {"worker": ["a:1", "b:1", "c:1"]}})"),
            "TF_CONFIG: there is no \"task\" and the cluster has 3 tasks; add \"task\": "
            "{\"type\": ..., \"index\": ...} to say which one this process is");
}

TEST(TFConfigClusterResolver, EmptyCluster) {
  EXPECT_EQ(ParseError(R"({"cluster": {}})"),
            "TF_CONFIG: the cluster has no tasks; list at least one address, " + kExample);
}

TEST(TFConfigClusterResolver, TaskTypeNotInCluster) {
  EXPECT_EQ(ParseError(R"({"cluster": {"chief": ["a:1"], "ps": ["b:1"]},
                           "task": {"type": "worker", "index": 0}})"),
            "TF_CONFIG: this task's type 'worker' is not a job of the cluster (it has chief, ps); "
            "set the task type to one of them or add the job");
}

TEST(TFConfigClusterResolver, MalformedTask) {
  const std::string cluster = R"({"cluster": {"worker": ["a:1", "b:1"]}, )";
  EXPECT_EQ(ParseError(cluster + R"("task": "worker"})"),
            "TF_CONFIG: \"task\" must be an object like {\"type\": \"worker\", \"index\": 0}, "
            "not \"worker\"");
  EXPECT_EQ(ParseError(cluster + R"("task": {"index": 1}})"),
            "TF_CONFIG: \"task\" needs a \"type\" string (chief, worker, ps or evaluator), but it "
            "is {\"index\":1}; e.g. {\"type\": \"worker\", \"index\": 0}");
  EXPECT_EQ(ParseError(cluster + R"("task": {"type": "worker"}})"),
            "TF_CONFIG: \"task\" has no \"index\" ({\"type\":\"worker\"}); add which worker this "
            "process is, e.g. \"index\": 0");
  EXPECT_EQ(ParseError(cluster + R"("task": {"type": "worker", "index": 1}, "rpc_layer": 3})"),
            "TF_CONFIG: \"rpc_layer\" must be a string such as \"grpc\", not 3");
}

TEST_F(ClusterEnvironment, TFConfigUnset) {
  EXPECT_EQ(ResolverError([] { TFConfigClusterResolver resolver; }),
            "TF_CONFIG is not set; set it to the cluster and this task as JSON, " + kExample);
  Set("TF_CONFIG", "{");
  EXPECT_TRUE(Contains(ResolverError([] { TFConfigClusterResolver resolver; }),
                       "TF_CONFIG: '{' is not valid JSON ("));
}

// --- TF_CONFIG: well formed -----------------------------------------------------------------

const char* const kChiefAndWorkers = R"({
  "cluster": {"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"], "ps": ["p0:2222"],
              "evaluator": ["e:2222"]},
  "task": {"type": "%s", "index": %d}})";

TFConfigClusterResolver ChiefAndWorkers(const std::string& type, int index) {
  char text[512];
  snprintf(text, sizeof(text), kChiefAndWorkers, type.c_str(), index);
  return TFConfigClusterResolver::Parse(text);
}

TEST(TFConfigClusterResolver, ChiefAndWorkers) {
  const TFConfigClusterResolver chief = ChiefAndWorkers("chief", 0);
  EXPECT_EQ(chief.name(), "TFConfigClusterResolver");
  EXPECT_EQ(chief.num_workers(), 3);
  EXPECT_EQ(chief.id_in_cluster(), 0);
  EXPECT_TRUE(chief.is_leader());
  EXPECT_EQ(chief.leader_address(), "c:2222");
  EXPECT_EQ(chief.task_name(), "chief 0");
  EXPECT_EQ(chief.rpc_layer(), "");
  EXPECT_EQ(chief.cluster_spec().at("ps"), std::vector<std::string>{"p0:2222"});

  const TFConfigClusterResolver worker1 = ChiefAndWorkers("worker", 1);
  EXPECT_EQ(worker1.task_type(), "worker");
  EXPECT_EQ(worker1.task_id(), 1);
  EXPECT_EQ(worker1.num_workers(), 3);
  EXPECT_EQ(worker1.id_in_cluster(), 2);
  EXPECT_FALSE(worker1.is_leader());
  EXPECT_EQ(worker1.leader_address(), "c:2222");
  EXPECT_EQ(worker1.task_name(), "worker 1");
  EXPECT_FALSE(ChiefAndWorkers("worker", 0).is_leader());
  EXPECT_EQ(ChiefAndWorkers("worker", 0).id_in_cluster(), 1);

  EXPECT_EQ(worker1.TaskNameOf(0), "chief 0");
  EXPECT_EQ(worker1.TaskNameOf(1), "worker 0");
  EXPECT_EQ(worker1.TaskNameOf(2), "worker 1");
  EXPECT_EQ(worker1.AddressOf(0), "c:2222");
  EXPECT_EQ(worker1.AddressOf(1), "w0:2222");
  EXPECT_EQ(worker1.AddressOf(2), "w1:2222");
  EXPECT_EQ(ResolverError([&] { worker1.TaskNameOf(3); }),
            "collective worker id 3 is out of range: the cluster has 3 chief and worker tasks "
            "(ids 0..2); ask for an id in that range");
  EXPECT_EQ(ResolverError([&] { worker1.AddressOf(-1); }),
            "collective worker id -1 is out of range: the cluster has 3 chief and worker tasks "
            "(ids 0..2); ask for an id in that range");
}

TEST(TFConfigClusterResolver, PsAndEvaluatorAreNotCollectiveWorkers) {
  for (const char* type : {"ps", "evaluator"}) {
    const TFConfigClusterResolver resolver = ChiefAndWorkers(type, 0);
    EXPECT_EQ(resolver.num_workers(), 3);
    EXPECT_FALSE(resolver.is_leader());
    EXPECT_EQ(resolver.leader_address(), "c:2222");
    EXPECT_EQ(resolver.task_name(), std::string(type) + " 0");
    EXPECT_EQ(ResolverError([&] { resolver.id_in_cluster(); }),
              std::string(type) +
                  " 0 has no id in the cluster: only the chief and the workers take part in "
                  "collectives; ask for the id of a chief or worker task");
  }
}

TEST(TFConfigClusterResolver, WorkersOnly) {
  const auto resolver = TFConfigClusterResolver::Parse(
      R"({"cluster": {"worker": ["a:1", "b:2", "c:3"]}, "task": {"type": "worker", "index": 2}})");
  EXPECT_EQ(resolver.num_workers(), 3);
  EXPECT_EQ(resolver.id_in_cluster(), 2);
  EXPECT_FALSE(resolver.is_leader());
  EXPECT_EQ(resolver.leader_address(), "a:1");
  EXPECT_EQ(resolver.task_name(), "worker 2");
  EXPECT_EQ(resolver.TaskNameOf(0), "worker 0");
  EXPECT_EQ(resolver.AddressOf(2), "c:3");
  const auto leader = TFConfigClusterResolver::Parse(
      R"({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0}})");
  EXPECT_TRUE(leader.is_leader());
  EXPECT_EQ(leader.id_in_cluster(), 0);
}

TEST(TFConfigClusterResolver, OneWorkerWithoutTaskIsWorkerZero) {
  const auto resolver = TFConfigClusterResolver::Parse(R"({"cluster": {"worker": ["a:1"]}})");
  EXPECT_EQ(resolver.task_type(), "worker");
  EXPECT_EQ(resolver.task_id(), 0);
  EXPECT_TRUE(resolver.is_leader());
  EXPECT_EQ(resolver.num_workers(), 1);
}

TEST(TFConfigClusterResolver, RpcLayerAndStringIndex) {
  const auto resolver = TFConfigClusterResolver::Parse(
      R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": "1"},
          "rpc_layer": "grpc", "environment": "cloud"})");
  EXPECT_EQ(resolver.rpc_layer(), "grpc");
  EXPECT_EQ(resolver.task_id(), 1);
}

TEST(TFConfigClusterResolver, AnEvaluatorNeedNotBeInTheCluster) {
  const auto resolver = TFConfigClusterResolver::Parse(
      R"({"cluster": {"chief": ["c:1"], "worker": ["w:1"]}, "task": {"type": "evaluator",
          "index": 0}})");
  EXPECT_EQ(resolver.task_name(), "evaluator 0");
  EXPECT_EQ(resolver.num_workers(), 2);
  EXPECT_FALSE(resolver.is_leader());
  EXPECT_EQ(resolver.leader_address(), "c:1");
  EXPECT_EQ(ParseError(R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "evaluator",
                           "index": 1}})"),
            "TF_CONFIG: task index 1 of an evaluator that is not in the cluster must be 0: there "
            "is at most one evaluator");
}

TEST(TFConfigClusterResolver, NoLeaderWithoutChiefOrWorker) {
  const auto resolver = TFConfigClusterResolver::Parse(R"({"cluster": {"evaluator": ["e:1"]}})");
  EXPECT_EQ(resolver.num_workers(), 0);
  EXPECT_FALSE(resolver.is_leader());
  EXPECT_EQ(ResolverError([&] { resolver.leader_address(); }),
            "the cluster has neither a chief nor a worker task, so it has no leader; add a chief "
            "or worker job");
}

TEST_F(ClusterEnvironment, TFConfigFromTheVariable) {
  Set("TF_CONFIG", R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker",
                       "index": 1}})");
  TFConfigClusterResolver resolver;
  EXPECT_EQ(resolver.id_in_cluster(), 1);
  auto resolved = ResolveClusterFromEnvironment();
  ASSERT_NE(resolved, nullptr);
  EXPECT_EQ(resolved->name(), "TFConfigClusterResolver");
  EXPECT_EQ(resolved->AddressOf(1), "b:1");
}

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

// --- Slurm ----------------------------------------------------------------------------------

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

// --- Slurm: jobs, step variables, tasks_per_node, master() ------------------------------------

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

// --- task overrides, "{}", ValidateParameterServerCluster -----------------------------------

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

TEST(TFConfigClusterResolver, MasterAsTensorFlow) {
  const auto chief = ChiefAndWorkers("chief", 0);
  EXPECT_EQ(chief.master(), "c:2222");
  EXPECT_EQ(chief.master("worker", 1, "grpc"), "grpc://w1:2222");
  // One task, or none: nothing to connect to.
  EXPECT_EQ(TFConfigClusterResolver::Parse(R"({"cluster": {"worker": ["a:1"]}})").master(), "");
  EXPECT_EQ(TFConfigClusterResolver::Parse(
                R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker",
                    "index": 1}, "session_master": "grpc://s:9"})")
                .master("worker", 0),
            "grpc://s:9");
}

TEST_F(ClusterEnvironment, EmptyTFConfigIsASingleLocalProcess) {
  const auto alone = TFConfigClusterResolver::Parse("{}");
  EXPECT_TRUE(alone.cluster_spec().empty());
  EXPECT_EQ(alone.task_type(), "");
  EXPECT_EQ(alone.num_workers(), 0);
  EXPECT_EQ(alone.master(), "");
  EXPECT_EQ(TFConfigClusterResolver::Parse(R"({"rpc_layer": "grpc"})").rpc_layer(), "grpc");
  Set("TF_CONFIG", "{}");
  EXPECT_EQ(ResolveClusterFromEnvironment(), nullptr);
  EXPECT_TRUE(TFConfigClusterResolver().cluster_spec().empty());
  // An explicit, empty cluster is still a mistake.
  EXPECT_EQ(ParseError(R"({"cluster": {}})"),
            "TF_CONFIG: the cluster has no tasks; list at least one address, " + kExample);
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

// --- torchrun and Open MPI ------------------------------------------------------------------

TEST_F(ClusterEnvironment, Torchrun) {
  Set("RANK", "2");
  Set("WORLD_SIZE", "4");
  Set("MASTER_ADDR", "10.0.0.5");
  Set("MASTER_PORT", "7000");
  LauncherClusterResolver resolver;
  EXPECT_EQ(resolver.name(), "TorchrunClusterResolver");
  EXPECT_EQ(resolver.num_workers(), 4);
  EXPECT_EQ(resolver.id_in_cluster(), 2);
  EXPECT_FALSE(resolver.is_leader());
  EXPECT_EQ(resolver.leader_address(), "10.0.0.5:7000");
  EXPECT_EQ(resolver.AddressOf(3), "10.0.0.5:7003");
  EXPECT_EQ(resolver.TaskNameOf(2), "worker 2");
  auto resolved = ResolveClusterFromEnvironment();
  ASSERT_NE(resolved, nullptr);
  EXPECT_EQ(resolved->name(), "TorchrunClusterResolver");
}

TEST_F(ClusterEnvironment, TorchrunDefaultsAndErrors) {
  Set("RANK", "0");
  EXPECT_EQ(ResolverError([] { LauncherClusterResolver resolver; }),
            "WORLD_SIZE is not set, and TorchrunClusterResolver needs it; start the process "
            "through its launcher or set the variable");
  Set("WORLD_SIZE", "2");
  LauncherClusterResolver resolver;
  EXPECT_TRUE(resolver.is_leader());
  EXPECT_EQ(resolver.AddressOf(1), "127.0.0.1:29501");
  Set("RANK", "2");
  EXPECT_EQ(ResolverError([] { LauncherClusterResolver resolver; }),
            "RANK='2' is not an integer in [0, 1], which TorchrunClusterResolver needs; fix the "
            "launcher's variable or unset it");
  Set("RANK", "1");
  Set("MASTER_PORT", "http");
  EXPECT_EQ(ResolverError([] { LauncherClusterResolver resolver; }),
            "MASTER_PORT='http' is not an integer in [1, 65535], which TorchrunClusterResolver "
            "needs; fix the launcher's variable or unset it");
  Set("MASTER_PORT", "65535");
  EXPECT_EQ(ResolverError([] { LauncherClusterResolver resolver; }),
            "WORLD_SIZE=2 workers from MASTER_PORT=65535 need ports up to 65536, past 65535; set "
            "a lower MASTER_PORT");
}

TEST_F(ClusterEnvironment, OpenMpi) {
  Set("OMPI_COMM_WORLD_RANK", "1");
  Set("OMPI_COMM_WORLD_SIZE", "3");
  Set("SLURM_PROCID", "0");  // mpirun inside a Slurm allocation: Open MPI's rank wins
  LauncherClusterResolver resolver;
  EXPECT_EQ(resolver.name(), "OpenMpiClusterResolver");
  EXPECT_EQ(resolver.id_in_cluster(), 1);
  EXPECT_EQ(resolver.AddressOf(2), "127.0.0.1:29502");
  auto resolved = ResolveClusterFromEnvironment();
  ASSERT_NE(resolved, nullptr);
  EXPECT_EQ(resolved->name(), "OpenMpiClusterResolver");
  Set("OMPI_COMM_WORLD_SIZE", "x");
  EXPECT_EQ(ResolverError([] { LauncherClusterResolver resolver; }),
            "OMPI_COMM_WORLD_SIZE='x' is not an integer in [1, 2147483647], which "
            "OpenMpiClusterResolver needs; fix the launcher's variable or unset it");
}

TEST_F(ClusterEnvironment, NoLauncher) {
  EXPECT_EQ(ResolveClusterFromEnvironment(), nullptr);
  EXPECT_EQ(ResolverError([] { LauncherClusterResolver resolver; }),
            "LauncherClusterResolver found neither torchrun's RANK and WORLD_SIZE nor Open MPI's "
            "OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE; start the processes with torchrun or "
            "mpirun, or set those variables");
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
