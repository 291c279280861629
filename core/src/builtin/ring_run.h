// One run of the ring algorithm (ring_algorithm.h) on the calling thread: the steps of each
// collective over a chorus_p2p, with pipelined segments. Arguments are validated by the caller.
#ifndef CHORUS_CORE_RING_RUN_H_
#define CHORUS_CORE_RING_RUN_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "builtin/p2p_operation.h"

namespace chorus::internal {

class RingRun {
 public:
  RingRun(const chorus_algorithm_run_args& args, size_t segment_bytes);
  // Frees the scratch memory, unless a failed run left a request live on it (then the memory
  // is leaked on purpose: the transport may still write into it until its owner aborts it).
  ~RingRun();
  RingRun(const RingRun&) = delete;
  RingRun& operator=(const RingRun&) = delete;

  void AllReduce();
  void Broadcast();
  void AllGather();
  void ReduceScatter();
  void Barrier();

 private:
  // One step of a ring pass: send `send_count` elements to the right neighbour while receiving
  // `recv_count` from the left one, segment by segment. Without `mine` the received elements
  // are written to `recv`; with it, recv = mine (op) received.
  struct Step {
    uint64_t tag;
    const char* phase;
    size_t step, steps;  // 1-based
    const uint8_t* send;
    size_t send_count;
    uint8_t* recv;
    size_t recv_count;
    const uint8_t* mine;
  };
  void RunStep(const Step& step);

  P2pOperation Start(P2pOperation::Kind kind, int peer, uint64_t tag, const void* data,
                     size_t count, const P2pContext& context);
  P2pContext Context(const char* phase, size_t step, size_t steps, size_t segment,
                     size_t segments) const;
  size_t Segments(size_t count) const {
    return (count + segment_elements_ - 1) / segment_elements_;
  }
  size_t SegmentCount(size_t count, size_t segment) const;
  int Mod(int64_t value) const;
  uint8_t* Slot(size_t index) const { return scratch_.get() + index * slot_bytes_; }
  void AllocateSlots(size_t largest_count);

  const chorus_algorithm_run_args& args_;
  const chorus_p2p& p2p_;
  const int rank_, size_, left_, right_;
  const size_t element_bytes_;
  const size_t segment_elements_, segment_bytes_;
  const char* name_;  // "ring all_reduce", for messages
  size_t slot_bytes_ = 0;
  std::unique_ptr<uint8_t[]> scratch_;  // two receive slots of slot_bytes_
  std::unique_ptr<uint8_t[]> work_[2];  // reduce_scatter's partial results, alternating
  bool abandoned_ = false;
};

}  // namespace chorus::internal

#endif  // CHORUS_CORE_RING_RUN_H_
