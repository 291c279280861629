#include <chorus/base/dtype.h>
#include <chorus/base/error.h>

#include <string>

namespace chorus {
namespace {

constexpr const char* kDtypeNames[CHORUS_DTYPE_COUNT] = {"f32", "f64", "f16", "bf16",
                                                         "i32", "i64", "u8",  "i8"};
constexpr const char* kReduceOpNames[CHORUS_REDUCE_OP_COUNT] = {"sum", "prod", "min", "max",
                                                                "mean"};

std::string JoinNames(const char* const* names, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) out += (i ? ", " : "") + std::string(names[i]);
  return out;
}

}  // namespace

const char* DtypeName(chorus_dtype dtype) {
  if (dtype < 0 || dtype >= CHORUS_DTYPE_COUNT) return "unknown-dtype";
  return kDtypeNames[dtype];
}

chorus_dtype ParseDtype(std::string_view name) {
  for (int i = 0; i < CHORUS_DTYPE_COUNT; ++i) {
    if (name == kDtypeNames[i]) return static_cast<chorus_dtype>(i);
  }
  throw Error(CHORUS_INVALID_ARGUMENT, "unknown dtype '" + std::string(name) + "'; valid: " +
                                           JoinNames(kDtypeNames, CHORUS_DTYPE_COUNT));
}

std::vector<chorus_dtype> AllDtypes() {
  std::vector<chorus_dtype> all;
  for (int i = 0; i < CHORUS_DTYPE_COUNT; ++i) all.push_back(static_cast<chorus_dtype>(i));
  return all;
}

const char* ReduceOpName(chorus_reduce_op op) {
  if (op < 0 || op >= CHORUS_REDUCE_OP_COUNT) return "unknown-reduce-op";
  return kReduceOpNames[op];
}

chorus_reduce_op ParseReduceOp(std::string_view name) {
  for (int i = 0; i < CHORUS_REDUCE_OP_COUNT; ++i) {
    if (name == kReduceOpNames[i]) return static_cast<chorus_reduce_op>(i);
  }
  throw Error(CHORUS_INVALID_ARGUMENT, "unknown reduce op '" + std::string(name) + "'; valid: " +
                                           JoinNames(kReduceOpNames, CHORUS_REDUCE_OP_COUNT));
}

const char* CollectiveOpName(chorus_collective_op op) {
  switch (op) {
    case CHORUS_OP_ALL_REDUCE:
      return "all_reduce";
    case CHORUS_OP_BROADCAST:
      return "broadcast";
    case CHORUS_OP_ALL_GATHER:
      return "all_gather";
    case CHORUS_OP_REDUCE_SCATTER:
      return "reduce_scatter";
    case CHORUS_OP_BARRIER:
      return "barrier";
    default:
      return "unknown operation";
  }
}

}  // namespace chorus
