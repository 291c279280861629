// The signature check before every collective: each rank's view of the operation (sequence
// number, op, count, dtype, reduce op, root), all-gathered through the communicator's primary
// collective and compared, so that a rank issuing another size or order fails with a message
// naming both ranks instead of a silent mis-reduce.
#ifndef CHORUS_CORE_COLLECTIVE_SIGNATURE_CHECK_H_
#define CHORUS_CORE_COLLECTIVE_SIGNATURE_CHECK_H_

#include <chorus/plugin.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace chorus::internal {

// Operation codes in a signature (not the ABI's enum: 0 stays invalid).
enum SignatureOp : int64_t { kAllReduce = 1, kBroadcast, kAllGather, kReduceScatter, kBarrier };

const char* SignatureOpName(int64_t op);

// Six int64 values, exchanged as such (48 bytes).
struct Signature {
  int64_t sequence, op, count, dtype, reduce, root;
};

// "all_reduce of 1000 f32 (sum)", "broadcast of 4 i32 from rank 1".
std::string DescribeSignature(const Signature& signature);

// "" when every rank's signature equals rank 0's; else the message naming the first rank that
// differs (task_name(r) says how rank r is called).
std::string SignatureMismatch(const std::vector<Signature>& all,
                              const std::function<std::string(int)>& task_name);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_COLLECTIVE_SIGNATURE_CHECK_H_
