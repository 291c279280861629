// TPUClusterResolver: TensorFlow's tpu_cluster_resolver_test cases that need no Cloud TPU API
// (grpc addresses, the GKE variable, "local", task overrides, the device bookkeeping), the TPU VM
// variables, and the errors for what chorus cannot resolve.
#include <chorus/cluster_resolver/tpu_cluster_resolver.h>

#include "cluster_environment.h"

namespace chorus {
namespace {

using Details = TPUClusterResolver::DeviceDetails;

TEST_F(ClusterEnvironment, TpuGrpcAddressNeedsNoLookup) {
  TPUClusterResolver resolver("grpc://10.1.2.3:8470");
  EXPECT_EQ(resolver.master(), "grpc://10.1.2.3:8470");
  EXPECT_EQ(resolver.cluster_spec(), (ClusterSpec{{"worker", {"10.1.2.3:8470"}}}));
  EXPECT_EQ(resolver.task_type(), "worker");
  EXPECT_EQ(resolver.task_id(), 0);
  EXPECT_EQ(resolver.rpc_layer(), "grpc");
  EXPECT_EQ(resolver.source(), "argument");
  EXPECT_EQ(resolver.name(), "TPUClusterResolver");
}

TEST_F(ClusterEnvironment, TpuGkeEnvironmentForDonut) {
  Set("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "grpc://10.120.27.5:8470");
  TPUClusterResolver resolver;
  EXPECT_EQ(resolver.master(), "grpc://10.120.27.5:8470");
  EXPECT_EQ(resolver.cluster_spec(), (ClusterSpec{{"worker", {"10.120.27.5:8470"}}}));
  EXPECT_EQ(resolver.source(), "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS");
}

TEST_F(ClusterEnvironment, TpuGkeEnvironmentForPod) {
  Set("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS",
      "grpc://10.120.27.5:8470,grpc://10.120.27.6:8470,grpc://10.120.27.7:8470,"
      "grpc://10.120.27.8:8470");
  Set("TPU_NAME", "ignored-because-the-endpoints-come-first");
  TPUClusterResolver resolver;
  EXPECT_EQ(resolver.master(), "grpc://10.120.27.5:8470");
  EXPECT_EQ(resolver.cluster_spec(), (ClusterSpec{{"worker",
                                                   {"10.120.27.5:8470", "10.120.27.6:8470",
                                                    "10.120.27.7:8470", "10.120.27.8:8470"}}}));
  EXPECT_EQ(resolver.num_workers(), 4);
}

TEST_F(ClusterEnvironment, TpuArgumentComesBeforeTheVariables) {
  Set("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "grpc://10.0.0.9:8470");
  TPUClusterResolver resolver("grpc://10.1.2.3:8470");
  EXPECT_EQ(resolver.master(), "grpc://10.1.2.3:8470");
  unsetenv("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS");
  Set("TPU_NAME", "grpc://10.0.0.7");
  TPUClusterResolver from_name_variable;
  // A port left out is Cloud TPU's 8470.
  EXPECT_EQ(from_name_variable.master(), "grpc://10.0.0.7:8470");
  EXPECT_EQ(from_name_variable.source(), "TPU_NAME");
}

TEST_F(ClusterEnvironment, TpuOverrideTaskTypeAndIndexAndGetMaster) {
  TPUClusterResolver resolver(
      "grpc://10.2.3.4:8470,grpc://10.2.3.5:8470,grpc://10.2.3.6:8470,grpc://10.2.3.7:8470");
  EXPECT_EQ(resolver.master(), "grpc://10.2.3.4:8470");
  resolver.SetTask("worker", 3);
  EXPECT_EQ(resolver.master(), "grpc://10.2.3.7:8470");
  EXPECT_EQ(resolver.master("worker", 1), "grpc://10.2.3.5:8470");
  EXPECT_NE(ResolverError([&] { resolver.master("worker", 4); }).find("no task worker 4"),
            std::string::npos);
  EXPECT_EQ(ResolverError([&] { resolver.SetTask("worker", -1); }),
            "TPUClusterResolver: task_id -1 is negative; task ids count from 0");
}

TEST_F(ClusterEnvironment, TpuLocalHasNoClusterAndNoMaster) {
  Set("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "grpc://10.0.0.9:8470");
  TpuClusterResolverOptions options;
  options.tpu = "local";
  options.coordinator_name = "coordinator";
  options.coordinator_address = "10.128.1.5:10203";
  TPUClusterResolver resolver(options);
  EXPECT_TRUE(resolver.cluster_spec().empty());
  EXPECT_EQ(resolver.master(), "");
  EXPECT_EQ(resolver.tpu(), "local");
  EXPECT_EQ(resolver.task_type(), "worker");
  EXPECT_EQ(resolver.task_id(), 0);
}

TEST_F(ClusterEnvironment, TpuCoordinatorJobBesideTheWorkers) {
  TpuClusterResolverOptions options;
  options.tpu = "grpc://10.1.2.3:8470";
  options.coordinator_name = "coordinator";
  options.coordinator_address = "10.128.1.5:10203";
  TPUClusterResolver resolver(options);
  EXPECT_EQ(resolver.cluster_spec(),
            (ClusterSpec{{"coordinator", {"10.128.1.5:10203"}}, {"worker", {"10.1.2.3:8470"}}}));
  EXPECT_EQ(resolver.master(), "grpc://10.1.2.3:8470");
  options.coordinator_address.reset();
  EXPECT_EQ(ResolverError([&] { TPUClusterResolver unused(options); }),
            "TPUClusterResolver: coordinator_name 'coordinator' needs a coordinator_address "
            "(host:port): chorus starts no coordinator server");
}

TEST_F(ClusterEnvironment, TpuJobNameNamesTheWorkersJob) {
  TpuClusterResolverOptions options;
  options.tpu = "grpc://10.1.2.3:8470,grpc://10.1.2.4:8470";
  options.job_name = "tpu_worker";
  TPUClusterResolver resolver(options);
  EXPECT_EQ(resolver.job_name(), "tpu_worker");
  EXPECT_EQ(resolver.cluster_spec(),
            (ClusterSpec{{"tpu_worker", {"10.1.2.3:8470", "10.1.2.4:8470"}}}));
  EXPECT_EQ(resolver.master(), "grpc://10.1.2.3:8470");
}

TEST_F(ClusterEnvironment, TpuVmVariablesGiveTheHostsAndThisTask) {
  Set("TPU_NAME", "my-v4-32");
  Set("TPU_WORKER_HOSTNAMES", "t1v-n-0,t1v-n-1,t1v-n-2,t1v-n-3");
  Set("TPU_WORKER_ID", "2");
  TPUClusterResolver resolver;
  EXPECT_EQ(resolver.tpu(), "my-v4-32");
  EXPECT_EQ(resolver.source(), "TPU_WORKER_HOSTNAMES");
  EXPECT_EQ(
      resolver.cluster_spec(),
      (ClusterSpec{{"worker", {"t1v-n-0:8470", "t1v-n-1:8470", "t1v-n-2:8470", "t1v-n-3:8470"}}}));
  EXPECT_EQ(resolver.task_id(), 2);
  EXPECT_EQ(resolver.master(), "grpc://t1v-n-2:8470");
  EXPECT_EQ(resolver.id_in_cluster(), 2);

  unsetenv("TPU_NAME");  // the hosts alone are enough
  EXPECT_EQ(TPUClusterResolver().num_workers(), 4);

  Set("TPU_WORKER_ID", "4");
  EXPECT_EQ(ResolverError([] { TPUClusterResolver unused; }),
            "TPU_WORKER_ID='4' is not an integer in [0, 3], which TPUClusterResolver needs; fix "
            "the launcher's variable or unset it");
}

TEST_F(ClusterEnvironment, TpuWithoutAnyTpuNamesTheWaysToGiveOne) {
  EXPECT_EQ(ResolverError([] { TPUClusterResolver unused; }),
            "TPUClusterResolver: no TPU given: pass the tpu argument (\"local\", or "
            "\"grpc://host:port,...\"), or set KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS, TPU_NAME or "
            "TPU_WORKER_HOSTNAMES (with TPU_WORKER_ID)");
  // An empty argument is no argument, as TensorFlow's `if tpu:`.
  EXPECT_NE(ResolverError([] { TPUClusterResolver unused(""); }).find("no TPU given"),
            std::string::npos);
}

TEST_F(ClusterEnvironment, TpuCloudNameSaysChorusDoesNotCallTheCloudApi) {
  const std::string message = ResolverError([] { TPUClusterResolver unused("mytpu"); });
  EXPECT_TRUE(Contains(message, "TPU 'mytpu' (from the tpu argument) is a Cloud TPU name"))
      << message;
  EXPECT_TRUE(Contains(message, "TPU_WORKER_HOSTNAMES")) << message;
  // As TensorFlow's testShouldResolveGrpcPrefix: "grpctpu" is a name, not an address.
  Set("TPU_NAME", "grpctpu");
  EXPECT_TRUE(Contains(ResolverError([] { TPUClusterResolver unused; }),
                       "TPU 'grpctpu' (from TPU_NAME) is a Cloud TPU name"));
}

TEST_F(ClusterEnvironment, TpuBadAddressesAreNamed) {
  EXPECT_EQ(ResolverError([] { TPUClusterResolver unused("grpc://10.1.2.3:http"); }),
            "TPUClusterResolver: worker address '10.1.2.3:http' from the tpu argument has a port "
            "'http' that is not a number; give each worker as grpc://host:port (port 8470 when "
            "left out)");
  EXPECT_EQ(
      ResolverError([] { TPUClusterResolver unused("grpc://10.1.2.3:8470,grpc://10.1.2.3"); }),
      "TPUClusterResolver: worker address '10.1.2.3:8470' is listed twice in the tpu argument; "
      "list each TPU worker once");
}

TEST(TpuDevices, GetDeviceDictAndCoresWithTpus) {
  const Details details = TPUClusterResolver::GetDeviceDictAndCores({
      "/job:tpu_worker/task:0/device:TPU:0",
      "/job:tpu_worker/task:1/device:TPU:1",
      "/job:tpu_worker/task:2/device:TPU:0",
      "/job:tpu_worker/task:3/device:TPU:1",
      "/job:tpu_worker/task:0/device:TPU:4",
      "/job:tpu_worker/task:1/device:TPU:5",
      "/job:tpu_worker/task:2/device:TPU:4",
      "/job:tpu_worker/task:3/device:TPU:5",
  });
  EXPECT_EQ(details.total_cores, 8);
  EXPECT_EQ(details.device_map,
            (std::map<int, std::vector<int>>{{0, {0, 4}}, {1, {1, 5}}, {2, {0, 4}}, {3, {1, 5}}}));
}

TEST(TpuDevices, GetDeviceDictAndCoresWithCpusAndGpus) {
  const Details details = TPUClusterResolver::GetDeviceDictAndCores({
      "/job:tpu_worker/task:0/device:CPU:0",
      "/job:tpu_worker/task:1/device:CPU:0",
      "/job:tpu_worker/task:0/device:GPU:1",
      "/job:tpu_worker/task:1/device:GPU:1",
  });
  EXPECT_EQ(details.total_cores, 0);
  EXPECT_TRUE(details.device_map.empty());
}

TEST(TpuDevices, VerifySameCoreCount) {
  EXPECT_EQ(TPUClusterResolver::VerifyAndReturnSameCoreCount({{0, {0, 1, 2, 3, 4, 5, 6, 7}}}), 8);
  EXPECT_EQ(TPUClusterResolver::VerifyAndReturnSameCoreCount({{0, {0, 1}}, {1, {2, 3}}}), 2);
  try {
    TPUClusterResolver::VerifyAndReturnSameCoreCount({{0, {0}}, {1, {1, 2}}});
    ADD_FAILURE() << "hosts with 1 and 2 cores were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INTERNAL);
    EXPECT_EQ(std::string(e.what()),
              "TPUClusterResolver: the TPU hosts do not have the same number of cores (host 0: "
              "1, host 1: 2)");
  }
}

TEST_F(ClusterEnvironment, NumAcceleratorsAsTensorFlowAnswersIt) {
  // SimpleClusterResolver: what it was given, else {}.
  SimpleClusterResolver simple({{"worker", {"127.0.0.1:5000", "127.0.0.1:5001"}}}, "worker", 0);
  EXPECT_TRUE(simple.num_accelerators().empty());
  simple.set_num_accelerators({{"GPU", 1}});
  EXPECT_EQ(simple.num_accelerators("worker", 1), (std::map<std::string, int>{{"GPU", 1}}));
  EXPECT_NE(ResolverError([&] { simple.num_accelerators("worker", 2); }).find("no task worker 2"),
            std::string::npos);
  // TF_CONFIG's: this process's accelerators (this build's cpu devices are not counted; with a
  // GPU, its CUDA devices are).
  Set("TF_CONFIG", R"({"cluster": {"worker": ["127.0.0.1:5000", "127.0.0.1:5001"]},)"
                   R"( "task": {"type": "worker", "index": 0}})");
  TFConfigClusterResolver tf_config;
  const std::map<std::string, int> local = tf_config.num_accelerators();
  EXPECT_EQ(local.count("CPU"), 0u);
  EXPECT_EQ(tf_config.num_accelerators("worker", 1), local);
  // TPUClusterResolver: the TPU cores, also when there are none.
  const std::map<std::string, int> tpu = TPUClusterResolver("local").num_accelerators();
  ASSERT_EQ(tpu.size(), 1u);
  EXPECT_EQ(tpu.count("TPU"), 1u);
}

}  // namespace
}  // namespace chorus
