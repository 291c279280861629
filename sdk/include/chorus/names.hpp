// The names of plugin.h's data types, reduce operations and collective operations: the one table
// the core, the plugins and the tools print and parse. The names are part of the user interface
// (chorus-bench options, CHORUS_ALGORITHM, tuning files, messages that tests match): never
// rename one. Header-only, C++17; status names are chorus::StatusName (chorus/error.hpp).
#ifndef CHORUS_NAMES_HPP_
#define CHORUS_NAMES_HPP_

#include <chorus/plugin.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace chorus::sdk {

// Indexed by the enum's value.
inline constexpr std::array<const char*, CHORUS_DTYPE_COUNT> kDtypeNames = {
    "f32", "f64", "f16", "bf16", "i32", "i64", "u8", "i8"};
inline constexpr std::array<const char*, CHORUS_REDUCE_OP_COUNT> kReduceOpNames = {
    "sum", "prod", "min", "max", "mean"};
inline constexpr std::array<const char*, CHORUS_OP_BARRIER + 1> kCollectiveOpNames = {
    "all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"};

namespace names_internal {
template <typename Table>
constexpr const char* NameIn(const Table& names, int64_t value, const char* unknown) {
  return value >= 0 && value < static_cast<int64_t>(names.size())
             ? names[static_cast<size_t>(value)]
             : unknown;
}
template <typename Enum, typename Table>
constexpr std::optional<Enum> ValueIn(const Table& names, std::string_view name) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (name == names[i]) return static_cast<Enum>(i);
  }
  return std::nullopt;
}
}  // namespace names_internal

// The name of a value, or `unknown` for one that is not of the enum. They take any integer, so
// that a value read from another rank can be named before it is trusted.
constexpr const char* DtypeName(int64_t dtype, const char* unknown = "?") {
  return names_internal::NameIn(kDtypeNames, dtype, unknown);
}
constexpr const char* ReduceOpName(int64_t op, const char* unknown = "?") {
  return names_internal::NameIn(kReduceOpNames, op, unknown);
}
constexpr const char* CollectiveOpName(int64_t op, const char* unknown = "?") {
  return names_internal::NameIn(kCollectiveOpNames, op, unknown);
}

// An operation as a code in a signature that ranks exchange to compare their calls: the enum
// plus one, so that zeroed memory (0) is no operation. SignatureCodeName names a code.
constexpr int64_t SignatureCode(chorus_collective_op op) { return static_cast<int64_t>(op) + 1; }
constexpr const char* SignatureCodeName(int64_t code, const char* unknown = "?") {
  return code > 0 ? CollectiveOpName(code - 1, unknown) : unknown;
}

// The value a name stands for; nullopt for a name that is not in the table.
constexpr std::optional<chorus_dtype> DtypeOfName(std::string_view name) {
  return names_internal::ValueIn<chorus_dtype>(kDtypeNames, name);
}
constexpr std::optional<chorus_reduce_op> ReduceOpOfName(std::string_view name) {
  return names_internal::ValueIn<chorus_reduce_op>(kReduceOpNames, name);
}
constexpr std::optional<chorus_collective_op> CollectiveOpOfName(std::string_view name) {
  return names_internal::ValueIn<chorus_collective_op>(kCollectiveOpNames, name);
}

}  // namespace chorus::sdk

#endif  // CHORUS_NAMES_HPP_
