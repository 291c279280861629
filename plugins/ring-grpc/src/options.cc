#include "options.h"

#include <chorus/plugin_sdk.hpp>
#include <string_view>

namespace chorus::ring_grpc {

RingOptions ParseOptions(const chorus_option* options, size_t count) {
  if (count > 0 && options == nullptr) {
    sdk::Fail(CHORUS_INVALID_ARGUMENT, "ring_grpc create: options is NULL with num_options ",
              count);
  }
  for (size_t i = 0; i < count; ++i) {
    const std::string_view key = options[i].key == nullptr ? "" : options[i].key;
    if (key != "host" && key != "segment_bytes") {
      sdk::Fail(CHORUS_INVALID_ARGUMENT, "ring_grpc create: unknown option '", key,
                "' (known: host, segment_bytes)");
    }
  }
  RingOptions result;
  if (auto host = sdk::FindOption(options, count, "host")) {
    if (host->empty()) sdk::Fail(CHORUS_INVALID_ARGUMENT, "ring_grpc create: option host is empty");
    result.host = std::string(*host);
  }
  result.segment_bytes = sdk::IntegerOption(options, count, "segment_bytes", kDefaultSegmentBytes);
  if (result.segment_bytes == 0 || result.segment_bytes > kMaxSegmentBytes) {
    sdk::Fail(CHORUS_INVALID_ARGUMENT,
              "ring_grpc create: option segment_bytes=", result.segment_bytes, " is outside 1..",
              kMaxSegmentBytes);
  }
  return result;
}

}  // namespace chorus::ring_grpc
