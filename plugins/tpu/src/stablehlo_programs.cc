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

size_t ElementBytes(const std::string& element) {
  if (element == "f64" || element == "i64" || element == "ui64") return 8;
  if (element == "f32" || element == "i32" || element == "ui32") return 4;
  if (element == "f16" || element == "bf16" || element == "i16" || element == "ui16") return 2;
  if (element == "i8" || element == "ui8") return 1;
  throw Error(CHORUS_INVALID_ARGUMENT,
              "tpu: a program's tensor of element type " + element +
                  " cannot be held in chorus's device memory (f64, f32, f16, bf16, i64, i32, i16, "
                  "i8 and their unsigned forms can)");
}

// "16x784xf32" -> {f32, [16, 784]}; "f32" -> a scalar.
TensorType ParseTensorType(const std::string& text) {
  TensorType type;
  size_t start = 0;
  for (;;) {
    const size_t x = text.find('x', start);
    if (x == std::string::npos || x == start) break;
    const std::string digits = text.substr(start, x - start);
    if (digits.find_first_not_of("0123456789") != std::string::npos) break;
    type.dims.push_back(std::stoll(digits));
    start = x + 1;
  }
  type.element = text.substr(start);
  if (type.element.empty() || type.element.find_first_of("x?<>, ") != std::string::npos) {
    throw Error(CHORUS_INVALID_ARGUMENT, "tpu: cannot read the tensor type tensor<" + text +
                                             "> (a static shape and an element type, e.g. "
                                             "tensor<16x784xf32>)");
  }
  return type;
}

// The tensor types in `text`, in order ("tensor<...>" each).
std::vector<TensorType> TensorTypes(const std::string& text) {
  std::vector<TensorType> types;
  size_t at = 0;
  while ((at = text.find("tensor<", at)) != std::string::npos) {
    const size_t end = text.find('>', at);
    if (end == std::string::npos) break;
    types.push_back(ParseTensorType(text.substr(at + 7, end - at - 7)));
    at = end + 1;
  }
  return types;
}

// The values of a whole allocation's bytes as `type` (reshape and bitcast_convert, which move no
// data), appended to `body`; returns the name of the typed value.
std::string UnpackAs(const TensorType& type, const std::string& bytes_value, const std::string& id,
                     std::string& body) {
  const size_t size = ElementBytes(type.element);
  const size_t count = type.elements();
  const std::string bytes = Tensor(count * size, "ui8");
  const TensorType flat{type.element, {static_cast<int64_t>(count)}};
  std::string value = bytes_value;
  std::string from = bytes;
  if (size > 1) {
    const std::string packed =
        "tensor<" + std::to_string(count) + "x" + std::to_string(size) + "xui8>";
    body += Op("%packed" + id, "stablehlo.reshape", value, "", from, packed);
    value = "%packed" + id;
    from = packed;
  }
  if (type.element != "ui8") {
    body += Op("%flat" + id, "stablehlo.bitcast_convert", value, "", from, flat.text());
    value = "%flat" + id;
    from = flat.text();
  }
  if (type.dims != flat.dims) {
    body += Op("%typed" + id, "stablehlo.reshape", value, "", from, type.text());
    value = "%typed" + id;
  }
  return value;
}

// The bytes of `value` (of `type`), appended to `body`; returns the name of the bytes.
std::string PackFrom(const TensorType& type, const std::string& typed_value, const std::string& id,
                     std::string& body) {
  const size_t size = ElementBytes(type.element);
  const size_t count = type.elements();
  const TensorType flat{type.element, {static_cast<int64_t>(count)}};
  std::string value = typed_value;
  std::string from = type.text();
  if (type.dims != flat.dims) {
    body += Op("%rflat" + id, "stablehlo.reshape", value, "", from, flat.text());
    value = "%rflat" + id;
    from = flat.text();
  }
  const std::string packed =
      size > 1 ? "tensor<" + std::to_string(count) + "x" + std::to_string(size) + "xui8>"
               : Tensor(count, "ui8");
  if (type.element != "ui8") {
    body += Op("%rpacked" + id, "stablehlo.bitcast_convert", value, "", from, packed);
    value = "%rpacked" + id;
    from = packed;
  }
  if (size > 1) {
    body += Op("%out" + id, "stablehlo.reshape", value, "", from, Tensor(count * size, "ui8"));
    value = "%out" + id;
  }
  return value;
}

std::string TypeList(const std::vector<TensorType>& types) {
  std::string list;
  for (size_t i = 0; i < types.size(); ++i) list += (i == 0 ? "" : ", ") + types[i].text();
  return list;
}

}  // namespace

std::string CompileOptionsProto(int num_replicas, bool portable,
                                const std::vector<int64_t>& device_ids) {
  std::string build;
  AppendInt64Field(build, 1, -1);            // device_ordinal: none (a replicated program)
  AppendInt64Field(build, 4, num_replicas);  // num_replicas
  AppendInt64Field(build, 5, 1);             // num_partitions
  if (!device_ids.empty()) {
    std::string ids;  // replica_device_ids, packed (proto3's encoding of a repeated int64)
    for (int64_t id : device_ids) AppendVarint(ids, static_cast<uint64_t>(id));
    std::string computation;
    AppendVarint(computation, (1 << 3) | 2);
    AppendVarint(computation, ids.size());
    computation += ids;
    std::string assignment;
    AppendInt64Field(assignment, 1, static_cast<int64_t>(device_ids.size()));  // replica_count
    AppendInt64Field(assignment, 2, 1);                                        // computation_count
    AppendVarint(assignment, (3 << 3) | 2);  // computation_devices
    AppendVarint(assignment, computation.size());
    assignment += computation;
    AppendVarint(build, (9 << 3) | 2);  // device_assignment
    AppendVarint(build, assignment.size());
    build += assignment;
  }
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

std::string ReduceScatterProgram(chorus_dtype dtype, chorus_reduce_op op, size_t count,
                                 const ReplicaGroup& group, int num_replicas) {
  const Packing whole(dtype, count * group.size());
  const Packing part(dtype, count);
  const std::string scalar = "tensor<" + whole.element + ">";
  std::string body;
  const std::string in = whole.Unpack("%arg0", "", body);
  body += "    %part = \"stablehlo.reduce_scatter\"(" + in + ") ({\n" + "    ^bb0(%lhs: " + scalar +
          ", %rhs: " + scalar + "):\n" + "      %combined = \"" + CombinerOp(op) +
          "\"(%lhs, %rhs) : (" + scalar + ", " + scalar + ") -> " + scalar + "\n" +
          "      \"stablehlo.return\"(%combined) : (" + scalar + ") -> ()\n" +
          "    }) {replica_groups = " + Groups(group) + ", scatter_dimension = 0 : i64} : (" +
          whole.typed + ") -> " + part.typed + "\n";
  const std::string out = part.Pack("%part", "_out", body);
  body += Return({out}, {part.bytes});
  return Module("chorus_reduce_scatter", num_replicas, "%arg0: " + whole.bytes, part.bytes, body);
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

size_t TensorType::elements() const {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

size_t TensorType::bytes() const { return elements() * ElementBytes(element); }

std::string TensorType::text() const {
  std::string out = "tensor<";
  for (int64_t d : dims) out += std::to_string(d) + "x";
  return out + element + ">";
}

MainSignature ReadMainSignature(const std::string& mlir) {
  const std::string marker = "func.func public @main(";
  const size_t at = mlir.find(marker);
  if (at == std::string::npos) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "tpu: the replica program has no `func.func public @main(`: its step must be the "
                "module's public function @main");
  }
  // The arguments run to the parenthesis that closes the list (attributes hold no parentheses).
  const size_t open = at + marker.size();
  const size_t close = mlir.find(')', open);
  const size_t body = mlir.find('{', close == std::string::npos ? open : close);
  const size_t arrow = mlir.find("->", close == std::string::npos ? open : close);
  if (close == std::string::npos || body == std::string::npos || arrow == std::string::npos ||
      arrow > body) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "tpu: cannot read @main's signature: expected `@main(%x: tensor<...>, ...) -> "
                "(tensor<...>, ...) {`");
  }
  MainSignature signature;
  signature.arguments = TensorTypes(mlir.substr(open, close - open));
  // The results' text ends before the body's brace; a result's attributes are not expected.
  signature.results = TensorTypes(mlir.substr(arrow + 2, body - arrow - 2));
  if (signature.results.empty()) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "tpu: @main returns nothing; a replica step returns at "
                "least its carried values or an output");
  }
  return signature;
}

std::string ReplicaStepProgram(const std::string& user_module, const MainSignature& signature,
                               uint32_t steps, uint32_t num_carried, int num_replicas,
                               bool donate_carried) {
  const size_t num_arguments = signature.arguments.size();
  const size_t num_results = signature.results.size();
  if (steps == 0) throw Error(CHORUS_INVALID_ARGUMENT, "tpu: a replica program of 0 steps");
  if (num_carried > num_arguments || num_carried > num_results) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "tpu: " + std::to_string(num_carried) + " carried values, but @main takes " +
                    std::to_string(num_arguments) + " arguments and returns " +
                    std::to_string(num_results) + " results");
  }
  for (uint32_t i = 0; i < num_carried; ++i) {
    if (signature.arguments[i].text() != signature.results[i].text()) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "tpu: carried value " + std::to_string(i) + " is argument " +
                      signature.arguments[i].text() + " but result " + signature.results[i].text() +
                      "; a step must return each carried value in its argument's type");
    }
  }
  for (const TensorType& type : signature.arguments) {
    if (type.elements() == 0) {
      throw Error(CHORUS_INVALID_ARGUMENT, "tpu: @main takes an empty tensor (" + type.text() +
                                               "); device memory holds at least one byte");
    }
  }
  // The user's functions: everything inside its module (or the whole text when it has none),
  // with @main made private under another name.
  std::string functions = user_module;
  const size_t module = functions.find("module");
  const size_t main = functions.find("func.func");
  if (module != std::string::npos && main != std::string::npos && module < main) {
    const size_t first_line_end = functions.find('\n', module);
    const size_t last_brace = functions.rfind('}');
    if (first_line_end == std::string::npos || last_brace == std::string::npos ||
        last_brace < first_line_end) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "tpu: cannot find the body of the replica program's module (expected `module "
                  "... {` on a line of its own, the functions, then `}`)");
    }
    functions = functions.substr(first_line_end + 1, last_brace - first_line_end - 1);
  }
  const std::string main_marker = "func.func public @main(";
  const size_t main_at = functions.find(main_marker);
  if (main_at == std::string::npos) ReadMainSignature(functions);  // throws the error
  functions.replace(main_at, main_marker.size(), "func.func private @chorus_replica_step(");

  const size_t num_inputs = num_arguments - num_carried;
  const size_t num_outputs = num_results - num_carried;
  std::string arguments, results, body;
  std::vector<std::string> values, value_types;
  size_t argument = 0;
  auto add_argument = [&](const TensorType& type) {
    const std::string id = std::to_string(argument);
    // A carried argument i may become result i, the carried value after the last step.
    const bool donated = donate_carried && argument < num_carried;
    arguments += (argument == 0 ? "" : ", ") + std::string("%arg") + id + ": " +
                 Tensor(type.bytes(), "ui8") +
                 (donated ? " {tf.aliasing_output = " + id + " : i32}" : "");
    return UnpackAs(type, "%arg" + std::to_string(argument++), id, body);
  };
  std::vector<std::string> carried;
  for (uint32_t i = 0; i < num_carried; ++i)
    carried.push_back(add_argument(signature.arguments[i]));
  std::vector<std::vector<std::string>> outputs(steps);
  const std::string argument_types = TypeList(signature.arguments);
  const std::string result_types = TypeList(signature.results);
  for (uint32_t s = 0; s < steps; ++s) {
    std::vector<std::string> operands = carried;
    for (size_t k = 0; k < num_inputs; ++k) {
      operands.push_back(add_argument(signature.arguments[num_carried + k]));
    }
    std::string list;
    for (size_t k = 0; k < operands.size(); ++k) list += (k == 0 ? "" : ", ") + operands[k];
    const std::string step = "%step" + std::to_string(s);
    const bool single = num_results == 1;
    body += "    " + step + (single ? "" : ":" + std::to_string(num_results)) +
            " = \"func.call\"(" + list + ") {callee = @chorus_replica_step} : (" + argument_types +
            ") -> " + (single ? result_types : "(" + result_types + ")") + "\n";
    auto result = [&](size_t j) { return single ? step : step + "#" + std::to_string(j); };
    for (uint32_t i = 0; i < num_carried; ++i) carried[i] = result(i);
    for (size_t j = 0; j < num_outputs; ++j) outputs[s].push_back(result(num_carried + j));
  }
  size_t result_index = 0;
  auto add_result = [&](const TensorType& type, const std::string& value) {
    const std::string bytes = Tensor(type.bytes(), "ui8");
    results += (result_index == 0 ? "" : ", ") + bytes;
    values.push_back(PackFrom(type, value, std::to_string(result_index++), body));
    value_types.push_back(bytes);
  };
  for (uint32_t i = 0; i < num_carried; ++i) add_result(signature.results[i], carried[i]);
  for (uint32_t s = 0; s < steps; ++s) {
    for (size_t j = 0; j < num_outputs; ++j) {
      add_result(signature.results[num_carried + j], outputs[s][j]);
    }
  }
  body += Return(values, value_types);
  std::string program = Module("chorus_replica_program", num_replicas, arguments, results, body);
  // The user's functions go inside the module, after chorus's @main.
  program.insert(program.rfind('}'), functions + (functions.ends_with('\n') ? "" : "\n"));
  return program;
}

}  // namespace chorus::tpu
