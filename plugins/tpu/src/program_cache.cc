#include "program_cache.h"

#include <chorus/plugin_sdk.hpp>

namespace chorus::tpu {

std::shared_ptr<const PjrtExecutable> ProgramCache::Get(const PjrtClient& client,
                                                        const std::string& mlir, int num_replicas,
                                                        bool portable,
                                                        const std::vector<int64_t>& device_ids) {
  std::string key = std::to_string(num_replicas) + (portable ? " portable" : "") + " on";
  for (int64_t id : device_ids) key += " " + std::to_string(id);
  key += "\n" + mlir;
  std::lock_guard lock(mutex_);
  auto found = programs_.find(key);
  if (found != programs_.end()) return found->second;
  if (programs_.size() >= kCapacity) {
    sdk::Log(CHORUS_LOG_DEBUG,
             "tpu: the program cache holds " + std::to_string(kCapacity) + " programs; emptied");
    programs_.clear();
  }
  std::shared_ptr<const PjrtExecutable> executable =
      client.Compile(mlir, num_replicas, portable, device_ids);
  ++compiled_;
  sdk::Log(CHORUS_LOG_DEBUG, "tpu: compiled program " + std::to_string(compiled_) + " (" +
                                 std::to_string(num_replicas) + " replicas, " +
                                 std::to_string(mlir.size()) + " bytes of StableHLO)");
  programs_.emplace(key, executable);
  return executable;
}

}  // namespace chorus::tpu
