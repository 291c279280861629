#include <chorus/base/error.h>
#include <chorus/distribute/dataset.h>

#include <string>

namespace chorus {

InputContext::InputContext(int num_input_pipelines, int input_pipeline_id, int num_replicas_in_sync)
    : num_input_pipelines_(num_input_pipelines),
      input_pipeline_id_(input_pipeline_id),
      num_replicas_in_sync_(num_replicas_in_sync) {
  if (num_input_pipelines < 1 || num_replicas_in_sync < 1) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "InputContext: num_input_pipelines (" + std::to_string(num_input_pipelines) +
                    ") and num_replicas_in_sync (" + std::to_string(num_replicas_in_sync) +
                    ") must be at least 1");
  }
  if (input_pipeline_id < 0 || input_pipeline_id >= num_input_pipelines) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "InputContext: input_pipeline_id " + std::to_string(input_pipeline_id) +
                    " is out of range for " + std::to_string(num_input_pipelines) +
                    " input pipelines; use 0.." + std::to_string(num_input_pipelines - 1));
  }
}

int64_t InputContext::get_per_replica_batch_size(int64_t global_batch_size) const {
  const std::string replicas = std::to_string(num_replicas_in_sync_);
  if (global_batch_size < 0) {
    throw Error(CHORUS_INVALID_ARGUMENT, "The `global_batch_size` " +
                                             std::to_string(global_batch_size) +
                                             " is negative; use a multiple of " + replicas);
  }
  if (global_batch_size % num_replicas_in_sync_ != 0) {
    throw Error(CHORUS_INVALID_ARGUMENT, "The `global_batch_size` " +
                                             std::to_string(global_batch_size) +
                                             " is not divisible by `num_replicas_in_sync` " +
                                             replicas + "; use a multiple of " + replicas);
  }
  return global_batch_size / num_replicas_in_sync_;
}

}  // namespace chorus
