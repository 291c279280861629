// The signature check before every collective: each rank's view of the operation (sequence
// number, op, count, dtype, reduce op, root), all-gathered through the communicator's primary
// collective and compared, so that a rank issuing another size or order fails with a message
// naming both ranks instead of a silent mis-reduce.
#ifndef CHORUS_CORE_COLLECTIVE_SIGNATURE_CHECK_H_
#define CHORUS_CORE_COLLECTIVE_SIGNATURE_CHECK_H_

#include <chorus/plugin.h>

#include <chorus/names.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace chorus::internal {

// Operation codes in a signature (sdk::SignatureCode: 0 stays invalid).
enum SignatureOp : int64_t {
  kAllReduce = sdk::SignatureCode(CHORUS_OP_ALL_REDUCE),
  kBroadcast = sdk::SignatureCode(CHORUS_OP_BROADCAST),
  kAllGather = sdk::SignatureCode(CHORUS_OP_ALL_GATHER),
  kReduceScatter = sdk::SignatureCode(CHORUS_OP_REDUCE_SCATTER),
  kBarrier = sdk::SignatureCode(CHORUS_OP_BARRIER)
};

// "all_reduce", ...; "an unknown operation" for a code that is none.

const char* SignatureOpName(int64_t op);

// Seven int64 values, exchanged as such (56 bytes). `backend` is the index of the collective the
// rank routes the operation to: ranks whose routing differs (other scores, rules or plugin
// versions) fail here instead of waiting in two collectives.
struct Signature {
  int64_t sequence, op, count, dtype, reduce, root, backend;
};

// "all_reduce of 1000 f32 (sum) on shm", "broadcast of 4 i32 from rank 1 on core_ring";
// backend_name(i) names collective i (an empty function: the collective is left out).
std::string DescribeSignature(const Signature& signature,
                              const std::function<std::string(int64_t)>& backend_name);

// "" when every rank's signature equals rank 0's; else the message naming the first rank that
// differs (task_name(r) says how rank r is called), and the collectives when the routing differs.
std::string SignatureMismatch(const std::vector<Signature>& all,
                              const std::function<std::string(int)>& task_name,
                              const std::function<std::string(int64_t)>& backend_name);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_COLLECTIVE_SIGNATURE_CHECK_H_
