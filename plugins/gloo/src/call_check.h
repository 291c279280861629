// The check before each operation's data moves: every rank's call (operation, count, dtype,
// reduce op, root) is all-gathered in a message of fixed size and compared with rank 0's. Gloo
// itself cannot take a mismatch: a rank that receives more bytes than it posted fails an
// enforce on Gloo's device thread, where nothing can catch it, and the process aborts
// (std::terminate); one that receives fewer completes with a silent mis-reduce. The core's own
// signature check covers this too, but it can be turned off (CHORUS_CHECK_COLLECTIVES=0,
// chorus-bench), and a plugin must never take the process down.
#ifndef CHORUS_PLUGINS_GLOO_CALL_CHECK_H_
#define CHORUS_PLUGINS_GLOO_CALL_CHECK_H_

#include <chorus/plugin.h>

#include <chorus/names.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::gloo_plugin {

// Operation codes (sdk::SignatureCode: 0 is no operation).
enum class CallOp : int64_t {
  kAllReduce = sdk::SignatureCode(CHORUS_OP_ALL_REDUCE),
  kBroadcast = sdk::SignatureCode(CHORUS_OP_BROADCAST),
  kAllGather = sdk::SignatureCode(CHORUS_OP_ALL_GATHER),
  kReduceScatter = sdk::SignatureCode(CHORUS_OP_REDUCE_SCATTER),
  kBarrier = sdk::SignatureCode(CHORUS_OP_BARRIER)
};

// Five int64 values, exchanged as such. Fields an operation does not use are 0.
struct CallSignature {
  int64_t op = 0;
  int64_t count = 0;
  int64_t dtype = 0;
  int64_t reduce = 0;  // all_reduce, reduce_scatter
  int64_t root = 0;    // broadcast
};
static_assert(sizeof(CallSignature) == 5 * sizeof(int64_t));

// "all_reduce of 1000 f32 (sum)", "broadcast of 4 i32 from rank 1", "barrier".
std::string DescribeCall(const CallSignature& call);

// "" when every rank's call equals rank 0's; else a sentence naming rank 0's call and the first
// rank's that differs.
std::string CallMismatch(const std::vector<CallSignature>& calls);

}  // namespace chorus::gloo_plugin

#endif  // CHORUS_PLUGINS_GLOO_CALL_CHECK_H_
