// What chorus accepts from torch: dense contiguous CPU tensors of the dtypes chorus reduces, and
// the reduce ops it has. Each check throws c10::Error ("chorus: <op>: <why>") on the caller's
// thread, before anything is queued, so that a bad call never reaches the other ranks.
#ifndef CHORUS_BINDINGS_PYTORCH_TENSOR_ARGS_H_
#define CHORUS_BINDINGS_PYTORCH_TENSOR_ARGS_H_

#include <ATen/ATen.h>
#include <chorus/plugin.h>

#include <string>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <vector>

namespace chorus::torch_backend {

// The chorus dtype of `tensor`'s scalar type; throws naming the dtype when chorus has none.
chorus_dtype DtypeOf(const at::Tensor& tensor, const std::string& op);
// Throws unless `tensor` is a dense (strided), contiguous CPU tensor. `what` names it in the
// message ("input", "output 2").
void CheckDense(const at::Tensor& tensor, const std::string& op, const std::string& what);
// The tensor of a list that must hold exactly one.
at::Tensor& OnlyTensor(std::vector<at::Tensor>& tensors, const std::string& op,
                       const std::string& what);
// Throws unless `tensor` has `dtype`'s scalar type and `numel` elements.
void CheckLike(const at::Tensor& tensor, at::ScalarType dtype, int64_t numel, const std::string& op,
               const std::string& what);
// SUM, PRODUCT, MIN, MAX and AVG (chorus's MEAN: the sum divided by the group's size; integers
// truncate toward zero); throws naming any other.
chorus_reduce_op ReduceOpOf(const c10d::ReduceOp& op, const std::string& name);
// "ReduceOp.BAND"
std::string ReduceOpName(const c10d::ReduceOp& op);

}  // namespace chorus::torch_backend

#endif  // CHORUS_BINDINGS_PYTORCH_TENSOR_ARGS_H_
