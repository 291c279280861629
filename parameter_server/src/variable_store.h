// What a ps task holds: shards of variables, each with its own lock, and the optimizer that
// updates them (Keras' SGD with momentum or Adam, the same arithmetic as chorus::SGD and
// chorus::Adam, with a step count per shard).
#ifndef CHORUS_PARAMETER_SERVER_SRC_VARIABLE_STORE_H_
#define CHORUS_PARAMETER_SERVER_SRC_VARIABLE_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "parameter_server.pb.h"

namespace chorus::ps_internal {

class VariableStore {
 public:
  // Each throws Error(INVALID_ARGUMENT / NOT_FOUND) naming the shard and the problem.
  void SetOptimizer(const rpc::OptimizerConfig& config);
  void Create(uint64_t id, const std::string& name, const rpc::TensorData& initial);
  void Read(uint64_t id, rpc::TensorData* out) const;
  // The value as it is now, without a copy: writes after this replace the buffer (or copy it
  // first) rather than change what a reader streams.
  std::shared_ptr<const std::string> Snapshot(uint64_t id, rpc::TensorData* dtype_and_shape) const;
  // `value`'s bytes may be taken (an assignment keeps them as the new value); an assignment
  // returns the buffer it replaced when no reader holds it (for reuse), else nullptr.
  std::shared_ptr<std::string> Update(rpc::UpdateRequest::Kind kind, uint64_t id,
                                      rpc::TensorData& value);
  void ReadSlots(uint64_t id, rpc::SlotState* out) const;
  void WriteSlots(const rpc::SlotState& state);

 private:
  struct Shard {
    mutable std::mutex mutex;  // the per-variable lock every write takes
    std::string name;
    int32_t dtype = 0;
    std::vector<int64_t> shape;
    std::shared_ptr<std::string> bytes;  // the value, little-endian elements (shared: Snapshot)
    int64_t step = 0;                    // optimizer updates applied
    std::vector<std::vector<float>> slots;
  };
  Shard& Find(uint64_t id) const;
  void ApplyGradient(Shard& shard, const float* gradient, size_t count);

  mutable std::shared_mutex mutex_;  // guards the map and the optimizer, not the shards
  std::map<uint64_t, std::unique_ptr<Shard>> shards_;
  rpc::OptimizerConfig optimizer_;
  bool has_optimizer_ = false;
};

}  // namespace chorus::ps_internal

#endif  // CHORUS_PARAMETER_SERVER_SRC_VARIABLE_STORE_H_
