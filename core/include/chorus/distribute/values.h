// Distributed values: PerReplica (one value per replica, different) and Mirrored (one value per
// replica, kept identical). Both hold tensors in replica order on the replicas' devices.
#ifndef CHORUS_VALUES_H_
#define CHORUS_VALUES_H_

#include <chorus/runtime/tensor.h>

#include <vector>

namespace chorus {

class PerReplica {
 public:
  PerReplica() = default;
  explicit PerReplica(std::vector<Tensor> values, bool mirrored = false)
      : values_(std::move(values)), mirrored_(mirrored) {}

  size_t size() const { return values_.size(); }
  const Tensor& operator[](size_t replica) const { return values_.at(replica); }
  const std::vector<Tensor>& values() const { return values_; }
  // True for a Mirrored value (every component holds the same data).
  bool mirrored() const { return mirrored_; }

 private:
  std::vector<Tensor> values_;
  bool mirrored_ = false;
};

// A Mirrored value: the same tensor on every replica device.
inline PerReplica Mirrored(std::vector<Tensor> values) {
  return PerReplica(std::move(values), true);
}

}  // namespace chorus

#endif  // CHORUS_VALUES_H_
