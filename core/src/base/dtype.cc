#include <chorus/base/dtype.h>
#include <chorus/base/error.h>

#include <chorus/names.hpp>
#include <string>

namespace chorus {
namespace {

template <typename Table>
std::string JoinNames(const Table& names) {
  std::string out;
  for (const char* name : names) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

}  // namespace

const char* DtypeName(chorus_dtype dtype) { return sdk::DtypeName(dtype, "unknown-dtype"); }

chorus_dtype ParseDtype(std::string_view name) {
  if (auto dtype = sdk::DtypeOfName(name)) return *dtype;
  throw Error(CHORUS_INVALID_ARGUMENT,
              "unknown dtype '" + std::string(name) + "'; valid: " + JoinNames(sdk::kDtypeNames));
}

std::vector<chorus_dtype> AllDtypes() {
  std::vector<chorus_dtype> all;
  for (int i = 0; i < CHORUS_DTYPE_COUNT; ++i) all.push_back(static_cast<chorus_dtype>(i));
  return all;
}

const char* ReduceOpName(chorus_reduce_op op) { return sdk::ReduceOpName(op, "unknown-reduce-op"); }

chorus_reduce_op ParseReduceOp(std::string_view name) {
  if (auto op = sdk::ReduceOpOfName(name)) return *op;
  throw Error(CHORUS_INVALID_ARGUMENT, "unknown reduce op '" + std::string(name) +
                                           "'; valid: " + JoinNames(sdk::kReduceOpNames));
}

const char* CollectiveOpName(chorus_collective_op op) {
  return sdk::CollectiveOpName(op, "unknown operation");
}

}  // namespace chorus
