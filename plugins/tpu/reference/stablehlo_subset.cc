#include "stablehlo_subset.h"

#include <algorithm>
#include <bit>
#include <chorus/plugin_sdk.hpp>
#include <cstring>
#include <map>
#include <regex>
#include <stdexcept>
#include <type_traits>

namespace chorus::pjrt::reference_plugin {
namespace {

[[noreturn]] void Refuse(const std::string& why) { throw std::invalid_argument(why); }

size_t ElementBytes(const std::string& element) {
  if (element == "f64" || element == "i64" || element == "ui64") return 8;
  if (element == "f32" || element == "i32" || element == "ui32") return 4;
  if (element == "f16" || element == "bf16" || element == "i16" || element == "ui16") return 2;
  if (element == "i8" || element == "ui8") return 1;
  Refuse("element type " + element + " is not in the subset");
}

// "1024xui8", "256x4xui8", "f32" (a scalar).
TensorType ParseTensorType(const std::string& text) {
  TensorType type;
  size_t start = 0;
  for (;;) {
    const size_t x = text.find('x', start);
    const bool digits = x != std::string::npos && x > start &&
                        std::all_of(text.begin() + static_cast<std::ptrdiff_t>(start),
                                    text.begin() + static_cast<std::ptrdiff_t>(x),
                                    [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) break;
    type.dims.push_back(std::stoll(text.substr(start, x - start)));
    start = x + 1;
  }
  type.element = text.substr(start);
  ElementBytes(type.element);
  return type;
}

std::vector<int> ParseGroup(const std::string& text) {
  // dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
  static const std::regex kGroup(R"(dense<\[\[([0-9, ]*)\]\]> : tensor<1x(\d+)xi64>)");
  std::smatch match;
  if (!std::regex_search(text, match, kGroup)) Refuse("replica_groups must be one group: " + text);
  std::vector<int> group;
  std::string list = match[1];
  size_t start = 0;
  while (start < list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    group.push_back(std::stoi(list.substr(start, comma - start)));
    start = comma + 1;
  }
  if (group.size() != std::stoul(match[2])) Refuse("replica_groups' shape differs from its list");
  return group;
}

// ---- Element arithmetic, as chorus's host kernels do it.
template <typename T>
T Wrap(T x, T y, bool multiply) {
  using U = std::make_unsigned_t<T>;
  using Wide = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
  const Wide a = static_cast<U>(x), b = static_cast<U>(y);
  return static_cast<T>(static_cast<U>(multiply ? a * b : a + b));
}

enum class Combiner { kAdd, kMultiply, kMinimum, kMaximum, kDivide };

Combiner CombinerOf(const std::string& name) {
  if (name == "add") return Combiner::kAdd;
  if (name == "multiply") return Combiner::kMultiply;
  if (name == "minimum") return Combiner::kMinimum;
  if (name == "maximum") return Combiner::kMaximum;
  if (name == "divide") return Combiner::kDivide;
  Refuse("stablehlo." + name + " is not in the subset");
}

template <Combiner kOp, typename T>
T Combine(T x, T y) {
  if constexpr (kOp == Combiner::kMinimum) {
    return std::min(x, y);
  } else if constexpr (kOp == Combiner::kMaximum) {
    return std::max(x, y);
  } else if constexpr (kOp == Combiner::kDivide) {
    // As chorus's divide kernel: integers truncated toward zero, floats divided in double and
    // rounded once.
    if constexpr (std::is_integral_v<T>) {
      return y == 0 ? T{0} : static_cast<T>(static_cast<int64_t>(x) / static_cast<int64_t>(y));
    } else {
      return static_cast<T>(static_cast<double>(x) / static_cast<double>(y));
    }
  } else if constexpr (std::is_integral_v<T>) {
    return Wrap(x, y, kOp == Combiner::kMultiply);
  } else {
    return kOp == Combiner::kMultiply ? x * y : x + y;
  }
}

// Element by element through memcpy (the bytes need not be aligned); 16-bit floats computed in
// float and rounded to nearest even once.
template <Combiner kOp, typename T>
void CombineInto(unsigned char* into, const unsigned char* other, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    T x, y;
    std::memcpy(&x, into + i * sizeof(T), sizeof(T));
    std::memcpy(&y, other + i * sizeof(T), sizeof(T));
    const T z = Combine<kOp>(x, y);
    std::memcpy(into + i * sizeof(T), &z, sizeof(T));
  }
}

template <Combiner kOp, float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void CombineHalfInto(unsigned char* into, const unsigned char* other, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    uint16_t x, y;
    std::memcpy(&x, into + i * 2, 2);
    std::memcpy(&y, other + i * 2, 2);
    const uint16_t z = FromFloat(Combine<kOp>(ToFloat(x), ToFloat(y)));
    std::memcpy(into + i * 2, &z, 2);
  }
}

template <Combiner kOp>
void CombineTyped(const std::string& element, unsigned char* into, const unsigned char* other,
                  size_t count) {
  if (element == "f32") return CombineInto<kOp, float>(into, other, count);
  if (element == "f64") return CombineInto<kOp, double>(into, other, count);
  if (element == "i32") return CombineInto<kOp, int32_t>(into, other, count);
  if (element == "i64") return CombineInto<kOp, int64_t>(into, other, count);
  if (element == "ui8") return CombineInto<kOp, uint8_t>(into, other, count);
  if (element == "i8") return CombineInto<kOp, int8_t>(into, other, count);
  if (element == "f16") {
    return CombineHalfInto<kOp, sdk::HalfToFloat, sdk::FloatToHalf>(into, other, count);
  }
  if (element == "bf16") {
    return CombineHalfInto<kOp, sdk::Bf16ToFloat, sdk::FloatToBf16>(into, other, count);
  }
  Refuse("arithmetic on " + element + " is not in the subset");
}

void CombineElements(const std::string& element, unsigned char* into, const unsigned char* other,
                     size_t count, const std::string& combiner) {
  switch (CombinerOf(combiner)) {
    case Combiner::kAdd:
      return CombineTyped<Combiner::kAdd>(element, into, other, count);
    case Combiner::kMultiply:
      return CombineTyped<Combiner::kMultiply>(element, into, other, count);
    case Combiner::kMinimum:
      return CombineTyped<Combiner::kMinimum>(element, into, other, count);
    case Combiner::kMaximum:
      return CombineTyped<Combiner::kMaximum>(element, into, other, count);
    case Combiner::kDivide:
      return CombineTyped<Combiner::kDivide>(element, into, other, count);
  }
}

using Bytes = std::vector<unsigned char>;

// The group's values combined in chorus's pairwise tree: partial results of consecutive runs kept
// as a binary counter, then folded from the last run back to the first.
Bytes PairwiseTree(const std::vector<const Bytes*>& values, const std::string& element,
                   const std::string& combiner) {
  struct Partial {
    Bytes bytes;
    unsigned level;
  };
  const size_t count = values.front()->size() / ElementBytes(element);
  std::vector<Partial> stack;
  for (const Bytes* value : values) {
    Partial current{*value, 0};
    while (!stack.empty() && stack.back().level == current.level) {
      Bytes left = std::move(stack.back().bytes);
      stack.pop_back();
      CombineElements(element, left.data(), current.bytes.data(), count, combiner);
      current = {std::move(left), current.level + 1};
    }
    stack.push_back(std::move(current));
  }
  Bytes sum = std::move(stack.back().bytes);
  stack.pop_back();
  while (!stack.empty()) {
    Bytes left = std::move(stack.back().bytes);
    stack.pop_back();
    CombineElements(element, left.data(), sum.data(), count, combiner);
    sum = std::move(left);
  }
  return sum;
}

// A constant's one element, as the element type stores it (integers truncated toward zero).
void StoreScalar(const std::string& element, double value, unsigned char* out) {
  auto put = [&](auto converted) { std::memcpy(out, &converted, sizeof(converted)); };
  if (element == "f32") return put(static_cast<float>(value));
  if (element == "f64") return put(value);
  if (element == "f16") return put(sdk::FloatToHalf(static_cast<float>(value)));
  if (element == "bf16") return put(sdk::FloatToBf16(static_cast<float>(value)));
  if (element == "i32") return put(static_cast<int32_t>(value));
  if (element == "i64") return put(static_cast<int64_t>(value));
  if (element == "ui8") return put(static_cast<uint8_t>(value));
  if (element == "i8") return put(static_cast<int8_t>(value));
  Refuse("a constant of " + element + " is not in the subset");
}

std::string Trim(const std::string& line) {
  const size_t begin = line.find_first_not_of(' ');
  return begin == std::string::npos ? std::string() : line.substr(begin);
}

}  // namespace

size_t TensorType::elements() const {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

size_t TensorType::bytes() const { return elements() * ElementBytes(element); }

std::shared_ptr<const SubsetProgram> SubsetProgram::Parse(std::string_view mlir) {
  static const std::regex kModule(
      R"(^module @\w+ attributes \{mhlo\.num_replicas = (\d+) : i32, mhlo\.num_partitions = 1 : i32\} \{$)");
  static const std::regex kFunc(R"(^func\.func public @main\((.*)\) -> \((.*)\) \{$)");
  static const std::regex kArgument(
      R"(%(arg\d+): tensor<([^>]*)>(?: \{tf\.aliasing_output = (\d+) : i32\})?)");
  static const std::regex kType(R"(tensor<([^>]*)>)");
  static const std::regex kOp(
      R"re(^(%\w+) = "stablehlo\.(\w+)"\((%\w+)\)(?: \{(.*)\})? : \(tensor<([^>]*)>\) -> tensor<([^>]*)>$)re");
  static const std::regex kAllReduceOpen(
      R"re(^(%\w+) = "stablehlo\.all_reduce"\((%\w+)\) \(\{$)re");
  static const std::regex kBlock(R"(^\^bb0\(%\w+: tensor<(\w+)>, %\w+: tensor<(\w+)>\):$)");
  static const std::regex kCombiner(
      R"re(^%\w+ = "stablehlo\.(add|multiply|minimum|maximum)"\(%\w+, %\w+\) : .*$)re");
  static const std::regex kRegionReturn(R"re(^"stablehlo\.return"\(%\w+\) : .*$)re");
  static const std::regex kAllReduceClose(
      R"re(^\}\) \{replica_groups = (.*)\} : \(tensor<([^>]*)>\) -> tensor<([^>]*)>$)re");
  static const std::regex kReturn(R"re(^"func\.return"\(([^)]*)\) : .*$)re");
  static const std::regex kBinary(
      R"re(^(%\w+) = "stablehlo\.(add|multiply|minimum|maximum|divide)"\((%\w+), (%\w+)\) : \(tensor<([^>]*)>, tensor<([^>]*)>\) -> tensor<([^>]*)>$)re");
  static const std::regex kConstant(
      R"re(^(%\w+) = "stablehlo\.constant"\(\) \{value = dense<([-+0-9.e]+)> : tensor<(\w+)>\} : \(\) -> tensor<(\w+)>$)re");

  auto program = std::make_shared<SubsetProgram>();
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < mlir.size()) {
    size_t end = mlir.find('\n', start);
    if (end == std::string_view::npos) end = mlir.size();
    const std::string line = Trim(std::string(mlir.substr(start, end - start)));
    if (!line.empty()) lines.push_back(line);
    start = end + 1;
  }
  size_t i = 0;
  auto refuse = [&](const std::string& why) {
    Refuse("line " + std::to_string(i + 1) + " (" + (i < lines.size() ? lines[i] : "end") +
           "): " + why);
  };
  std::smatch match;
  if (lines.empty() || !std::regex_match(lines[0], match, kModule)) {
    refuse("expected chorus's module header with mhlo.num_replicas");
  }
  program->num_replicas_ = std::stoi(match[1]);
  i = 1;
  if (i >= lines.size() || !std::regex_match(lines[i], match, kFunc)) {
    refuse("expected func.func public @main");
  }
  const std::string arguments = match[1], results = match[2];
  for (auto it = std::sregex_iterator(arguments.begin(), arguments.end(), kArgument);
       it != std::sregex_iterator(); ++it) {
    program->argument_names_.push_back("%" + (*it)[1].str());
    program->argument_types_.push_back(ParseTensorType((*it)[2]));
    program->aliasing_.push_back((*it)[3].matched ? std::stoi((*it)[3]) : -1);
  }
  for (auto it = std::sregex_iterator(results.begin(), results.end(), kType);
       it != std::sregex_iterator(); ++it) {
    program->result_types_.push_back(ParseTensorType((*it)[1]));
  }
  std::map<std::string, TensorType> types;
  for (size_t a = 0; a < program->argument_names_.size(); ++a) {
    types[program->argument_names_[a]] = program->argument_types_[a];
  }
  auto operand_type = [&](const std::string& name) -> const TensorType& {
    auto found = types.find(name);
    if (found == types.end()) refuse("operand " + name + " is not defined before");
    return found->second;
  };
  for (++i; i < lines.size(); ++i) {
    Instruction instruction;
    if (std::regex_match(lines[i], match, kOp)) {
      instruction.result = match[1];
      instruction.op = match[2];
      instruction.operand = match[3];
      instruction.result_type = ParseTensorType(match[6]);
      const std::string attributes = match[4];
      const TensorType& from = operand_type(instruction.operand);
      if (ParseTensorType(match[5]).dims != from.dims) refuse("operand type differs");
      if (instruction.op == "reshape" || instruction.op == "bitcast_convert") {
        if (instruction.result_type.bytes() != from.bytes()) refuse("result size differs");
      } else if (instruction.op == "broadcast_in_dim") {
        if (attributes != "broadcast_dimensions = array<i64>" || !from.dims.empty() ||
            instruction.result_type.element != from.element) {
          refuse("only a scalar broadcast to a tensor of its element type");
        }
      } else if (instruction.op == "collective_broadcast") {
        instruction.group = ParseGroup(attributes);
        if (instruction.result_type.bytes() != from.bytes()) refuse("result size differs");
      } else if (instruction.op == "all_gather") {
        if (attributes.find("all_gather_dim = 0 : i64") == std::string::npos) {
          refuse("only all_gather_dim = 0");
        }
        instruction.group = ParseGroup(attributes);
        if (instruction.result_type.bytes() != from.bytes() * instruction.group.size()) {
          refuse("result size is not the group's");
        }
      } else {
        refuse("stablehlo." + instruction.op + " is not in the subset");
      }
    } else if (std::regex_match(lines[i], match, kBinary)) {
      instruction.op = "elementwise";
      instruction.combiner = match[2];
      instruction.result = match[1];
      instruction.operand = match[3];
      instruction.operand2 = match[4];
      instruction.result_type = ParseTensorType(match[7]);
      const TensorType& lhs = operand_type(instruction.operand);
      const TensorType& rhs = operand_type(instruction.operand2);
      if (lhs.dims != rhs.dims || lhs.element != rhs.element ||
          instruction.result_type.dims != lhs.dims ||
          instruction.result_type.element != lhs.element) {
        refuse("an element-wise op of tensors of different types");
      }
    } else if (std::regex_match(lines[i], match, kConstant)) {
      instruction.op = "constant";
      instruction.result = match[1];
      instruction.constant = std::stod(match[2]);
      instruction.result_type = ParseTensorType(match[4]);
      if (match[3] != match[4]) refuse("the constant's type differs from its result's");
    } else if (std::regex_match(lines[i], match, kAllReduceOpen)) {
      instruction.op = "all_reduce";
      instruction.result = match[1];
      instruction.operand = match[2];
      const TensorType& from = operand_type(instruction.operand);
      if (++i >= lines.size() || !std::regex_match(lines[i], match, kBlock) ||
          match[1] != from.element || match[2] != from.element) {
        refuse("expected the combiner's block of two " + from.element + " scalars");
      }
      if (++i >= lines.size() || !std::regex_match(lines[i], match, kCombiner)) {
        refuse("expected one of add, multiply, minimum, maximum");
      }
      instruction.combiner = match[1];
      if (++i >= lines.size() || !std::regex_match(lines[i], kRegionReturn)) {
        refuse("expected stablehlo.return");
      }
      if (++i >= lines.size() || !std::regex_match(lines[i], match, kAllReduceClose)) {
        refuse("expected the end of all_reduce with its replica_groups");
      }
      instruction.group = ParseGroup(match[1]);
      instruction.result_type = ParseTensorType(match[3]);
      if (ParseTensorType(match[2]).dims != from.dims ||
          instruction.result_type.dims != from.dims ||
          instruction.result_type.element != from.element) {
        refuse("all_reduce's types differ");
      }
    } else if (std::regex_match(lines[i], match, kReturn)) {
      const std::string list = match[1];
      size_t from = 0;
      while (from < list.size()) {
        size_t comma = list.find(',', from);
        if (comma == std::string::npos) comma = list.size();
        const std::string name = Trim(list.substr(from, comma - from));
        operand_type(name);  // defined before
        program->results_.push_back(name);
        from = comma + 1;
      }
      if (program->results_.size() != program->result_types_.size()) {
        refuse("returns " + std::to_string(program->results_.size()) + " values for " +
               std::to_string(program->result_types_.size()) + " results");
      }
      for (size_t r = 0; r < program->results_.size(); ++r) {
        if (operand_type(program->results_[r]).dims != program->result_types_[r].dims) {
          refuse("result " + std::to_string(r) + "'s type differs from the signature");
        }
      }
      i += 1;
      break;
    } else {
      refuse("not in the StableHLO subset the reference plugin runs");
    }
    for (int replica : instruction.group) {
      if (replica < 0 || replica >= program->num_replicas_) {
        refuse("replica " + std::to_string(replica) + " is not one of the program's " +
               std::to_string(program->num_replicas_));
      }
    }
    types[instruction.result] = instruction.result_type;
    program->instructions_.push_back(std::move(instruction));
  }
  if (program->results_.empty() && !program->result_types_.empty()) {
    refuse("no func.return");
  }
  return program;
}

std::vector<std::vector<HostTensor>> SubsetProgram::Run(
    const std::vector<std::vector<HostTensor>>& arguments) const {
  const size_t replicas = arguments.size();
  std::vector<std::map<std::string, HostTensor>> values(replicas);
  for (size_t r = 0; r < replicas; ++r) {
    if (arguments[r].size() != argument_types_.size()) {
      Refuse("replica " + std::to_string(r) + " has " + std::to_string(arguments[r].size()) +
             " arguments; the program takes " + std::to_string(argument_types_.size()));
    }
    for (size_t a = 0; a < argument_types_.size(); ++a) {
      if (arguments[r][a].bytes->size() != argument_types_[a].bytes()) {
        Refuse("argument " + std::to_string(a) + " of replica " + std::to_string(r) + " has " +
               std::to_string(arguments[r][a].bytes->size()) + " bytes; the program takes " +
               std::to_string(argument_types_[a].bytes()));
      }
      values[r][argument_names_[a]] = {argument_types_[a], arguments[r][a].bytes};
    }
  }
  for (const Instruction& instruction : instructions_) {
    std::vector<HostTensor> out(replicas);
    if (instruction.op == "reshape" || instruction.op == "bitcast_convert") {
      for (size_t r = 0; r < replicas; ++r) {
        out[r] = {instruction.result_type, values[r].at(instruction.operand).bytes};
      }
    } else if (instruction.op == "constant") {
      auto scalar = std::make_shared<Bytes>(ElementBytes(instruction.result_type.element));
      StoreScalar(instruction.result_type.element, instruction.constant, scalar->data());
      for (size_t r = 0; r < replicas; ++r) out[r] = {instruction.result_type, scalar};
    } else if (instruction.op == "broadcast_in_dim") {
      for (size_t r = 0; r < replicas; ++r) {
        const Bytes& scalar = *values[r].at(instruction.operand).bytes;
        auto tensor = std::make_shared<Bytes>();
        tensor->reserve(instruction.result_type.bytes());
        for (size_t k = 0; k < instruction.result_type.elements(); ++k) {
          tensor->insert(tensor->end(), scalar.begin(), scalar.end());
        }
        out[r] = {instruction.result_type, tensor};
      }
    } else if (instruction.op == "elementwise") {
      for (size_t r = 0; r < replicas; ++r) {
        auto result = std::make_shared<Bytes>(*values[r].at(instruction.operand).bytes);
        CombineElements(instruction.result_type.element, result->data(),
                        values[r].at(instruction.operand2).bytes->data(),
                        instruction.result_type.elements(), instruction.combiner);
        out[r] = {instruction.result_type, result};
      }
    } else {
      // A collective: replicas outside the group get zeros (as collective_broadcast defines it;
      // chorus's programs put every replica in the group).
      for (size_t r = 0; r < replicas; ++r) {
        out[r] = {instruction.result_type,
                  std::make_shared<const Bytes>(instruction.result_type.bytes(), 0)};
      }
      std::vector<const Bytes*> group;
      for (int replica : instruction.group) {
        group.push_back(values[static_cast<size_t>(replica)].at(instruction.operand).bytes.get());
      }
      std::shared_ptr<const Bytes> result;
      if (instruction.op == "all_reduce") {
        result = std::make_shared<const Bytes>(
            PairwiseTree(group, instruction.result_type.element, instruction.combiner));
      } else if (instruction.op == "all_gather") {
        auto gathered = std::make_shared<Bytes>();
        for (const Bytes* part : group)
          gathered->insert(gathered->end(), part->begin(), part->end());
        result = gathered;
      } else {  // collective_broadcast: the first of the group's
        result = std::make_shared<const Bytes>(*group.front());
      }
      for (int replica : instruction.group) out[static_cast<size_t>(replica)].bytes = result;
    }
    for (size_t r = 0; r < replicas; ++r) values[r][instruction.result] = out[r];
  }
  std::vector<std::vector<HostTensor>> results(replicas);
  for (size_t r = 0; r < replicas; ++r) {
    for (size_t j = 0; j < results_.size(); ++j) {
      results[r].push_back({result_types_[j], values[r].at(results_[j]).bytes});
    }
  }
  return results;
}

int NumReplicasOfCompileOptions(std::string_view proto) {
  size_t at = 0;
  auto varint = [&](std::string_view bytes, size_t& pos) {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= bytes.size()) Refuse("the compile options end inside a number");
      const auto byte = static_cast<unsigned char>(bytes[pos++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    Refuse("the compile options hold a number longer than 64 bits");
  };
  // Skips a field of `wire` type; only varints and length-delimited fields occur here.
  auto skip = [&](std::string_view bytes, size_t& pos, uint64_t wire) {
    if (wire == 0) {
      varint(bytes, pos);
    } else if (wire == 2) {
      pos += varint(bytes, pos);
    } else {
      Refuse("the compile options hold a field of wire type " + std::to_string(wire));
    }
  };
  int replicas = 1;
  while (at < proto.size()) {
    const uint64_t key = varint(proto, at);
    if (key == ((3 << 3) | 2)) {
      const size_t size = varint(proto, at);
      if (at + size > proto.size()) Refuse("executable_build_options runs past the end");
      const std::string_view build = proto.substr(at, size);
      size_t pos = 0;
      while (pos < build.size()) {
        const uint64_t field = varint(build, pos);
        if (field == (4 << 3)) {
          replicas = static_cast<int>(varint(build, pos));
        } else {
          skip(build, pos, field & 7);
        }
      }
      at += size;
    } else {
      skip(proto, at, key & 7);
    }
  }
  return replicas;
}

}  // namespace chorus::pjrt::reference_plugin
