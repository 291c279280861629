#include "stablehlo_programs.h"

#include <chorus/error.hpp>
#include <cstdint>
#include <string_view>

namespace chorus::tpu {
namespace {

void AppendVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

// A varint field (wire type 0); int64 fields carry negative values as their 64-bit pattern.
void AppendInt64Field(std::string& out, int field, int64_t value) {
  AppendVarint(out, static_cast<uint64_t>(field) << 3);
  AppendVarint(out, static_cast<uint64_t>(value));
}

std::string Tensor(size_t elements, std::string_view type) {
  return "tensor<" + std::to_string(elements) + "x" + std::string(type) + ">";
}

std::string Groups(const ReplicaGroup& group) {
  std::string text = "dense<[[";
  for (size_t i = 0; i < group.size(); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(group[i]);
  }
  return text + "]]> : tensor<1x" + std::to_string(group.size()) + "xi64>";
}

std::string Module(std::string_view name, int num_replicas, const std::string& arguments,
                   const std::string& results, const std::string& body) {
  return "module @" + std::string(name) +
         " attributes {mhlo.num_replicas = " + std::to_string(num_replicas) +
         " : i32, mhlo.num_partitions = 1 : i32} {\n" + "  func.func public @main(" + arguments +
         ") -> (" + results + ") {\n" + body + "  }\n}\n";
}

const char* CombinerOp(chorus_reduce_op op) {
  switch (op) {
    case CHORUS_REDUCE_SUM:
      return "stablehlo.add";
    case CHORUS_REDUCE_PROD:
      return "stablehlo.multiply";
    case CHORUS_REDUCE_MIN:
      return "stablehlo.minimum";
    case CHORUS_REDUCE_MAX:
      return "stablehlo.maximum";
    default:
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "tpu: reduce op " + std::to_string(op) + " has no StableHLO combiner");
  }
}

// A one-operand op on one line, in MLIR's generic form (which every StableHLO parser reads).
std::string Op(const std::string& result, std::string_view op, const std::string& operand,
               const std::string& attributes, const std::string& from, const std::string& to) {
  return "    " + result + " = \"" + std::string(op) + "\"(" + operand + ")" +
         (attributes.empty() ? "" : " {" + attributes + "}") + " : (" + from + ") -> " + to + "\n";
}

std::string Return(const std::vector<std::string>& values, const std::vector<std::string>& types) {
  std::string names, list;
  for (size_t i = 0; i < values.size(); ++i) {
    names += (i == 0 ? "" : ", ") + values[i];
    list += (i == 0 ? "" : ", ") + types[i];
  }
  return "    \"func.return\"(" + names + ") : (" + list + ") -> ()\n";
}

// A dtype's values over a whole allocation's bytes: u8[count * size] <-> dtype[count], through a
// reshape to [count, size] where the sizes differ and a bitcast_convert, neither of which moves
// data.
struct Packing {
  Packing(chorus_dtype d, size_t n)
      : dtype(d),
        count(n),
        size(chorus_dtype_size(d)),
        element(StablehloElementType(d)),
        bytes(Tensor(n * size, "ui8")),
        typed(Tensor(n, element)),
        packed(size > 1 ? "tensor<" + std::to_string(n) + "x" + std::to_string(size) + "xui8>"
                        : bytes) {}

  // Appends the ops that read `value` (bytes) as the dtype's values; returns their name.
  std::string Unpack(const std::string& value, const std::string& suffix, std::string& body) const {
    std::string out = value;
    if (size > 1) {
      body += Op("%packed" + suffix, "stablehlo.reshape", out, "", bytes, packed);
      out = "%packed" + suffix;
    }
    if (dtype != CHORUS_U8) {
      body += Op("%in" + suffix, "stablehlo.bitcast_convert", out, "", packed, typed);
      out = "%in" + suffix;
    }
    return out;
  }
  // Appends the ops that give `value`'s bytes; returns their name.
  std::string Pack(const std::string& value, const std::string& suffix, std::string& body) const {
    std::string out = value;
    if (dtype != CHORUS_U8) {
      body += Op("%unpacked" + suffix, "stablehlo.bitcast_convert", out, "", typed, packed);
      out = "%unpacked" + suffix;
    }
    if (size > 1) {
      body += Op("%out" + suffix, "stablehlo.reshape", out, "", packed, bytes);
      out = "%out" + suffix;
    }
    return out;
  }

  chorus_dtype dtype;
  size_t count;
  size_t size;
  std::string element;
  std::string bytes;   // u8[count * size]
  std::string typed;   // dtype[count]
  std::string packed;  // u8[count, size], or `bytes` for 1-byte dtypes
};

}  // namespace

std::string CompileOptionsProto(int num_replicas, bool portable) {
  std::string build;
  AppendInt64Field(build, 1, -1);            // device_ordinal: none (a replicated program)
  AppendInt64Field(build, 4, num_replicas);  // num_replicas
  AppendInt64Field(build, 5, 1);             // num_partitions
  std::string options;
  AppendVarint(options, (3 << 3) | 2);  // executable_build_options, length-delimited
  AppendVarint(options, build.size());
  options += build;
  if (portable) AppendInt64Field(options, 4, 1);  // compile_portable_executable
  return options;
}

const char* StablehloElementType(chorus_dtype dtype) {
  switch (dtype) {
    case CHORUS_F32:
      return "f32";
    case CHORUS_F64:
      return "f64";
    case CHORUS_F16:
      return "f16";
    case CHORUS_BF16:
      return "bf16";
    case CHORUS_I32:
      return "i32";
    case CHORUS_I64:
      return "i64";
    case CHORUS_U8:
      return "ui8";
    case CHORUS_I8:
      return "i8";
    default:
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "tpu: dtype " + std::to_string(dtype) + " has no StableHLO element type");
  }
}

std::string AllReduceProgram(const std::vector<AllReducePart>& parts, int num_replicas) {
  std::string arguments, results, body;
  std::vector<std::string> values, types;
  for (size_t i = 0; i < parts.size(); ++i) {
    const AllReducePart& part = parts[i];
    const std::string p = std::to_string(i);
    const Packing packing(part.dtype, part.count);
    const std::string scalar = "tensor<" + packing.element + ">";
    arguments += (i == 0 ? "" : ", ") + std::string("%arg") + p + ": " + packing.bytes +
                 (part.donate ? " {tf.aliasing_output = " + p + " : i32}" : "");
    results += (i == 0 ? "" : ", ") + packing.bytes;
    const std::string in = packing.Unpack("%arg" + p, p, body);
    body += "    %sum" + p + " = \"stablehlo.all_reduce\"(" + in + ") ({\n" + "    ^bb0(%lhs" + p +
            ": " + scalar + ", %rhs" + p + ": " + scalar + "):\n" + "      %combined" + p +
            " = \"" + CombinerOp(part.op) + "\"(%lhs" + p + ", %rhs" + p + ") : (" + scalar + ", " +
            scalar + ") -> " + scalar + "\n" + "      \"stablehlo.return\"(%combined" + p +
            ") : (" + scalar + ") -> ()\n" + "    }) {replica_groups = " + Groups(part.group) +
            "} : (" + packing.typed + ") -> " + packing.typed + "\n";
    values.push_back(packing.Pack("%sum" + p, p, body));
    types.push_back(packing.bytes);
  }
  body += Return(values, types);
  return Module("chorus_all_reduce", num_replicas, arguments, results, body);
}

std::string ReduceKernelProgram(chorus_dtype dtype, chorus_reduce_op op, size_t count) {
  const Packing packing(dtype, count);
  std::string body;
  const std::string a = packing.Unpack("%arg0", "0", body);
  const std::string b = packing.Unpack("%arg1", "1", body);
  body += "    %combined = \"" + std::string(CombinerOp(op)) + "\"(" + a + ", " + b + ") : (" +
          packing.typed + ", " + packing.typed + ") -> " + packing.typed + "\n";
  const std::string out = packing.Pack("%combined", "", body);
  body += Return({out}, {packing.bytes});
  return Module("chorus_reduce", 1, "%arg0: " + packing.bytes + ", %arg1: " + packing.bytes,
                packing.bytes, body);
}

std::string DivideKernelProgram(chorus_dtype dtype, size_t count, uint64_t divisor) {
  const Packing packing(dtype, count);
  const bool floating =
      dtype == CHORUS_F32 || dtype == CHORUS_F64 || dtype == CHORUS_F16 || dtype == CHORUS_BF16;
  const std::string scalar = "tensor<" + packing.element + ">";
  std::string body;
  const std::string values = packing.Unpack("%arg0", "", body);
  body += "    %divisor = \"stablehlo.constant\"() {value = dense<" + std::to_string(divisor) +
          (floating ? ".0" : "") + "> : " + scalar + "} : () -> " + scalar + "\n";
  body += Op("%divisors", "stablehlo.broadcast_in_dim", "%divisor",
             "broadcast_dimensions = array<i64>", scalar, packing.typed);
  body += "    %quotient = \"stablehlo.divide\"(" + values + ", %divisors) : (" + packing.typed +
          ", " + packing.typed + ") -> " + packing.typed + "\n";
  const std::string out = packing.Pack("%quotient", "", body);
  body += Return({out}, {packing.bytes});
  return Module("chorus_divide", 1, "%arg0: " + packing.bytes, packing.bytes, body);
}

std::string BroadcastProgram(size_t bytes, const ReplicaGroup& group, int num_replicas) {
  const std::string type = Tensor(bytes, "ui8");
  const std::string body = Op("%result", "stablehlo.collective_broadcast", "%arg0",
                              "replica_groups = " + Groups(group), type, type) +
                           Return({"%result"}, {type});
  return Module("chorus_broadcast", num_replicas, "%arg0: " + type, type, body);
}

std::string AllGatherProgram(size_t bytes, const ReplicaGroup& group, int num_replicas) {
  const std::string type = Tensor(bytes, "ui8");
  const std::string gathered = Tensor(bytes * group.size(), "ui8");
  const std::string body =
      Op("%result", "stablehlo.all_gather", "%arg0",
         "all_gather_dim = 0 : i64, replica_groups = " + Groups(group), type, gathered) +
      Return({"%result"}, {gathered});
  return Module("chorus_all_gather", num_replicas, "%arg0: " + type, gathered, body);
}

}  // namespace chorus::tpu
