#include "collective/signature_check.h"

#include <cstring>

namespace chorus::internal {

const char* SignatureOpName(int64_t op) {
  return sdk::SignatureCodeName(op, "an unknown operation");
}

std::string DescribeSignature(const Signature& s,
                              const std::function<std::string(int64_t)>& backend_name) {
  std::string text = std::string(SignatureOpName(s.op)) + " of " + std::to_string(s.count) + " " +
                     sdk::DtypeName(s.dtype);
  if (s.op == kAllReduce || s.op == kReduceScatter) {
    text += std::string(" (") + sdk::ReduceOpName(s.reduce) + ")";
  }
  if (s.op == kBroadcast) text += " from rank " + std::to_string(s.root);
  return backend_name ? text + " on " + backend_name(s.backend) : text;
}

std::string SignatureMismatch(const std::vector<Signature>& all,
                              const std::function<std::string(int)>& task_name,
                              const std::function<std::string(int64_t)>& backend_name) {
  for (size_t r = 1; r < all.size(); ++r) {
    if (std::memcmp(&all[r], &all[0], sizeof(Signature)) == 0) continue;
    // The collective is named only where the routing differs.
    const auto& names =
        all[r].backend != all[0].backend ? backend_name : std::function<std::string(int64_t)>();
    return "collective mismatch across workers at operation #" + std::to_string(all[0].sequence) +
           ": " + task_name(0) + " issues " + DescribeSignature(all[0], names) + " but " +
           task_name(static_cast<int>(r)) + " issues " + DescribeSignature(all[r], names) +
           "; every worker must issue the same collectives, in the same order, with the same "
           "sizes and dtypes, and route them alike (the same plugins, CHORUS_ALGORITHM and "
           "CHORUS_TUNING_FILE)";
  }
  return "";
}

}  // namespace chorus::internal
