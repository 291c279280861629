#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/collective/communication_options.h>

#include <cstdint>
#include <string>

namespace chorus {

CommunicationOptions CommunicationOptions::Merge(const CommunicationOptions& strategy,
                                                 const CommunicationOptions& call) {
  CommunicationOptions merged = strategy;
  if (call.bytes_per_pack) merged.bytes_per_pack = call.bytes_per_pack;
  if (call.timeout_seconds) merged.timeout_seconds = call.timeout_seconds;
  if (call.implementation != CommunicationImplementation::kAuto) {
    merged.implementation = call.implementation;
  }
  return merged;
}

CommunicationOptions CommunicationOptions::Resolved() const {
  CommunicationOptions resolved = *this;
  if (!resolved.bytes_per_pack) {
    resolved.bytes_per_pack = GetEnvInteger("CHORUS_BYTES_PER_PACK", 0, 0, INT64_MAX);
  }
  if (*resolved.bytes_per_pack < 0) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "bytes_per_pack " + std::to_string(*resolved.bytes_per_pack) + " is negative");
  }
  if (!resolved.timeout_seconds) resolved.timeout_seconds = DefaultTimeoutSeconds();
  if (!(*resolved.timeout_seconds > 0)) {
    throw Error(
        CHORUS_INVALID_ARGUMENT,
        "timeout_seconds " + std::to_string(*resolved.timeout_seconds) + " is not positive");
  }
  return resolved;
}

}  // namespace chorus
