// What a plugin's tables declare they serve, for --require: ABI 1.1 capabilities (memory and
// ops) of collectives and cross-device ops, an algorithm's supported_ops, and for a table without
// capabilities (ABI 1.0) every function slot that is not NULL.
#ifndef CHORUS_CONFORMANCE_DECLARATIONS_H_
#define CHORUS_CONFORMANCE_DECLARATIONS_H_

#include <chorus/base/dtype.h>
#include <chorus/plugin.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace chorus::conformance::internal {

// Every operation of plugin.h's chorus_collective_op, as CHORUS_OP_BIT bits.
inline constexpr uint32_t kKnownOps = (1u << (CHORUS_OP_BARRIER + 1)) - 1;
// The operations every cross-device ops table has functions for (reduce and batch_reduce are
// ALL_REDUCE); REDUCE_SCATTER too where the table has reduce_scatter (1.5).
inline constexpr uint32_t kCrossDeviceOps = CHORUS_OP_BIT(CHORUS_OP_ALL_REDUCE) |
                                            CHORUS_OP_BIT(CHORUS_OP_BROADCAST) |
                                            CHORUS_OP_BIT(CHORUS_OP_ALL_GATHER);

// Whether the collective declares `op` on plain host memory (the kit's buffers).
bool DeclaresOnHost(const chorus_collective_api& api, chorus_collective_op op);
// Whether the cross-device ops declare `op` on the core's cpu devices (host memory).
bool DeclaresOnCpuDevices(const chorus_cross_device_ops_api& api, chorus_collective_op op);
// Whether they declare any operation there: what a create over cpu devices is asked for.
bool DeclaresAnyOnCpuDevices(const chorus_cross_device_ops_api& api);
// Whether they declare `op` on the memory `platform` names (an enumerator's, e.g. "pjrt"), in
// their capabilities; a table without capabilities declares no memory but host memory.
bool DeclaresOnMemory(const chorus_cross_device_ops_api& api, chorus_collective_op op,
                      std::string_view platform);
// Whether the algorithm declares `op` (supported_ops).
bool Declares(const chorus_algorithm_api& api, chorus_collective_op op);

// CHORUS_UNSUPPORTED or CHORUS_UNAVAILABLE: "not here", which the kit skips unless --require and
// the table declares what was asked.
inline bool IsNotHere(chorus_status status) {
  return status == CHORUS_UNSUPPORTED || status == CHORUS_UNAVAILABLE;
}

// Thrown on a rank's thread when the plugin answered "not here" to something it need not serve;
// the check catches it and skips with what().
class NotHere : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace chorus::conformance::internal

#endif  // CHORUS_CONFORMANCE_DECLARATIONS_H_
