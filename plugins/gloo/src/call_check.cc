#include "call_check.h"

#include <cstring>
#include <iterator>

namespace chorus::gloo_plugin {
namespace {

const char* OpName(int64_t op) {
  switch (static_cast<CallOp>(op)) {
    case CallOp::kAllReduce:
      return "all_reduce";
    case CallOp::kBroadcast:
      return "broadcast";
    case CallOp::kAllGather:
      return "all_gather";
    case CallOp::kReduceScatter:
      return "reduce_scatter";
    case CallOp::kBarrier:
      return "barrier";
  }
  return "an unknown operation";
}

const char* DtypeName(int64_t dtype) {
  static constexpr const char* kNames[] = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8", "i8"};
  return dtype >= 0 && dtype < std::ssize(kNames) ? kNames[dtype] : "?";
}

const char* ReduceName(int64_t reduce) {
  static constexpr const char* kNames[] = {"sum", "prod", "min", "max", "mean"};
  return reduce >= 0 && reduce < std::ssize(kNames) ? kNames[reduce] : "?";
}

}  // namespace

std::string DescribeCall(const CallSignature& call) {
  const auto op = static_cast<CallOp>(call.op);
  if (op == CallOp::kBarrier) return "barrier";
  std::string text = std::string(OpName(call.op)) + " of " + std::to_string(call.count) + " " +
                     DtypeName(call.dtype);
  if (op == CallOp::kAllReduce || op == CallOp::kReduceScatter) {
    text += std::string(" (") + ReduceName(call.reduce) + ")";
  }
  if (op == CallOp::kBroadcast) text += " from rank " + std::to_string(call.root);
  return text;
}

std::string CallMismatch(const std::vector<CallSignature>& calls) {
  for (size_t r = 1; r < calls.size(); ++r) {
    if (std::memcmp(&calls[r], &calls[0], sizeof(CallSignature)) == 0) continue;
    return "the ranks disagree on the call: rank 0 passes " + DescribeCall(calls[0]) +
           " but rank " + std::to_string(r) + " passes " + DescribeCall(calls[r]) +
           "; every rank must issue the same operations, in the same order, with the same counts, "
           "dtypes, reduce ops and roots";
  }
  return "";
}

}  // namespace chorus::gloo_plugin
