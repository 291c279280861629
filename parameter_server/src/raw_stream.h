// chorus-ps-bench's baseline: raw gRPC streaming between the chief and a ps task (no chorus
// code on the way but the server's read loop). In the library, so that the bench links no second
// copy of the generated protobuf code.
#ifndef CHORUS_PARAMETER_SERVER_SRC_RAW_STREAM_H_
#define CHORUS_PARAMETER_SERVER_SRC_RAW_STREAM_H_

#include <chorus/parameter_server/parameter_server_strategy.h>

#include <cstdint>
#include <utility>

namespace chorus::ps_internal {

// Client-streams `bytes` to ps `ps` in chunk_bytes messages, then has it stream them back;
// returns the seconds of each direction.
std::pair<double, double> RawStreamSeconds(const ParameterServerStrategy& strategy, int ps,
                                           int64_t bytes, int64_t chunk_bytes);

}  // namespace chorus::ps_internal

#endif  // CHORUS_PARAMETER_SERVER_SRC_RAW_STREAM_H_
