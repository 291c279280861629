// Tensor: a dense array of one dtype and shape, stored on one device. Tensors share storage when
// copied (like tf.Tensor handles); Clone() makes a deep copy. Host code reads and writes a
// tensor's elements directly only when its device's memory is host memory (the cpu platform);
// elsewhere ToHost()/CopyTo() move it.
#ifndef CHORUS_TENSOR_H_
#define CHORUS_TENSOR_H_

#include <chorus/runtime/device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chorus {

using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
std::string ShapeString(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled storage on `device`.
  Tensor(Device device, chorus_dtype dtype, Shape shape);

  // Storage whose contents are unspecified, for a caller that writes every byte before reading
  // (it saves the zero fill of a buffer about to be overwritten).
  static Tensor Uninitialized(Device device, chorus_dtype dtype, Shape shape);
  static Tensor FromVector(Device device, Shape shape, const std::vector<float>& values);

  bool defined() const { return storage_ != nullptr; }
  const Device& device() const;
  chorus_dtype dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t num_elements() const { return NumElements(shape_); }
  size_t bytes() const { return static_cast<size_t>(num_elements()) * chorus_dtype_size(dtype_); }
  int64_t dim(size_t axis) const;

  // The device address and the ABI's view of it.
  void* raw() const;
  chorus_buffer buffer() const { return chorus_buffer{device().index, raw()}; }

  // Whether data<T>() may be used: the device's memory is host memory.
  bool host_accessible() const;
  // Typed host pointer; throws unless host_accessible() and T matches the dtype.
  template <typename T>
  T* data() const;

  // Copies to host memory (works on every device).
  std::vector<float> ToVector() const;
  // Byte copies to and from host memory of bytes() bytes, any dtype, any device.
  void CopyToHost(void* dst) const;
  void CopyFromHost(const void* src) const;
  Tensor CopyTo(const Device& device) const;
  Tensor Clone() const { return CopyTo(device()); }
  // Copies `other`'s elements into this tensor's storage (same dtype and element count).
  void Assign(const Tensor& other) const;
  // Same storage, another shape of the same element count.
  Tensor Reshaped(Shape shape) const;
  // Same storage: the NumElements(shape) elements from `first_element` on, as a tensor of
  // `shape` (a view; writes through either show in both).
  Tensor View(int64_t first_element, Shape shape) const;

 private:
  void RequireHostAccess(chorus_dtype wanted) const;
  void Allocate(Device device);

  std::shared_ptr<DeviceBuffer> storage_;
  size_t offset_ = 0;  // bytes into storage_ where this tensor's elements start (View)
  chorus_dtype dtype_ = CHORUS_F32;
  Shape shape_;
};

template <>
float* Tensor::data<float>() const;
template <>
double* Tensor::data<double>() const;
template <>
int32_t* Tensor::data<int32_t>() const;
template <>
int64_t* Tensor::data<int64_t>() const;
template <>
uint8_t* Tensor::data<uint8_t>() const;

}  // namespace chorus

#endif  // CHORUS_TENSOR_H_
