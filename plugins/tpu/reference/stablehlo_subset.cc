#include "stablehlo_subset.h"

#include <algorithm>
#include <bit>
#include <chorus/plugin_sdk.hpp>
#include <cmath>
#include <cstring>
#include <map>
#include <regex>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace chorus::pjrt::reference_plugin {
namespace {

[[noreturn]] void Refuse(const std::string& why) { throw std::invalid_argument(why); }

// A refusal that names its line already (a line's other refusals get the line added).
class LineError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

size_t ElementBytes(const std::string& element) {
  if (element == "f64" || element == "i64" || element == "ui64") return 8;
  if (element == "f32" || element == "i32" || element == "ui32") return 4;
  if (element == "f16" || element == "bf16" || element == "i16" || element == "ui16") return 2;
  if (element == "i8" || element == "ui8") return 1;
  Refuse("element type " + element + " is not in the subset");
}

bool IsFloat(const std::string& element) {
  return element == "f32" || element == "f64" || element == "f16" || element == "bf16";
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

std::string TypeText(const TensorType& type) {
  std::string text = "tensor<";
  for (int64_t d : type.dims) text += std::to_string(d) + "x";
  return text + type.element + ">";
}

std::string Trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(' ');
  if (begin == std::string::npos) return std::string();
  return text.substr(begin, text.find_last_not_of(' ') - begin + 1);
}

// "a, b, c" -> {"a", "b", "c"}; "" -> {}.
std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> items;
  if (Trim(list).empty()) return items;
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    items.push_back(Trim(list.substr(start, comma - start)));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

// "tensor<4xf32>, tensor<f32>" (a list), or "(tensor<4xf32>, tensor<f32>)" or "tensor<4xf32>"
// (results).
std::vector<TensorType> ParseTypes(const std::string& text, bool results) {
  static const std::regex kType(R"(tensor<([^<>]*)>)");
  std::string list = text;
  if (results && !list.empty() && list.front() == '(') {
    if (list.back() != ')') Refuse("expected a list of tensor types: " + text);
    list = list.substr(1, list.size() - 2);
  } else if (results && Trim(list).empty()) {
    Refuse("expected a tensor type: " + text);
  }
  std::vector<TensorType> types;
  for (const std::string& item : SplitList(list)) {
    std::smatch match;
    if (!std::regex_match(item, match, kType)) Refuse("expected a tensor type: " + item);
    types.push_back(ParseTensorType(match[1]));
  }
  return types;
}

// "0, 2" -> {0, 2}; "" -> {}.
std::vector<int64_t> ParseIntegers(const std::string& list) {
  std::vector<int64_t> values;
  for (const std::string& item : SplitList(list)) {
    if (item.empty() ||
        !std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      Refuse("expected a list of integers: " + list);
    }
    values.push_back(std::stoll(item));
  }
  return values;
}

std::vector<int> ParseGroup(const std::string& text, int num_replicas) {
  // dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, or dense<> : tensor<0x0xi64>: no groups, which is
  // one group of every replica in order (XLA's rule).
  static const std::regex kGroup(R"(dense<\[\[([0-9, ]*)\]\]> : tensor<1x(\d+)xi64>)");
  static const std::regex kNoGroups(R"(dense<> : tensor<0x0xi64>)");
  std::smatch match;
  std::vector<int> group;
  if (std::regex_search(text, match, kGroup)) {
    for (int64_t replica : ParseIntegers(match[1])) {
      if (replica >= num_replicas) {
        Refuse("replica " + std::to_string(replica) + " is not one of the program's " +
               std::to_string(num_replicas));
      }
      group.push_back(static_cast<int>(replica));
    }
    if (group.size() != std::stoul(match[2])) {
      Refuse("replica_groups' shape differs from its list");
    }
  } else if (std::regex_search(text, kNoGroups)) {
    for (int replica = 0; replica < num_replicas; ++replica) group.push_back(replica);
  } else {
    Refuse("replica_groups must be one group: " + text);
  }
  if (group.empty()) Refuse("replica_groups is an empty group");
  for (size_t i = 0; i < group.size(); ++i) {
    if (std::count(group.begin(), group.begin() + static_cast<std::ptrdiff_t>(i), group[i]) > 0) {
      Refuse("replica_groups lists replica " + std::to_string(group[i]) + " twice");
    }
  }
  return group;
}

// ---- Element arithmetic, as chorus's host kernels do it.
enum class Combiner { kAdd, kSubtract, kMultiply, kMinimum, kMaximum, kDivide };

template <Combiner kOp, typename T>
T Wrap(T x, T y) {
  using U = std::make_unsigned_t<T>;
  using Wide = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
  const Wide a = static_cast<U>(x), b = static_cast<U>(y);
  const Wide z = kOp == Combiner::kMultiply ? a * b : kOp == Combiner::kSubtract ? a - b : a + b;
  return static_cast<T>(static_cast<U>(z));
}

Combiner CombinerOf(const std::string& name) {
  if (name == "add") return Combiner::kAdd;
  if (name == "subtract") return Combiner::kSubtract;
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
    return Wrap<kOp>(x, y);
  } else if constexpr (kOp == Combiner::kMultiply) {
    return x * y;
  } else if constexpr (kOp == Combiner::kSubtract) {
    return x - y;
  } else {
    return x + y;
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

// into[i] = op(into[i], other[i]) for i < count.
using CombineFn = void (*)(unsigned char* into, const unsigned char* other, size_t count);

template <Combiner kOp>
CombineFn CombineTyped(const std::string& element) {
  if (element == "f32") return &CombineInto<kOp, float>;
  if (element == "f64") return &CombineInto<kOp, double>;
  if (element == "i32") return &CombineInto<kOp, int32_t>;
  if (element == "i64") return &CombineInto<kOp, int64_t>;
  if (element == "ui8") return &CombineInto<kOp, uint8_t>;
  if (element == "i8") return &CombineInto<kOp, int8_t>;
  if (element == "f16") return &CombineHalfInto<kOp, sdk::HalfToFloat, sdk::FloatToHalf>;
  if (element == "bf16") return &CombineHalfInto<kOp, sdk::Bf16ToFloat, sdk::FloatToBf16>;
  Refuse("arithmetic on " + element + " is not in the subset");
}

CombineFn CombinerFor(const std::string& element, const std::string& combiner) {
  switch (CombinerOf(combiner)) {
    case Combiner::kAdd:
      return CombineTyped<Combiner::kAdd>(element);
    case Combiner::kSubtract:
      return CombineTyped<Combiner::kSubtract>(element);
    case Combiner::kMultiply:
      return CombineTyped<Combiner::kMultiply>(element);
    case Combiner::kMinimum:
      return CombineTyped<Combiner::kMinimum>(element);
    case Combiner::kMaximum:
      return CombineTyped<Combiner::kMaximum>(element);
    case Combiner::kDivide:
      return CombineTyped<Combiner::kDivide>(element);
  }
  Refuse("stablehlo." + combiner + " is not in the subset");
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
  const CombineFn combine = CombinerFor(element, combiner);
  const size_t count = values.front()->size() / ElementBytes(element);
  std::vector<Partial> stack;
  for (const Bytes* value : values) {
    Partial current{*value, 0};
    while (!stack.empty() && stack.back().level == current.level) {
      Bytes left = std::move(stack.back().bytes);
      stack.pop_back();
      combine(left.data(), current.bytes.data(), count);
      current = {std::move(left), current.level + 1};
    }
    stack.push_back(std::move(current));
  }
  Bytes sum = std::move(stack.back().bytes);
  stack.pop_back();
  while (!stack.empty()) {
    Bytes left = std::move(stack.back().bytes);
    stack.pop_back();
    combine(left.data(), sum.data(), count);
    sum = std::move(left);
  }
  return sum;
}

// ---- Unary ops.
enum class Unary { kExponential, kLog, kNegate, kSqrt, kRsqrt, kTanh, kAbs };

bool UnaryOf(const std::string& name, Unary& op) {
  static const std::map<std::string, Unary> kOps = {{"exponential", Unary::kExponential},
                                                    {"log", Unary::kLog},
                                                    {"negate", Unary::kNegate},
                                                    {"sqrt", Unary::kSqrt},
                                                    {"rsqrt", Unary::kRsqrt},
                                                    {"tanh", Unary::kTanh},
                                                    {"abs", Unary::kAbs}};
  const auto found = kOps.find(name);
  if (found == kOps.end()) return false;
  op = found->second;
  return true;
}

// Integers: negate (wrapping) and abs (of the most negative value, itself); the parser refuses
// the others.
template <typename T>
T ApplyUnary(Unary op, T x) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    const T negated = static_cast<T>(static_cast<U>(U{0} - static_cast<U>(x)));
    if (op == Unary::kNegate) return negated;
    if constexpr (std::is_signed_v<T>) {
      if (op == Unary::kAbs) return x < 0 ? negated : x;
    }
    Refuse("a unary op of integers that is not in the subset");
  } else {
    // T is float or double: <cmath>'s overloads of that type.
    switch (op) {
      case Unary::kExponential:
        return std::exp(x);
      case Unary::kLog:
        return std::log(x);
      case Unary::kNegate:
        return -x;
      case Unary::kSqrt:
        return std::sqrt(x);
      case Unary::kRsqrt:
        return T{1} / std::sqrt(x);
      case Unary::kTanh:
        return std::tanh(x);
      case Unary::kAbs:
        return std::abs(x);
    }
    return x;
  }
}

template <typename T>
void UnaryInto(Unary op, unsigned char* data, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    T x;
    std::memcpy(&x, data + i * sizeof(T), sizeof(T));
    const T y = ApplyUnary(op, x);
    std::memcpy(data + i * sizeof(T), &y, sizeof(T));
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void UnaryHalfInto(Unary op, unsigned char* data, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    uint16_t x;
    std::memcpy(&x, data + i * 2, 2);
    const uint16_t y = FromFloat(ApplyUnary(op, ToFloat(x)));
    std::memcpy(data + i * 2, &y, 2);
  }
}

void ApplyUnaryInto(const std::string& element, Unary op, unsigned char* data, size_t count) {
  if (element == "f32") return UnaryInto<float>(op, data, count);
  if (element == "f64") return UnaryInto<double>(op, data, count);
  if (element == "i32") return UnaryInto<int32_t>(op, data, count);
  if (element == "i64") return UnaryInto<int64_t>(op, data, count);
  if (element == "ui8") return UnaryInto<uint8_t>(op, data, count);
  if (element == "i8") return UnaryInto<int8_t>(op, data, count);
  if (element == "f16") return UnaryHalfInto<sdk::HalfToFloat, sdk::FloatToHalf>(op, data, count);
  if (element == "bf16") return UnaryHalfInto<sdk::Bf16ToFloat, sdk::FloatToBf16>(op, data, count);
  Refuse("arithmetic on " + element + " is not in the subset");
}

// ---- Indexing.

// Row-major strides, in elements.
std::vector<size_t> Strides(const std::vector<int64_t>& dims) {
  std::vector<size_t> strides(dims.size());
  size_t stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= static_cast<size_t>(dims[d]);
  }
  return strides;
}

// Calls visit(offset) for every index of `sizes` in row-major order, offset being the sum of
// index[d] * strides[d]. A rank-0 `sizes` has one index.
template <typename Visit>
void ForEachOffset(const std::vector<int64_t>& sizes, const std::vector<size_t>& strides,
                   Visit&& visit) {
  if (std::any_of(sizes.begin(), sizes.end(), [](int64_t size) { return size == 0; })) return;
  std::vector<int64_t> index(sizes.size(), 0);
  size_t offset = 0;
  for (;;) {
    visit(offset);
    size_t d = sizes.size();
    for (;;) {
      if (d == 0) return;
      --d;
      if (++index[d] < sizes[d]) {
        offset += strides[d];
        break;
      }
      offset -= strides[d] * static_cast<size_t>(sizes[d] - 1);
      index[d] = 0;
    }
  }
}

Bytes BroadcastInDim(const Bytes& operand, const TensorType& from, const TensorType& to,
                     const std::vector<int64_t>& dimensions) {
  const size_t size = ElementBytes(to.element);
  const std::vector<size_t> operand_strides = Strides(from.dims);
  // Per result dimension, the operand's stride along it (0 where the operand repeats).
  std::vector<size_t> strides(to.dims.size(), 0);
  for (size_t i = 0; i < dimensions.size(); ++i) {
    if (from.dims[i] != 1) strides[static_cast<size_t>(dimensions[i])] = operand_strides[i];
  }
  Bytes result;
  result.reserve(to.bytes());
  ForEachOffset(to.dims, strides, [&](size_t offset) {
    const auto element = operand.begin() + static_cast<std::ptrdiff_t>(offset * size);
    result.insert(result.end(), element, element + static_cast<std::ptrdiff_t>(size));
  });
  return result;
}

// `dimensions` increasing; see the header for the order of the combines.
Bytes Reduce(const Bytes& operand, const TensorType& from, const Bytes& init,
             const std::vector<int64_t>& dimensions, CombineFn combine) {
  const size_t size = ElementBytes(from.element);
  const std::vector<size_t> strides = Strides(from.dims);
  std::vector<int64_t> kept_sizes, reduced_sizes;
  std::vector<size_t> kept_strides, reduced_strides;
  for (size_t d = 0; d < from.dims.size(); ++d) {
    const bool reduced = std::find(dimensions.begin(), dimensions.end(), static_cast<int64_t>(d)) !=
                         dimensions.end();
    (reduced ? reduced_sizes : kept_sizes).push_back(from.dims[d]);
    (reduced ? reduced_strides : kept_strides).push_back(strides[d]);
  }
  Bytes result;
  ForEachOffset(kept_sizes, kept_strides, [&](size_t base) {
    unsigned char accumulator[8];
    std::memcpy(accumulator, init.data(), size);
    ForEachOffset(reduced_sizes, reduced_strides, [&](size_t offset) {
      combine(accumulator, operand.data() + (base + offset) * size, 1);
    });
    result.insert(result.end(), accumulator, accumulator + size);
  });
  return result;
}

// `values` (of `type`) split along `dimension` into `parts` equal parts (the dimension divides by
// `parts`): part k holds indices [k * size / parts, (k + 1) * size / parts) of that dimension.
std::vector<Bytes> Scatter(const Bytes& values, const TensorType& type, size_t dimension,
                           size_t parts) {
  // Row-major: `outer` runs of the dimension's indices, each index `inner` bytes (the elements
  // of the later dimensions); each run is `row` bytes, of which a part takes `chunk`.
  size_t outer = 1;
  for (size_t d = 0; d < dimension; ++d) outer *= static_cast<size_t>(type.dims[d]);
  size_t inner = ElementBytes(type.element);
  for (size_t d = dimension + 1; d < type.dims.size(); ++d) {
    inner *= static_cast<size_t>(type.dims[d]);
  }
  const size_t row = static_cast<size_t>(type.dims[dimension]) * inner;
  const size_t chunk = row / parts;
  std::vector<Bytes> result(parts);
  for (size_t k = 0; k < parts; ++k) {
    result[k].reserve(outer * chunk);
    for (size_t o = 0; o < outer; ++o) {
      const auto begin = values.begin() + static_cast<std::ptrdiff_t>(o * row + k * chunk);
      result[k].insert(result[k].end(), begin, begin + static_cast<std::ptrdiff_t>(chunk));
    }
  }
  return result;
}

// lhs [.., ..] and rhs [.., ..] contracting lhs_contracting and rhs_contracting (0 or 1);
// result [lhs free, rhs free].
template <typename T>
Bytes DotGeneral(const Bytes& lhs_bytes, const std::vector<int64_t>& lhs_dims,
                 int64_t lhs_contracting, const Bytes& rhs_bytes,
                 const std::vector<int64_t>& rhs_dims, int64_t rhs_contracting) {
  std::vector<T> lhs(lhs_bytes.size() / sizeof(T)), rhs(rhs_bytes.size() / sizeof(T));
  std::memcpy(lhs.data(), lhs_bytes.data(), lhs_bytes.size());
  std::memcpy(rhs.data(), rhs_bytes.data(), rhs_bytes.size());
  const auto lhs_columns = static_cast<size_t>(lhs_dims[1]);
  const auto rhs_columns = static_cast<size_t>(rhs_dims[1]);
  const auto m = static_cast<size_t>(lhs_dims[1 - lhs_contracting]);
  const auto n = static_cast<size_t>(rhs_dims[1 - rhs_contracting]);
  const auto k = static_cast<size_t>(lhs_dims[lhs_contracting]);
  // Strides (in elements) along the free and the contracted dimension of each operand.
  const size_t lhs_free = lhs_contracting == 1 ? lhs_columns : 1;
  const size_t lhs_k = lhs_contracting == 1 ? 1 : lhs_columns;
  const size_t rhs_free = rhs_contracting == 0 ? 1 : rhs_columns;
  const size_t rhs_k = rhs_contracting == 0 ? rhs_columns : 1;
  std::vector<T> result(m * n);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      T sum{0};
      for (size_t p = 0; p < k; ++p) {
        sum += lhs[i * lhs_free + p * lhs_k] * rhs[j * rhs_free + p * rhs_k];
      }
      result[i * n + j] = sum;
    }
  }
  Bytes bytes(result.size() * sizeof(T));
  std::memcpy(bytes.data(), result.data(), bytes.size());
  return bytes;
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
  static const std::regex kFunc(
      R"(^func\.func (public|private) @(\w+)\((.*)\) -> (\(.*\)|tensor<[^<>]*>) \{$)");
  static const std::regex kArgument(
      R"(^(%\w+): tensor<([^<>]*)>(?: \{tf\.aliasing_output = (\d+) : i32\})?$)");
  static const std::regex kValue(R"(^%\w+(?:#\d+)?$)");
  // An op on one line: results, name, operands, attributes, operand types, result types.
  static const std::regex kOp(
      R"re(^(?:(%\w+)(?::(\d+))? = )?"([\w.]+)"\(([^()]*)\)(?: \{(.*)\})? : \(([^()]*)\) -> (.+)$)re");
  // An op with a region: all_reduce, reduce_scatter and reduce.
  static const std::regex kRegionOpen(R"re(^(%\w+) = "stablehlo\.(\w+)"\(([^()]*)\) \(\{$)re");
  static const std::regex kBlock(R"(^\^bb0\((%\w+): tensor<(\w+)>, (%\w+): tensor<(\w+)>\):$)");
  static const std::regex kCombiner(
      R"re(^(%\w+) = "stablehlo\.(add|multiply|minimum|maximum)"\((%\w+), (%\w+)\) : .*$)re");
  static const std::regex kRegionReturn(R"re(^"stablehlo\.return"\((%\w+)\) : .*$)re");
  static const std::regex kAllReduceClose(
      R"re(^\}\) \{replica_groups = (.*)\} : \(tensor<([^<>]*)>\) -> tensor<([^<>]*)>$)re");
  static const std::regex kReduceScatterClose(
      R"re(^\}\) \{replica_groups = (dense<[^<>]*> : tensor<\w+>), scatter_dimension = (-?\d+) : i64\} : \(tensor<([^<>]*)>\) -> tensor<([^<>]*)>$)re");
  static const std::regex kReduceClose(
      R"re(^\}\) \{dimensions = array<i64(?:: ([0-9, ]*))?>\} : \(tensor<([^<>]*)>, tensor<([^<>]*)>\) -> tensor<([^<>]*)>$)re");
  static const std::regex kReturn(R"re(^"func\.return"\(([^()]*)\) : .*$)re");
  static const std::regex kBroadcastDimensions(
      R"(^broadcast_dimensions = array<i64(?:: ([0-9, ]*))?>$)");
  static const std::regex kConstant(R"(^value = dense<([-+0-9.eE]+)> : tensor<([^<>]*)>$)");
  static const std::regex kDot(
      R"(^dot_dimension_numbers = #stablehlo\.dot<lhs_contracting_dimensions = \[([01])\], rhs_contracting_dimensions = \[([01])\]>$)");
  static const std::regex kCallee(R"(^callee = @(\w+)$)");

  auto program = std::make_shared<SubsetProgram>();
  // The non-empty lines, without their indentation, and their numbers in the text.
  std::vector<std::string> lines;
  std::vector<size_t> numbers;
  size_t start = 0, number = 0;
  while (start < mlir.size()) {
    size_t end = mlir.find('\n', start);
    if (end == std::string_view::npos) end = mlir.size();
    ++number;
    std::string line = Trim(std::string(mlir.substr(start, end - start)));
    if (!line.empty()) {
      lines.push_back(std::move(line));
      numbers.push_back(number);
    }
    start = end + 1;
  }
  auto refuse_at = [&](size_t at, const std::string& why) {
    const size_t shown = at < lines.size() ? numbers[at] : number + 1;
    throw LineError("line " + std::to_string(shown) + " (" +
                    (at < lines.size() ? lines[at] : "end") + "): " + why);
  };
  // Runs read(), adding line `at` to what it refuses.
  auto on_line = [&](size_t at, auto&& read) {
    try {
      read();
    } catch (const LineError&) {
      throw;
    } catch (const std::logic_error& error) {  // ours, and std::stoi's
      refuse_at(at, error.what());
    }
  };

  std::smatch match;
  if (lines.empty() || !std::regex_match(lines[0], match, kModule)) {
    refuse_at(0, "expected chorus's module header with mhlo.num_replicas");
  }
  on_line(0, [&] { program->num_replicas_ = std::stoi(match[1]); });

  // Every function's signature first, so that a call may precede its callee.
  std::map<std::string, size_t> function_index;
  std::vector<std::vector<std::string>> argument_names;
  bool has_main = false;
  for (size_t at = 1; at < lines.size(); ++at) {
    if (!std::regex_match(lines[at], match, kFunc)) continue;
    on_line(at, [&] {
      Function function;
      function.name = match[2];
      const bool is_main = function.name == "main";
      if ((match[1] == "public") != is_main) Refuse("only @main is public, and it is");
      if (!function_index.emplace(function.name, program->functions_.size()).second) {
        Refuse("@" + function.name + " is defined twice");
      }
      std::vector<std::string> names;
      for (const std::string& argument : SplitList(match[3])) {
        std::smatch parts;
        if (!std::regex_match(argument, parts, kArgument)) {
          Refuse("expected an argument %name: tensor<...>: " + argument);
        }
        if (std::find(names.begin(), names.end(), parts[1].str()) != names.end()) {
          Refuse("argument " + parts[1].str() + " is named twice");
        }
        names.push_back(parts[1]);
        function.argument_types.push_back(ParseTensorType(parts[2]));
        // tf.aliasing_output means nothing on a private function.
        if (is_main) program->aliasing_.push_back(parts[3].matched ? std::stoi(parts[3]) : -1);
      }
      function.result_types = ParseTypes(match[4], true);
      if (is_main) {
        program->main_ = program->functions_.size();
        has_main = true;
      }
      argument_names.push_back(std::move(names));
      program->functions_.push_back(std::move(function));
    });
  }
  if (!has_main) refuse_at(1, "expected func.func public @main");

  // Per function, its calls: (callee, line).
  std::vector<std::vector<std::pair<size_t, size_t>>> calls(program->functions_.size());
  // Reads the body of function `index`, whose header is line i, up to its closing "}"; leaves i
  // after it.
  size_t i = 1;
  auto read_body = [&](size_t index) {
    Function& function = program->functions_[index];
    std::map<std::string, size_t> slots;  // value name -> slot
    std::vector<TensorType> types;        // per slot
    auto define = [&](const std::string& name, const TensorType& type) {
      if (!slots.emplace(name, types.size()).second) Refuse(name + " is defined twice");
      types.push_back(type);
    };
    for (size_t a = 0; a < function.argument_types.size(); ++a) {
      define(argument_names[index][a], function.argument_types[a]);
    }
    auto operand_slot = [&](const std::string& name) {
      if (!std::regex_match(name, kValue)) Refuse("expected a value: " + name);
      auto found = slots.find(name);
      if (found == slots.end()) Refuse("operand " + name + " is not defined before");
      return found->second;
    };
    // Operands named by `list`, with their types as the line gives them.
    auto operands = [&](const std::string& list, const std::vector<TensorType>& declared) {
      const std::vector<std::string> names = SplitList(list);
      if (names.size() != declared.size()) {
        Refuse(std::to_string(names.size()) + " operands of " + std::to_string(declared.size()) +
               " types");
      }
      std::vector<size_t> result;
      for (size_t k = 0; k < names.size(); ++k) {
        result.push_back(operand_slot(names[k]));
        if (types[result.back()] != declared[k]) {
          Refuse("operand type differs: " + names[k] + " is " + TypeText(types[result.back()]) +
                 ", the line says " + TypeText(declared[k]));
        }
      }
      return result;
    };
    // The combiner region of an op on values of `element`: lines i + 1 ... i + 3.
    auto read_region = [&](const std::string& element) {
      std::smatch block, combined;
      if (++i >= lines.size() || !std::regex_match(lines[i], block, kBlock) ||
          block[2] != element || block[4] != element) {
        refuse_at(i, "expected the combiner's block of two " + element + " scalars");
      }
      if (++i >= lines.size() || !std::regex_match(lines[i], combined, kCombiner)) {
        refuse_at(i, "expected one of add, multiply, minimum, maximum");
      }
      if (combined[3] != block[1] || combined[4] != block[3]) {
        refuse_at(i, "the combiner must combine the block's two arguments, in order");
      }
      const std::string combiner = combined[2];
      on_line(i, [&] { CombinerFor(element, combiner); });
      std::smatch returned;
      if (++i >= lines.size() || !std::regex_match(lines[i], returned, kRegionReturn) ||
          returned[1] != combined[1]) {
        refuse_at(i, "expected stablehlo.return of the combined value");
      }
      return combiner;
    };

    for (++i;; ++i) {
      if (i >= lines.size()) refuse_at(i, "expected func.return");
      const size_t line = i;
      if (std::regex_match(lines[i], match, kReturn)) {
        on_line(line, [&] {
          for (const std::string& name : SplitList(match[1])) {
            function.results.push_back(operand_slot(name));
          }
          if (function.results.size() != function.result_types.size()) {
            Refuse("returns " + std::to_string(function.results.size()) + " values for " +
                   std::to_string(function.result_types.size()) + " results");
          }
          for (size_t r = 0; r < function.results.size(); ++r) {
            if (types[function.results[r]] != function.result_types[r]) {
              Refuse("result " + std::to_string(r) + "'s type differs from the signature");
            }
          }
        });
        if (++i >= lines.size() || lines[i] != "}") {
          refuse_at(i, "expected } closing @" + function.name + " after its func.return");
        }
        ++i;
        function.slots = types.size();
        return;
      }
      Instruction instruction;
      std::vector<std::string> names;  // what the results are called
      if (std::regex_match(lines[i], match, kRegionOpen)) {
        const std::string op = match[2];
        const std::vector<std::string> listed = SplitList(match[3]);
        names.push_back(match[1]);
        instruction.op = op;
        std::vector<size_t> slots_of;
        on_line(line, [&] {
          if (op != "all_reduce" && op != "reduce_scatter" && op != "reduce") {
            Refuse("stablehlo." + op + " is not in the subset");
          }
          if (listed.size() != (op == "reduce" ? 2u : 1u)) {
            Refuse(op == "reduce" ? "reduce of one operand and one init value only"
                                  : op + " of one operand only");
          }
          for (const std::string& name : listed) slots_of.push_back(operand_slot(name));
        });
        const TensorType from = types[slots_of[0]];
        instruction.combiner = read_region(from.element);
        std::smatch close;
        if (op == "all_reduce") {
          if (++i >= lines.size() || !std::regex_match(lines[i], close, kAllReduceClose)) {
            refuse_at(i, "expected the end of all_reduce with its replica_groups");
          }
          on_line(i, [&] {
            instruction.group = ParseGroup(close[1], program->num_replicas_);
            instruction.result_types = {ParseTensorType(close[3])};
            if (ParseTensorType(close[2]) != from || instruction.result_types[0] != from) {
              Refuse("all_reduce's types differ");
            }
          });
        } else if (op == "reduce_scatter") {
          if (++i >= lines.size() || !std::regex_match(lines[i], close, kReduceScatterClose)) {
            refuse_at(i,
                      "expected the end of reduce_scatter with its replica_groups and "
                      "scatter_dimension");
          }
          on_line(i, [&] {
            instruction.group = ParseGroup(close[1], program->num_replicas_);
            if (ParseTensorType(close[3]) != from) Refuse("reduce_scatter's operand type differs");
            const int64_t dimension = std::stoll(close[2]);
            if (dimension < 0 || dimension >= static_cast<int64_t>(from.dims.size())) {
              Refuse("reduce_scatter's scatter_dimension " + std::to_string(dimension) +
                     " is not a dimension of its operand " + TypeText(from));
            }
            const auto parts = static_cast<int64_t>(instruction.group.size());
            const int64_t size = from.dims[static_cast<size_t>(dimension)];
            if (size % parts != 0) {
              Refuse("reduce_scatter's scatter dimension (" + std::to_string(size) +
                     ") does not split into the group's " + std::to_string(parts) + " equal parts");
            }
            TensorType expected = from;
            expected.dims[static_cast<size_t>(dimension)] = size / parts;
            instruction.dimensions = {dimension};
            instruction.result_types = {ParseTensorType(close[4])};
            if (instruction.result_types[0] != expected) {
              Refuse("reduce_scatter's result type is not " + TypeText(expected));
            }
          });
        } else {
          if (++i >= lines.size() || !std::regex_match(lines[i], close, kReduceClose)) {
            refuse_at(i, "expected the end of reduce with its dimensions");
          }
          on_line(i, [&] {
            const TensorType init = types[slots_of[1]];
            if (ParseTensorType(close[2]) != from || ParseTensorType(close[3]) != init) {
              Refuse("operand type differs");
            }
            if (!init.dims.empty() || init.element != from.element) {
              Refuse("reduce's init value must be a scalar of its operand's element type");
            }
            instruction.dimensions = ParseIntegers(close[1]);
            std::vector<int64_t> sorted = instruction.dimensions;
            std::sort(sorted.begin(), sorted.end());
            if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() ||
                (!sorted.empty() && sorted.back() >= static_cast<int64_t>(from.dims.size()))) {
              Refuse("reduce's dimensions are not distinct dimensions of its operand");
            }
            instruction.dimensions = sorted;
            TensorType expected{from.element, {}};
            for (size_t d = 0; d < from.dims.size(); ++d) {
              if (!std::binary_search(sorted.begin(), sorted.end(), static_cast<int64_t>(d))) {
                expected.dims.push_back(from.dims[d]);
              }
            }
            instruction.result_types = {ParseTensorType(close[4])};
            if (instruction.result_types[0] != expected) {
              Refuse("reduce's result type is not its operand's without the reduced dimensions (" +
                     TypeText(expected) + ")");
            }
          });
        }
        instruction.operands = slots_of;
      } else if (std::regex_match(lines[i], match, kOp)) {
        on_line(line, [&] {
          const std::string op = match[3];
          const std::string attributes = match[5];
          std::vector<TensorType> results = ParseTypes(match[7], true);
          if (!match[1].matched) {
            if (!results.empty()) Refuse("the op's results are not named");
          } else if (match[2].matched) {
            const int count = std::stoi(match[2]);
            if (static_cast<size_t>(count) != results.size()) {
              Refuse(match[1].str() + ":" + match[2].str() + " names " + std::to_string(count) +
                     " results of " + std::to_string(results.size()));
            }
            for (int r = 0; r < count; ++r) {
              names.push_back(match[1].str() + "#" + std::to_string(r));
            }
          } else {
            if (results.size() != 1) {
              Refuse(match[1].str() + " names one result of " + std::to_string(results.size()));
            }
            names.push_back(match[1]);
          }
          instruction.result_types = results;
          if (op == "func.call") {
            std::smatch callee;
            if (!std::regex_match(attributes, callee, kCallee)) Refuse("expected {callee = @name}");
            const auto found = function_index.find(callee[1]);
            if (found == function_index.end()) Refuse("unknown callee @" + callee[1].str());
            const Function& called = program->functions_[found->second];
            instruction.op = "call";
            instruction.callee = found->second;
            const std::vector<TensorType> declared = ParseTypes(match[6], false);
            if (declared != called.argument_types) {
              std::string takes;
              for (const TensorType& type : called.argument_types) {
                takes += (takes.empty() ? "" : ", ") + TypeText(type);
              }
              Refuse("the call's operand types differ from @" + called.name + "'s arguments (" +
                     takes + ")");
            }
            if (results != called.result_types) {
              Refuse("the call's result types differ from @" + called.name + "'s results");
            }
            instruction.operands = operands(match[4], declared);
            calls[index].emplace_back(found->second, line);
            return;
          }
          if (op.rfind("stablehlo.", 0) != 0) Refuse(op + " is not in the subset");
          const std::string name = op.substr(10);
          instruction.op = name;
          Unary unary{};
          const bool is_unary = UnaryOf(name, unary);
          const bool is_binary = name == "add" || name == "subtract" || name == "multiply" ||
                                 name == "minimum" || name == "maximum" || name == "divide";
          if (!is_unary && !is_binary && name != "reshape" && name != "bitcast_convert" &&
              name != "broadcast_in_dim" && name != "collective_broadcast" &&
              name != "all_gather" && name != "constant" && name != "dot_general") {
            Refuse("stablehlo." + name + " is not in the subset");
          }
          if (results.size() != 1) Refuse("stablehlo." + name + " has one result");
          const TensorType& to = results[0];
          instruction.operands = operands(match[4], ParseTypes(match[6], false));
          std::vector<TensorType> from;
          for (size_t slot : instruction.operands) from.push_back(types[slot]);
          const size_t arity = name == "constant" ? 0 : is_binary || name == "dot_general" ? 2 : 1;
          if (from.size() != arity) {
            Refuse("stablehlo." + name + " takes " + std::to_string(arity) + " operands");
          }
          const bool takes_attributes = name == "broadcast_in_dim" ||
                                        name == "collective_broadcast" || name == "all_gather" ||
                                        name == "constant" || name == "dot_general";
          if (match[5].matched != takes_attributes) {
            Refuse(takes_attributes ? "expected the op's attributes" : "unexpected attributes");
          }
          if (name == "reshape" || name == "bitcast_convert") {
            if (to.bytes() != from[0].bytes()) Refuse("result size differs");
          } else if (name == "broadcast_in_dim") {
            std::smatch dimensions;
            if (!std::regex_match(attributes, dimensions, kBroadcastDimensions)) {
              Refuse("expected broadcast_dimensions = array<i64: ...>");
            }
            instruction.dimensions = ParseIntegers(dimensions[1]);
            bool fits = to.element == from[0].element &&
                        instruction.dimensions.size() == from[0].dims.size();
            for (size_t d = 0; fits && d < instruction.dimensions.size(); ++d) {
              const int64_t target = instruction.dimensions[d];
              fits =
                  target < static_cast<int64_t>(to.dims.size()) &&
                  std::count(instruction.dimensions.begin(), instruction.dimensions.end(),
                             target) == 1 &&
                  (from[0].dims[d] == 1 || from[0].dims[d] == to.dims[static_cast<size_t>(target)]);
            }
            if (!fits) Refuse("broadcast_in_dim's broadcast_dimensions do not fit its types");
          } else if (name == "collective_broadcast") {
            instruction.group = ParseGroup(attributes, program->num_replicas_);
            if (to.bytes() != from[0].bytes()) Refuse("result size differs");
          } else if (name == "all_gather") {
            if (attributes.find("all_gather_dim = 0 : i64") == std::string::npos) {
              Refuse("only all_gather_dim = 0");
            }
            instruction.group = ParseGroup(attributes, program->num_replicas_);
            if (to.bytes() != from[0].bytes() * instruction.group.size()) {
              Refuse("result size is not the group's");
            }
          } else if (name == "constant") {
            std::smatch value;
            if (!std::regex_match(attributes, value, kConstant)) {
              Refuse("expected value = dense<number> : tensor<...>");
            }
            if (ParseTensorType(value[2]) != to) {
              Refuse("the constant's type differs from its result's");
            }
            if (!to.dims.empty()) Refuse("only a scalar constant");
            size_t parsed = 0;
            instruction.constant = std::stod(value[1], &parsed);
            if (parsed != value[1].str().size()) Refuse("the constant's value is not a number");
            unsigned char stored[8];
            StoreScalar(to.element, instruction.constant, stored);
          } else if (is_binary) {
            instruction.op = "elementwise";
            instruction.combiner = name;
            if (from[0] != from[1] || to != from[0]) {
              Refuse("an element-wise op of tensors of different types");
            }
            CombinerFor(to.element, name);
          } else if (is_unary) {
            instruction.op = "unary";
            instruction.combiner = name;
            if (to != from[0]) {
              Refuse("stablehlo." + name + "'s result type differs from its operand's");
            }
            const bool integer_ok =
                (unary == Unary::kNegate && (to.element == "i32" || to.element == "i64" ||
                                             to.element == "i8" || to.element == "ui8")) ||
                (unary == Unary::kAbs &&
                 (to.element == "i32" || to.element == "i64" || to.element == "i8"));
            if (!IsFloat(to.element) && !integer_ok) {
              Refuse("stablehlo." + name + " of " + to.element + " is not in the subset");
            }
          } else {  // dot_general
            std::smatch numbers_of;
            if (!std::regex_match(attributes, numbers_of, kDot)) {
              Refuse(
                  "only dot_general contracting one dimension of each operand, without batching "
                  "dimensions");
            }
            instruction.dimensions = {std::stoll(numbers_of[1]), std::stoll(numbers_of[2])};
            if (from[0].dims.size() != 2 || from[1].dims.size() != 2) {
              Refuse("only dot_general of rank-2 operands");
            }
            if (from[0].element != from[1].element || to.element != from[0].element ||
                (to.element != "f32" && to.element != "f64")) {
              Refuse("only dot_general of f32 or f64 operands and result");
            }
            const int64_t lc = instruction.dimensions[0], rc = instruction.dimensions[1];
            if (from[0].dims[static_cast<size_t>(lc)] != from[1].dims[static_cast<size_t>(rc)]) {
              Refuse("dot_general's contracting dimensions differ in size");
            }
            const TensorType expected{to.element,
                                      {from[0].dims[static_cast<size_t>(1 - lc)],
                                       from[1].dims[static_cast<size_t>(1 - rc)]}};
            if (to != expected) {
              Refuse("dot_general's result type is not " + TypeText(expected));
            }
          }
        });
      } else {
        refuse_at(i, "not in the StableHLO subset the reference plugin runs");
      }
      instruction.result = types.size();
      on_line(line, [&] {
        for (size_t r = 0; r < names.size(); ++r) define(names[r], instruction.result_types[r]);
      });
      function.instructions.push_back(std::move(instruction));
    }
  };
  for (;;) {
    if (i >= lines.size()) refuse_at(i, "expected } closing the module");
    if (lines[i] == "}") {
      if (i + 1 < lines.size()) refuse_at(i + 1, "text after the module's end");
      break;
    }
    if (!std::regex_match(lines[i], match, kFunc)) {
      refuse_at(i, i == 1 ? "expected func.func public @main"
                          : "expected func.func or } closing the module");
    }
    read_body(function_index.at(match[2]));
  }

  // No recursion: a depth-first walk of the calls, refusing a call back into a function on the
  // walk's path.
  enum class Mark { kUnvisited, kOnPath, kDone };
  std::vector<Mark> marks(program->functions_.size(), Mark::kUnvisited);
  std::vector<size_t> path;
  auto walk = [&](auto&& self, size_t caller) -> void {
    marks[caller] = Mark::kOnPath;
    path.push_back(caller);
    for (const auto& [callee, line] : calls[caller]) {
      if (marks[callee] == Mark::kOnPath) {
        std::string cycle;
        for (auto at = std::find(path.begin(), path.end(), callee); at != path.end(); ++at) {
          cycle += "@" + program->functions_[*at].name + " -> ";
        }
        refuse_at(line, "a recursive call (" + cycle + "@" + program->functions_[callee].name +
                            ") is not in the subset");
      }
      if (marks[callee] == Mark::kUnvisited) self(self, callee);
    }
    path.pop_back();
    marks[caller] = Mark::kDone;
  };
  for (size_t f = 0; f < program->functions_.size(); ++f) {
    if (marks[f] == Mark::kUnvisited) walk(walk, f);
  }
  return program;
}

std::vector<std::vector<HostTensor>> SubsetProgram::Run(
    const std::vector<std::vector<HostTensor>>& arguments) const {
  const size_t replicas = arguments.size();
  if (replicas != static_cast<size_t>(num_replicas_)) {
    Refuse("the arguments of " + std::to_string(replicas) + " replicas; the program runs on " +
           std::to_string(num_replicas_));
  }
  const std::vector<TensorType>& argument_types = Main().argument_types;
  std::vector<std::vector<HostTensor>> typed(replicas);
  for (size_t r = 0; r < replicas; ++r) {
    if (arguments[r].size() != argument_types.size()) {
      Refuse("replica " + std::to_string(r) + " has " + std::to_string(arguments[r].size()) +
             " arguments; the program takes " + std::to_string(argument_types.size()));
    }
    for (size_t a = 0; a < argument_types.size(); ++a) {
      if (arguments[r][a].bytes->size() != argument_types[a].bytes()) {
        Refuse("argument " + std::to_string(a) + " of replica " + std::to_string(r) + " has " +
               std::to_string(arguments[r][a].bytes->size()) + " bytes; the program takes " +
               std::to_string(argument_types[a].bytes()));
      }
      typed[r].push_back({argument_types[a], arguments[r][a].bytes});
    }
  }
  return Execute(Main(), typed);
}

std::vector<std::vector<HostTensor>> SubsetProgram::Execute(
    const Function& function, const std::vector<std::vector<HostTensor>>& arguments) const {
  const size_t replicas = arguments.size();
  std::vector<std::vector<HostTensor>> values(replicas, std::vector<HostTensor>(function.slots));
  for (size_t r = 0; r < replicas; ++r) {
    std::copy(arguments[r].begin(), arguments[r].end(), values[r].begin());
  }
  for (const Instruction& instruction : function.instructions) {
    auto operand = [&](size_t r, size_t k) -> const HostTensor& {
      return values[r][instruction.operands[k]];
    };
    if (instruction.op == "call") {
      std::vector<std::vector<HostTensor>> call_arguments(replicas);
      for (size_t r = 0; r < replicas; ++r) {
        for (size_t k = 0; k < instruction.operands.size(); ++k) {
          call_arguments[r].push_back(operand(r, k));
        }
      }
      const std::vector<std::vector<HostTensor>> results =
          Execute(functions_[instruction.callee], call_arguments);
      for (size_t r = 0; r < replicas; ++r) {
        for (size_t j = 0; j < results[r].size(); ++j) {
          values[r][instruction.result + j] = results[r][j];
        }
      }
      continue;
    }
    const TensorType& type = instruction.result_types.front();
    std::vector<HostTensor> out(replicas);
    if (instruction.op == "reshape" || instruction.op == "bitcast_convert") {
      for (size_t r = 0; r < replicas; ++r) out[r] = {type, operand(r, 0).bytes};
    } else if (instruction.op == "constant") {
      auto scalar = std::make_shared<Bytes>(ElementBytes(type.element));
      StoreScalar(type.element, instruction.constant, scalar->data());
      for (size_t r = 0; r < replicas; ++r) out[r] = {type, scalar};
    } else if (instruction.op == "broadcast_in_dim") {
      for (size_t r = 0; r < replicas; ++r) {
        out[r] = {type,
                  std::make_shared<const Bytes>(BroadcastInDim(
                      *operand(r, 0).bytes, operand(r, 0).type, type, instruction.dimensions))};
      }
    } else if (instruction.op == "elementwise") {
      const CombineFn combine = CombinerFor(type.element, instruction.combiner);
      for (size_t r = 0; r < replicas; ++r) {
        auto result = std::make_shared<Bytes>(*operand(r, 0).bytes);
        combine(result->data(), operand(r, 1).bytes->data(), type.elements());
        out[r] = {type, result};
      }
    } else if (instruction.op == "unary") {
      Unary op{};
      UnaryOf(instruction.combiner, op);
      for (size_t r = 0; r < replicas; ++r) {
        auto result = std::make_shared<Bytes>(*operand(r, 0).bytes);
        ApplyUnaryInto(type.element, op, result->data(), type.elements());
        out[r] = {type, result};
      }
    } else if (instruction.op == "reduce") {
      const CombineFn combine = CombinerFor(type.element, instruction.combiner);
      for (size_t r = 0; r < replicas; ++r) {
        out[r] = {type, std::make_shared<const Bytes>(
                            Reduce(*operand(r, 0).bytes, operand(r, 0).type, *operand(r, 1).bytes,
                                   instruction.dimensions, combine))};
      }
    } else if (instruction.op == "dot_general") {
      for (size_t r = 0; r < replicas; ++r) {
        const HostTensor& lhs = operand(r, 0);
        const HostTensor& rhs = operand(r, 1);
        const int64_t lc = instruction.dimensions[0], rc = instruction.dimensions[1];
        out[r] = {type,
                  std::make_shared<const Bytes>(
                      type.element == "f64" ? DotGeneral<double>(*lhs.bytes, lhs.type.dims, lc,
                                                                 *rhs.bytes, rhs.type.dims, rc)
                                            : DotGeneral<float>(*lhs.bytes, lhs.type.dims, lc,
                                                                *rhs.bytes, rhs.type.dims, rc))};
      }
    } else {
      // A collective: replicas outside the group get zeros (as collective_broadcast defines it;
      // chorus's programs put every replica in the group).
      for (size_t r = 0; r < replicas; ++r) {
        out[r] = {type, std::make_shared<const Bytes>(type.bytes(), 0)};
      }
      std::vector<const Bytes*> group;
      for (int replica : instruction.group) {
        group.push_back(operand(static_cast<size_t>(replica), 0).bytes.get());
      }
      std::shared_ptr<const Bytes> result;
      if (instruction.op == "all_reduce") {
        result =
            std::make_shared<const Bytes>(PairwiseTree(group, type.element, instruction.combiner));
      } else if (instruction.op == "reduce_scatter") {
        // The all-reduce's values (the same tree), then the group's k-th replica gets part k.
        const Bytes reduced = PairwiseTree(group, type.element, instruction.combiner);
        std::vector<Bytes> parts =
            Scatter(reduced, operand(static_cast<size_t>(instruction.group.front()), 0).type,
                    static_cast<size_t>(instruction.dimensions[0]), instruction.group.size());
        for (size_t k = 0; k < parts.size(); ++k) {
          out[static_cast<size_t>(instruction.group[k])].bytes =
              std::make_shared<const Bytes>(std::move(parts[k]));
        }
      } else if (instruction.op == "all_gather") {
        auto gathered = std::make_shared<Bytes>();
        for (const Bytes* part : group)
          gathered->insert(gathered->end(), part->begin(), part->end());
        result = gathered;
      } else {  // collective_broadcast: the first of the group's
        result = std::make_shared<const Bytes>(*group.front());
      }
      if (result != nullptr) {
        for (int replica : instruction.group) out[static_cast<size_t>(replica)].bytes = result;
      }
    }
    for (size_t r = 0; r < replicas; ++r) values[r][instruction.result] = out[r];
  }
  std::vector<std::vector<HostTensor>> results(replicas);
  for (size_t r = 0; r < replicas; ++r) {
    for (size_t j = 0; j < function.results.size(); ++j) {
      results[r].push_back({function.result_types[j], values[r][function.results[j]].bytes});
    }
  }
  return results;
}

namespace {

// The protobuf wire format, as far as the compile options need it: varints and length-delimited
// fields (a packed repeated field is one of those).
struct ProtoReader {
  std::string_view bytes;
  size_t pos = 0;
  bool done() const { return pos >= bytes.size(); }
  uint64_t Varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= bytes.size()) Refuse("the compile options end inside a number");
      const auto byte = static_cast<unsigned char>(bytes[pos++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    Refuse("the compile options hold a number longer than 64 bits");
  }
  std::string_view Delimited(const char* what) {
    const uint64_t size = Varint();
    if (size > bytes.size() - pos) Refuse(std::string(what) + " runs past the end");
    const std::string_view field = bytes.substr(pos, size);
    pos += size;
    return field;
  }
  void Skip(uint64_t wire) {
    if (wire == 0) {
      Varint();
    } else if (wire == 2) {
      Delimited("a field");
    } else {
      Refuse("the compile options hold a field of wire type " + std::to_string(wire));
    }
  }
};

// xla.DeviceAssignmentProto: replica_count (1), computation_count (2), computation_devices (3)
// { replica_device_ids (1), packed or not }.
std::vector<int64_t> ReadDeviceAssignment(std::string_view bytes) {
  ProtoReader reader{bytes};
  int64_t replica_count = 0, computation_count = 0;
  std::vector<std::vector<int64_t>> computations;
  while (!reader.done()) {
    const uint64_t key = reader.Varint();
    if (key == (1 << 3)) {
      replica_count = static_cast<int64_t>(reader.Varint());
    } else if (key == (2 << 3)) {
      computation_count = static_cast<int64_t>(reader.Varint());
    } else if (key == ((3 << 3) | 2)) {
      ProtoReader device{reader.Delimited("a computation's devices")};
      std::vector<int64_t> ids;
      while (!device.done()) {
        const uint64_t field = device.Varint();
        if (field == (1 << 3)) {
          ids.push_back(static_cast<int64_t>(device.Varint()));
        } else if (field == ((1 << 3) | 2)) {
          ProtoReader packed{device.Delimited("replica_device_ids")};
          while (!packed.done()) ids.push_back(static_cast<int64_t>(packed.Varint()));
        } else {
          device.Skip(field & 7);
        }
      }
      computations.push_back(std::move(ids));
    } else {
      reader.Skip(key & 7);
    }
  }
  if (computation_count != 1 || computations.size() != 1) {
    Refuse("the device assignment has " + std::to_string(computations.size()) +
           " computations; the reference plugin runs one partition");
  }
  if (static_cast<int64_t>(computations.front().size()) != replica_count) {
    Refuse("the device assignment lists " + std::to_string(computations.front().size()) +
           " devices for " + std::to_string(replica_count) + " replicas");
  }
  return computations.front();
}

}  // namespace

CompileOptions ReadCompileOptions(std::string_view proto) {
  CompileOptions options;
  ProtoReader reader{proto};
  while (!reader.done()) {
    const uint64_t key = reader.Varint();
    if (key != ((3 << 3) | 2)) {
      reader.Skip(key & 7);
      continue;
    }
    ProtoReader build{reader.Delimited("executable_build_options")};
    while (!build.done()) {
      const uint64_t field = build.Varint();
      if (field == (4 << 3)) {
        options.num_replicas = static_cast<int>(build.Varint());
      } else if (field == ((9 << 3) | 2)) {
        options.device_ids = ReadDeviceAssignment(build.Delimited("device_assignment"));
      } else {
        build.Skip(field & 7);
      }
    }
  }
  return options;
}

}  // namespace chorus::pjrt::reference_plugin
