// The reference PJRT plugin's "compiler": it reads StableHLO programs (MLIR text in the generic
// form, one op per line) such as those chorus's tpu plugin emits (stablehlo_programs.h) and a
// user's training step, and runs them on host bytes. It is not a StableHLO implementation; it
// knows this subset, and refuses anything else naming the line:
//
//   - one module (`module @name attributes {mhlo.num_replicas = N : i32,
//     mhlo.num_partitions = 1 : i32} {`) of functions: exactly one `func.func public @main`, any
//     number of `func.func private @name`, defined in any order, each `(%name: tensor<T>, ...)`
//     with results `-> (tensor<T>, ...)` or `-> tensor<T>`; @main's arguments may carry
//     `{tf.aliasing_output = N : i32}`. Names are letters, digits and `_`;
//   - tensors of any rank (`tensor<f32>` is a scalar) of f64, f32, f16, bf16, i64, i32, i8, ui8
//     (i16, ui16, ui32 and ui64 only through reshape, bitcast_convert and the collectives);
//   - func.call (`%r:N = "func.call"(...) {callee = @f}`, its results used as %r#0 ... ; no
//     recursion) and func.return;
//   - reshape and bitcast_convert (any ranks of the same byte count; neither moves bytes);
//   - the element-wise add, subtract, multiply, minimum, maximum and divide;
//   - exponential, log, negate, sqrt, rsqrt, tanh, abs on floats (negate also on integers, abs
//     on signed ones);
//   - a scalar constant, broadcast_in_dim (operand dimension i to result dimension
//     broadcast_dimensions[i], of the same size or 1);
//   - reduce of one operand and one init value over any of its dimensions, all_reduce, and
//     reduce_scatter (of one operand of rank >= 1 along any scatter_dimension whose size the
//     group's size divides; the result that dimension divided by it), each with one combiner
//     region (add, multiply, minimum or maximum of the block's two arguments, in order);
//   - dot_general of two rank-2 f32 or f64 operands contracting one dimension each, with no
//     batching dimensions (result: lhs's free dimension, then rhs's);
//   - all_gather (dimension 0) and collective_broadcast. A collective's replica_groups are one
//     group (`dense<[[0, 1]]> : tensor<1x2xi64>`), or none (`dense<> : tensor<0x0xi64>`), which
//     is one group of every replica in order (XLA's rule).
//
// Arithmetic follows chorus's host kernels, so that a program's all-reduce gives the bits of
// chorus's host path: values combined in a pairwise tree over the replica group's order
// (((r0 + r1) + (r2 + r3)) + ...), 16-bit floats computed in float and rounded after each op,
// integers wrapping, minimum/maximum as std::min/std::max (XLA's propagate NaN), and division as
// chorus's divide kernel (floats in double, rounded once; integers truncated toward zero).
// reduce_scatter combines exactly as all_reduce (the same tree, the same bits), then gives the
// replica at position k of the group part k of the result along scatter_dimension.
// Unary ops use the <cmath> function of the element type (float for f32, f16 and bf16, double
// for f64); rsqrt is 1 / sqrt. reduce starts each result element from the init value and
// combines the reduced elements into it one at a time (acc = combine(acc, x)) in increasing
// row-major order of the operand. dot_general sums the products in increasing order of the
// contracted index from 0, in the element type (f32 in float, f64 in double).
// A call runs the callee with every replica's values, so that collectives inside it combine
// across the replicas.
#ifndef CHORUS_PLUGINS_TPU_REFERENCE_STABLEHLO_SUBSET_H_
#define CHORUS_PLUGINS_TPU_REFERENCE_STABLEHLO_SUBSET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::pjrt::reference_plugin {

struct TensorType {
  std::string element;        // "f32", "ui8", ...
  std::vector<int64_t> dims;  // empty: a scalar
  size_t elements() const;
  size_t bytes() const;
  bool operator==(const TensorType&) const = default;
};

struct HostTensor {
  TensorType type;
  std::shared_ptr<const std::vector<unsigned char>> bytes;
};

class SubsetProgram {
 public:
  // Throws std::invalid_argument naming the first line it cannot read.
  static std::shared_ptr<const SubsetProgram> Parse(std::string_view mlir);

  int num_replicas() const { return num_replicas_; }
  // @main's.
  const std::vector<TensorType>& argument_types() const { return Main().argument_types; }
  // Per argument of @main: the result it may be donated to (tf.aliasing_output), or -1.
  const std::vector<int>& aliasing() const { return aliasing_; }
  const std::vector<TensorType>& result_types() const { return Main().result_types; }

  // arguments[replica][i], every replica's (num_replicas of them); returns results[replica][j].
  // Throws std::invalid_argument for another count of replicas or arguments, or an argument of
  // another size than its type.
  std::vector<std::vector<HostTensor>> Run(
      const std::vector<std::vector<HostTensor>>& arguments) const;

  struct Instruction {
    std::string op;  // "reshape", "bitcast_convert", "all_reduce", "reduce", "call", ...
    std::vector<size_t> operands;  // value slots of the function
    size_t result = 0;             // the first result's slot; further results take the next ones
    std::vector<TensorType> result_types;
    std::string combiner;    // all_reduce, reduce_scatter, reduce, element-wise, unary: "add", ...
    double constant = 0;     // a constant's value
    std::vector<int> group;  // collectives: the replica group, in order
    std::vector<int64_t> dimensions;  // broadcast_in_dim: broadcast_dimensions; reduce: the
                                      // reduced ones, increasing; dot_general: lhs's and rhs's
                                      // contracting dimension; reduce_scatter: the
                                      // scatter_dimension
    size_t callee = 0;                // call: the function's index
  };

  struct Function {
    std::string name;
    std::vector<TensorType> argument_types;  // arguments are slots 0 ... n - 1
    std::vector<TensorType> result_types;
    std::vector<Instruction> instructions;
    std::vector<size_t> results;  // the slots func.return names
    size_t slots = 0;
  };

 private:
  const Function& Main() const { return functions_[main_]; }
  // arguments[replica][i] of `function`'s types; returns results[replica][j].
  std::vector<std::vector<HostTensor>> Execute(
      const Function& function, const std::vector<std::vector<HostTensor>>& arguments) const;

  int num_replicas_ = 1;
  std::vector<int> aliasing_;
  std::vector<Function> functions_;
  size_t main_ = 0;
};

// What the reference plugin reads of a serialized xla.CompileOptionsProto: its
// executable_build_options' num_replicas (1 when absent) and device_assignment (one partition:
// replica r on the device of id device_ids[r]; empty when absent). Throws std::invalid_argument
// for bytes it cannot read and for an assignment of several partitions.
struct CompileOptions {
  int num_replicas = 1;
  std::vector<int64_t> device_ids;
};
CompileOptions ReadCompileOptions(std::string_view proto);

}  // namespace chorus::pjrt::reference_plugin

#endif  // CHORUS_PLUGINS_TPU_REFERENCE_STABLEHLO_SUBSET_H_
