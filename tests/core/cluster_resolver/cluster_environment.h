// What the cluster resolvers' tests share: a fixture that unsets every launcher variable (and puts
// them back), the error a resolver throws, and TF_CONFIG's example and address fix.
#ifndef CHORUS_TESTS_CORE_CLUSTER_RESOLVER_CLUSTER_ENVIRONMENT_H_
#define CHORUS_TESTS_CORE_CLUSTER_RESOLVER_CLUSTER_ENVIRONMENT_H_

#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_resolver.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace chorus {

inline const char* const kLauncherVariables[] = {"TF_CONFIG",
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
                                                 "SLURM_STEP_TASKS_PER_NODE",
                                                 "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS",
                                                 "TPU_NAME",
                                                 "TPU_WORKER_HOSTNAMES",
                                                 "TPU_WORKER_ID"};

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

inline std::string ParseError(const std::string& tf_config) {
  return ResolverError([&] { TFConfigClusterResolver::Parse(tf_config); });
}

inline bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline const std::string kExample =
    "e.g. {\"cluster\": {\"worker\": [\"host1:2222\", \"host2:2222\"]}, \"task\": {\"type\": "
    "\"worker\", \"index\": 0}}";
inline const std::string kAddressFix =
    "; write every address as \"host:port\" with a port in 1..65535, e.g. \"localhost:2222\" or "
    "\"[::1]:2222\"";

// --- TF_CONFIG: malformed -------------------------------------------------------------------

}  // namespace chorus

#endif  // CHORUS_TESTS_CORE_CLUSTER_RESOLVER_CLUSTER_ENVIRONMENT_H_
