// Private to the core's training code (the optimizers, fit's gradient shards): an f32 tensor's
// elements as a host array. On a host-memory device it is the tensor's own storage; elsewhere a
// host copy that Commit() writes back.
#ifndef CHORUS_CORE_SRC_OPTIMIZER_HOST_VIEW_H_
#define CHORUS_CORE_SRC_OPTIMIZER_HOST_VIEW_H_

#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <chorus/runtime/tensor.h>

#include <string>
#include <vector>

namespace chorus::internal {

class HostFloats {
 public:
  explicit HostFloats(const Tensor& tensor) : tensor_(tensor) {
    if (tensor.dtype() != CHORUS_F32) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  std::string("optimizers update f32 tensors; got ") + DtypeName(tensor.dtype()));
    }
    if (tensor.host_accessible()) {
      data_ = tensor.data<float>();
    } else {
      copy_ = tensor.ToVector();
      data_ = copy_.data();
    }
  }
  HostFloats(const HostFloats&) = delete;
  HostFloats& operator=(const HostFloats&) = delete;

  float* data() const { return data_; }
  float& operator[](size_t i) const { return data_[i]; }
  // Hoist it out of loops: it is a call the compiler cannot inline, and it keeps the loop from
  // vectorizing.
  size_t size() const { return static_cast<size_t>(tensor_.num_elements()); }

  // Writes a host copy back to the device (nothing to do for host memory).
  void Commit() const {
    if (tensor_.host_accessible()) return;
    tensor_.Assign(Tensor::FromVector(tensor_.device(), tensor_.shape(), copy_));
  }

 private:
  Tensor tensor_;
  std::vector<float> copy_;
  float* data_ = nullptr;
};

}  // namespace chorus::internal

#endif  // CHORUS_CORE_SRC_OPTIMIZER_HOST_VIEW_H_
