#include "call_check.h"

#include <cstring>

namespace chorus::gloo_plugin {

std::string DescribeCall(const CallSignature& call) {
  const auto op = static_cast<CallOp>(call.op);
  if (op == CallOp::kBarrier) return "barrier";
  std::string text = std::string(sdk::SignatureCodeName(call.op, "an unknown operation")) + " of " +
                     std::to_string(call.count) + " " + sdk::DtypeName(call.dtype);
  if (op == CallOp::kAllReduce || op == CallOp::kReduceScatter) {
    text += std::string(" (") + sdk::ReduceOpName(call.reduce) + ")";
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
