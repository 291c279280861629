// TF_CONFIG as TensorFlow reads and checks it: malformed values named with the fix, the roles
// of chief, workers, ps and evaluator, and master().
#include "cluster_environment.h"

namespace chorus {
namespace {

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

}  // namespace
}  // namespace chorus
