// UnionClusterResolver: several resolvers' clusters as one, the first one's task.
#include <chorus/base/error.h>
#include <chorus/cluster_resolver/cluster_resolver.h>

#include <utility>

#include "cluster_resolver/cluster_resolver_internal.h"

namespace chorus {

using cluster_internal::Fail;

UnionClusterResolver::UnionClusterResolver(
    std::vector<std::shared_ptr<const ClusterResolver>> resolvers, TaskOverrides overrides)
    : resolvers_(std::move(resolvers)), overrides_(std::move(overrides)) {
  if (resolvers_.empty()) {
    Fail("UnionClusterResolver needs at least one ClusterResolver; pass the resolvers to unite");
  }
  for (size_t i = 0; i < resolvers_.size(); ++i) {
    if (!resolvers_[i]) {
      Fail("UnionClusterResolver: resolver " + std::to_string(i) +
           " is null; pass a ClusterResolver in its place");
    }
    for (const auto& [job, addresses] : resolvers_[i]->cluster_spec()) {
      std::vector<std::string>& tasks = spec_[job];
      tasks.insert(tasks.end(), addresses.begin(), addresses.end());
    }
  }
  if (overrides_.task_id && *overrides_.task_id < 0) {
    Fail("UnionClusterResolver: task_id " + std::to_string(*overrides_.task_id) +
         " is negative; task ids count from 0");
  }
}

const std::string& UnionClusterResolver::task_type() const {
  return overrides_.task_type ? *overrides_.task_type : resolvers_.front()->task_type();
}

int UnionClusterResolver::task_id() const {
  return overrides_.task_id ? *overrides_.task_id : resolvers_.front()->task_id();
}

std::string UnionClusterResolver::rpc_layer() const {
  return overrides_.rpc_layer ? *overrides_.rpc_layer : resolvers_.front()->rpc_layer();
}

std::string UnionClusterResolver::master(const std::optional<std::string>& task_type,
                                         std::optional<int> task_id,
                                         const std::string& rpc_layer) const {
  if (task_type && task_id) return ClusterResolver::master(task_type, task_id, rpc_layer);
  return resolvers_.front()->master(std::nullopt, std::nullopt, rpc_layer);
}

std::map<std::string, int> UnionClusterResolver::num_accelerators(
    const std::optional<std::string>& task_type, std::optional<int> task_id) const {
  return resolvers_.front()->num_accelerators(task_type, task_id);
}

}  // namespace chorus
