#include "tensor_args.h"

#include <c10/util/Exception.h>

namespace chorus::torch_backend {

chorus_dtype DtypeOf(const at::Tensor& tensor, const std::string& op) {
  switch (tensor.scalar_type()) {
    case at::kFloat:
      return CHORUS_F32;
    case at::kDouble:
      return CHORUS_F64;
    case at::kHalf:
      return CHORUS_F16;
    case at::kBFloat16:
      return CHORUS_BF16;
    case at::kInt:
      return CHORUS_I32;
    case at::kLong:
      return CHORUS_I64;
    case at::kByte:
      return CHORUS_U8;
    case at::kChar:
      return CHORUS_I8;
    default:
      break;
  }
  TORCH_CHECK(false, "chorus: ", op, ": dtype ", tensor.scalar_type(),
              " is not supported (chorus reduces float32, float64, float16, bfloat16, int32, "
              "int64, uint8 and int8)");
}

void CheckDense(const at::Tensor& tensor, const std::string& op, const std::string& what) {
  TORCH_CHECK(tensor.defined(), "chorus: ", op, ": the ", what, " tensor is undefined");
  TORCH_CHECK(tensor.layout() == at::kStrided, "chorus: ", op, ": the ", what,
              " tensor is not dense (layout ", tensor.layout(), "); chorus takes dense tensors");
  TORCH_CHECK(tensor.device().is_cpu(), "chorus: ", op, ": the ", what, " tensor is on ",
              tensor.device(), "; this version of chorus_torch takes CPU tensors only");
  TORCH_CHECK(tensor.is_contiguous(), "chorus: ", op, ": the ", what,
              " tensor is not contiguous; call .contiguous() first");
}

at::Tensor& OnlyTensor(std::vector<at::Tensor>& tensors, const std::string& op,
                       const std::string& what) {
  TORCH_CHECK(tensors.size() == 1, "chorus: ", op, " takes one ", what, " tensor per process (got ",
              tensors.size(), ")");
  return tensors[0];
}

void CheckLike(const at::Tensor& tensor, at::ScalarType dtype, int64_t numel, const std::string& op,
               const std::string& what) {
  TORCH_CHECK(tensor.scalar_type() == dtype, "chorus: ", op, ": the ", what, " tensor is ",
              tensor.scalar_type(), " but the input is ", dtype);
  TORCH_CHECK(tensor.numel() == numel, "chorus: ", op, ": the ", what, " tensor has ",
              tensor.numel(), " elements; expected ", numel);
}

std::string ReduceOpName(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return "ReduceOp.SUM";
    case c10d::ReduceOp::AVG:
      return "ReduceOp.AVG";
    case c10d::ReduceOp::PRODUCT:
      return "ReduceOp.PRODUCT";
    case c10d::ReduceOp::MIN:
      return "ReduceOp.MIN";
    case c10d::ReduceOp::MAX:
      return "ReduceOp.MAX";
    case c10d::ReduceOp::BAND:
      return "ReduceOp.BAND";
    case c10d::ReduceOp::BOR:
      return "ReduceOp.BOR";
    case c10d::ReduceOp::BXOR:
      return "ReduceOp.BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "ReduceOp.PREMUL_SUM";
    default:
      break;
  }
  return "ReduceOp " + std::to_string(static_cast<int>(op.op_));
}

chorus_reduce_op ReduceOpOf(const c10d::ReduceOp& op, const std::string& name) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return CHORUS_REDUCE_SUM;
    case c10d::ReduceOp::AVG:
      return CHORUS_REDUCE_MEAN;
    case c10d::ReduceOp::PRODUCT:
      return CHORUS_REDUCE_PROD;
    case c10d::ReduceOp::MIN:
      return CHORUS_REDUCE_MIN;
    case c10d::ReduceOp::MAX:
      return CHORUS_REDUCE_MAX;
    default:
      break;
  }
  TORCH_CHECK(false, "chorus: ", name, ": ", ReduceOpName(op),
              " is not supported (chorus reduces with SUM, PRODUCT, MIN, MAX and AVG)");
}

}  // namespace chorus::torch_backend
