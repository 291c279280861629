// TPUClusterResolver, as tf.distribute.cluster_resolver.TPUClusterResolver: where the TPU
// workers of a job are, from the `tpu` argument or the variables Cloud TPU sets.
#ifndef CHORUS_TPU_CLUSTER_RESOLVER_H_
#define CHORUS_TPU_CLUSTER_RESOLVER_H_

#include <chorus/cluster_resolver/cluster_resolver.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace chorus {

// Which TPU the resolver is for, as TensorFlow's constructor arguments.
struct TpuClusterResolverOptions {
  // "local" (the chips are attached to this host: an empty cluster spec and master ""), a list of
  // worker addresses "grpc://host[:port],grpc://host[:port],..." (port 8470 when left out), or a
  // Cloud TPU name. Unset: KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS, else TPU_NAME.
  std::optional<std::string> tpu;
  // The job the TPU workers form.
  std::string job_name = "worker";
  // A coordinator job of one task added to the cluster spec when both are set.
  std::optional<std::string> coordinator_name;
  std::optional<std::string> coordinator_address;
};

// The cluster:
//  - "local": an empty cluster spec, master() "", task (job_name, 0);
//  - "grpc://..." addresses: job_name's tasks in the order given, this task job_name 0 (as
//    TensorFlow; SetTask picks another), master() "grpc://<this task's address>";
//  - a name: Cloud TPU's API and the GCE metadata server would look it up; chorus does not call
//    them. On a TPU VM, TPU_WORKER_HOSTNAMES (comma-separated hosts, port 8470) and
//    TPU_WORKER_ID (this host's index, default 0) give the workers and this task instead;
//    without them the constructor throws Error(INVALID_ARGUMENT) saying what to set.
// No tpu argument and none of KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS, TPU_NAME and
// TPU_WORKER_HOSTNAMES: Error(INVALID_ARGUMENT) naming them. rpc_layer() is "grpc".
class TPUClusterResolver : public ClusterResolver {
 public:
  // From the environment (TensorFlow's TPUClusterResolver()).
  TPUClusterResolver();
  explicit TPUClusterResolver(const TpuClusterResolverOptions& options);
  explicit TPUClusterResolver(const std::string& tpu);

  const ClusterSpec& cluster_spec() const override { return spec_; }
  const std::string& task_type() const override { return task_type_; }
  int task_id() const override { return task_id_; }
  std::string rpc_layer() const override { return "grpc"; }
  std::string name() const override { return "TPUClusterResolver"; }

  // "local", or the tpu argument or variable as given.
  const std::string& tpu() const { return tpu_; }
  // Where the workers came from: "local", "argument", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS",
  // "TPU_NAME" or "TPU_WORKER_HOSTNAMES".
  const std::string& source() const { return source_; }
  // As TensorFlow's get_job_name(): the task type.
  const std::string& job_name() const { return task_type_; }
  // As TensorFlow's task_type/task_id setters. Throws Error(INVALID_ARGUMENT) for a negative id.
  void SetTask(std::string task_type, int task_id);

  // As TensorFlow's: the accelerator cores per worker, {"TPU": n}, also when n is 0. n is this
  // process's TPU devices (from its device enumerators): chorus does not see other hosts'.
  std::map<std::string, int> num_accelerators(
      const std::optional<std::string>& task_type = std::nullopt,
      std::optional<int> task_id = std::nullopt) const override;

  // TensorFlow's device bookkeeping of a TPU system: the TPU cores per host of device names
  // "/job:<job>/task:<host>/device:TPU:<core>" (other names are skipped), and their total.
  struct DeviceDetails {
    std::map<int, std::vector<int>> device_map;  // host -> its cores, in the order given
    int total_cores = 0;
  };
  static DeviceDetails GetDeviceDictAndCores(const std::vector<std::string>& device_names);
  // The number of cores every host has; throws Error(INTERNAL) when hosts differ, naming them.
  static int VerifyAndReturnSameCoreCount(const std::map<int, std::vector<int>>& device_map);

 protected:
  bool runs_alone() const override { return tpu_ == "local"; }

 private:
  ClusterSpec spec_;
  std::string task_type_;
  int task_id_ = 0;
  std::string tpu_;
  std::string source_;
};

}  // namespace chorus

#endif  // CHORUS_TPU_CLUSTER_RESOLVER_H_
