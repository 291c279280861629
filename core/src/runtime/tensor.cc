#include <chorus/base/dtype.h>
#include <chorus/base/error.h>
#include <chorus/runtime/tensor.h>

#include <cstring>
#include <numeric>

namespace chorus {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw Error(CHORUS_INVALID_ARGUMENT, "negative dimension in shape " + ShapeString(shape));
    n *= d;
  }
  return n;
}

std::string ShapeString(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

Tensor::Tensor(Device device, chorus_dtype dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  Allocate(std::move(device));
  if (bytes() == 0) return;
  // Host memory is zeroed in place: a zero-filled staging copy doubled the cost of allocating
  // (75 ms instead of 35 for 64 MiB here, most of it first-touch page faults).
  if (host_accessible()) {
    std::memset(raw(), 0, bytes());
    return;
  }
  std::vector<char> zeros(bytes(), 0);
  CopyFromHost(zeros.data());
}

void Tensor::Allocate(Device device) {
  if (chorus_dtype_size(dtype_) == 0) {
    throw Error(CHORUS_INVALID_ARGUMENT, "tensor: unknown dtype " + std::to_string(dtype_));
  }
  storage_ = std::make_shared<DeviceBuffer>(std::move(device), bytes());
}

Tensor Tensor::Uninitialized(Device device, chorus_dtype dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.Allocate(std::move(device));
  return t;
}

Tensor Tensor::FromVector(Device device, Shape shape, const std::vector<float>& values) {
  Tensor t = Uninitialized(std::move(device), CHORUS_F32, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.num_elements()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "tensor of shape " + ShapeString(t.shape()) + " needs " +
                                             std::to_string(t.num_elements()) + " values, got " +
                                             std::to_string(values.size()));
  }
  if (!values.empty()) t.CopyFromHost(values.data());
  return t;
}

const Device& Tensor::device() const {
  if (!storage_) throw Error(CHORUS_INVALID_ARGUMENT, "use of an undefined tensor");
  return storage_->device();
}

int64_t Tensor::dim(size_t axis) const {
  if (axis >= shape_.size()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "axis " + std::to_string(axis) +
                                             " is out of range for shape " + ShapeString(shape_));
  }
  return shape_[axis];
}

void* Tensor::raw() const {
  if (!storage_) throw Error(CHORUS_INVALID_ARGUMENT, "use of an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_;
}

bool Tensor::host_accessible() const {
  return storage_ && device().info().kind == CHORUS_DEVICE_CPU;
}

void Tensor::RequireHostAccess(chorus_dtype wanted) const {
  if (!host_accessible()) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "tensor on " + (storage_ ? device().name() : std::string("(undefined)")) +
                    " is not in host memory; use ToVector() or CopyTo() a cpu device");
  }
  if (wanted != dtype_) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                std::string("tensor is ") + DtypeName(dtype_) + ", read as " + DtypeName(wanted));
  }
}

#define CHORUS_TENSOR_DATA(T, DTYPE) \
  template <>                        \
  T* Tensor::data<T>() const {       \
    RequireHostAccess(DTYPE);        \
    return static_cast<T*>(raw());   \
  }
CHORUS_TENSOR_DATA(float, CHORUS_F32)
CHORUS_TENSOR_DATA(double, CHORUS_F64)
CHORUS_TENSOR_DATA(int32_t, CHORUS_I32)
CHORUS_TENSOR_DATA(int64_t, CHORUS_I64)
CHORUS_TENSOR_DATA(uint8_t, CHORUS_U8)
#undef CHORUS_TENSOR_DATA

std::vector<float> Tensor::ToVector() const {
  if (dtype_ != CHORUS_F32) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                std::string("ToVector reads f32 tensors; this one is ") + DtypeName(dtype_));
  }
  std::vector<float> out(static_cast<size_t>(num_elements()));
  if (!out.empty()) CopyToHost(out.data());
  return out;
}

Tensor Tensor::CopyTo(const Device& target) const {
  Tensor out = Uninitialized(target, dtype_, shape_);
  if (bytes() > 0) {
    // Through host memory when the two devices belong to different enumerators.
    if (target.enumerator == device().enumerator) {
      target.enumerator->Copy(target.index, out.raw(), device().index, raw(), bytes());
    } else {
      std::vector<char> staging(bytes());
      CopyToHost(staging.data());
      out.CopyFromHost(staging.data());
    }
  }
  return out;
}

void Tensor::Assign(const Tensor& other) const {
  if (other.dtype_ != dtype_ || other.num_elements() != num_elements()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "assign of a " + std::string(DtypeName(other.dtype_)) +
                                             ShapeString(other.shape_) + " tensor to a " +
                                             DtypeName(dtype_) + ShapeString(shape_) + " one");
  }
  if (bytes() == 0 || other.raw() == raw()) return;
  if (other.device().enumerator == device().enumerator) {
    device().enumerator->Copy(device().index, raw(), other.device().index, other.raw(), bytes());
  } else {
    std::vector<char> staging(bytes());
    other.CopyToHost(staging.data());
    CopyFromHost(staging.data());
  }
}

Tensor Tensor::Reshaped(Shape shape) const {
  if (NumElements(shape) != num_elements()) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "cannot reshape " + ShapeString(shape_) + " to " + ShapeString(shape));
  }
  Tensor out = *this;
  out.shape_ = std::move(shape);
  return out;
}

Tensor Tensor::View(int64_t first_element, Shape shape) const {
  const int64_t count = NumElements(shape);
  if (first_element < 0 || first_element > num_elements() ||
      count > num_elements() - first_element) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "cannot view " + std::to_string(count) + " elements from element " +
                    std::to_string(first_element) + " of a tensor of " + ShapeString(shape_));
  }
  Tensor out = *this;
  out.offset_ += static_cast<size_t>(first_element) * chorus_dtype_size(dtype_);
  out.shape_ = std::move(shape);
  return out;
}

void Tensor::CopyToHost(void* dst) const {
  if (bytes() > 0) storage_->CopyToHost(dst, bytes(), offset_);
}

void Tensor::CopyFromHost(const void* src) const {
  if (bytes() > 0) storage_->CopyFromHost(src, bytes(), offset_);
}

}  // namespace chorus
