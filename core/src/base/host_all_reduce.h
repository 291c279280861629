// A fused, multi-threaded all-reduce of buffers in host memory: the fast path of the core's
// ReductionToOneDevice when its devices are the core's cpu devices (whose memory is the host's).
//
// tf.distribute's recipe (copy every input to one device, reduce there pairwise, copy back) moves
// each byte several times through memory. Here every output chunk is computed once in a small
// cache-resident buffer (the inputs read once, the outputs written once: the least traffic an
// all-reduce can cause) and the chunks of all reduces of a batch are shared among threads, so
// 1000 small tensors cost about what one tensor of their total size costs, without packing.
#ifndef CHORUS_CORE_HOST_ALL_REDUCE_H_
#define CHORUS_CORE_HOST_ALL_REDUCE_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <vector>

namespace chorus::internal {

// One reduce: every input (count elements) reduced into every output. An output may be the very
// buffer of an input (in place); no other overlap is allowed.
struct HostReduce {
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  size_t count = 0;
  chorus_dtype dtype = CHORUS_F32;
  chorus_reduce_op op = CHORUS_REDUCE_SUM;  // never MEAN
};

// Runs every reduce of `batch`. Each sums its inputs in a pairwise tree over their order,
// ((in0 + in1) + (in2 + in3)) + ..., the same bits on every call and thread count. Uses up to
// `max_threads` threads (0: the hardware's count, at most 8) once the batch is large enough to
// repay them.
void HostAllReduce(const std::vector<HostReduce>& batch, unsigned max_threads = 0);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_HOST_ALL_REDUCE_H_
