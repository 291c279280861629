// The options create() accepts (chorus_option key=value pairs).
#ifndef CHORUS_PLUGINS_RING_GRPC_OPTIONS_H_
#define CHORUS_PLUGINS_RING_GRPC_OPTIONS_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace chorus::ring_grpc {

inline constexpr uint64_t kDefaultSegmentBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxSegmentBytes = uint64_t{1} << 30;

struct RingOptions {
  // The address this rank's server listens on and publishes; neighbours must reach it. Empty:
  // the create args' address (the cluster spec's), else 127.0.0.1.
  std::string host;
  // Bytes per message: a ring step's block is cut into segments of this size, pipelined.
  uint64_t segment_bytes = kDefaultSegmentBytes;
};

// Fails with INVALID_ARGUMENT naming an unknown key or a bad value.
RingOptions ParseOptions(const chorus_option* options, size_t count);

}  // namespace chorus::ring_grpc

#endif  // CHORUS_PLUGINS_RING_GRPC_OPTIONS_H_
