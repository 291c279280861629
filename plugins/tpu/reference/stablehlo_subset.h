// The reference PJRT plugin's "compiler": it reads the StableHLO programs chorus's tpu plugin
// emits (stablehlo_programs.h) and runs them on host bytes. It is not a StableHLO implementation:
// it knows one module with one function `main` whose ops are, in MLIR's generic form, reshape,
// bitcast_convert, all_reduce (one combiner: add, multiply, minimum, maximum), all_gather
// (dimension 0), collective_broadcast, the element-wise add, multiply, minimum, maximum and
// divide, a scalar constant, its broadcast_in_dim, and func.return, on tensors of up to two
// dimensions. Anything else is refused, naming the line.
//
// Arithmetic follows chorus's host kernels, so that a program's all-reduce gives the bits of
// chorus's host path: values combined in a pairwise tree over the replica group's order
// (((r0 + r1) + (r2 + r3)) + ...), 16-bit floats computed in float, integers wrapping,
// minimum/maximum as std::min/std::max (XLA's propagate NaN), and division as chorus's divide
// kernel (floats in double, rounded once; integers truncated toward zero).
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
  std::string element;  // "f32", "ui8", ...
  std::vector<int64_t> dims;
  size_t elements() const;
  size_t bytes() const;
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
  const std::vector<TensorType>& argument_types() const { return argument_types_; }
  // Per argument: the result it may be donated to (tf.aliasing_output), or -1.
  const std::vector<int>& aliasing() const { return aliasing_; }
  const std::vector<TensorType>& result_types() const { return result_types_; }

  // arguments[replica][i], every replica's; returns results[replica][j]. Throws
  // std::invalid_argument for an argument of another size than its type.
  std::vector<std::vector<HostTensor>> Run(
      const std::vector<std::vector<HostTensor>>& arguments) const;

  struct Instruction {
    std::string op;  // "reshape", "bitcast_convert", "all_reduce", "all_gather", ...
    std::string result;
    std::string operand;
    TensorType result_type;
    std::string operand2;    // an element-wise op's second operand
    std::string combiner;    // all_reduce, element-wise: "add", "multiply", "minimum", ...
    double constant = 0;     // a constant's value
    std::vector<int> group;  // collectives: the replica group, in order
  };

 private:
  int num_replicas_ = 1;
  std::vector<std::string> argument_names_;
  std::vector<TensorType> argument_types_;
  std::vector<int> aliasing_;
  std::vector<Instruction> instructions_;
  std::vector<std::string> results_;
  std::vector<TensorType> result_types_;
};

// num_replicas from a serialized xla.CompileOptionsProto (executable_build_options.num_replicas),
// 1 when absent. Throws std::invalid_argument for bytes it cannot read.
int NumReplicasOfCompileOptions(std::string_view proto);

}  // namespace chorus::pjrt::reference_plugin

#endif  // CHORUS_PLUGINS_TPU_REFERENCE_STABLEHLO_SUBSET_H_
