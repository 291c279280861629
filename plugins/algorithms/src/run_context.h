// What every run of the plugin's algorithms works with: the run's arguments, its p2p, and the
// pieces each schedule is made of (a pairwise exchange, a ring pass over a group of ranks, the
// fold of a non-power-of-two rank count). All on host memory, reducing with the core's kernels.
#ifndef CHORUS_ALGORITHMS_RUN_CONTEXT_H_
#define CHORUS_ALGORITHMS_RUN_CONTEXT_H_

#include <chorus/plugin.h>

#include <chorus/algorithm_sdk.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "schedule.h"

namespace chorus::algorithms {

class RunContext {
 public:
  // `name` starts every message ("rhd"); `tag_base` marks this algorithm's messages (high byte).
  RunContext(const chorus_algorithm_run_args& args, const char* name, uint64_t tag_base);

  const chorus_algorithm_run_args& args() const { return args_; }
  const chorus_p2p& p2p() const { return p2p_; }
  const char* name() const { return name_; }
  int rank() const { return p2p_.rank; }
  int size() const { return p2p_.size; }
  size_t element_bytes() const { return element_bytes_; }
  uint64_t Tag(uint64_t phase, uint64_t step = 0) const { return tag_base_ | (phase << 32) | step; }
  // The run's result buffer as bytes; for all_reduce it first holds a copy of send.
  uint8_t* recv() const { return static_cast<uint8_t*>(args_.recv); }
  // Scratch space of at least `bytes`, kept for the run.
  uint8_t* Scratch(size_t bytes);

  // Sends `send_bytes` from `send` to `to` while receiving `recv_bytes` into `recv` from `from`,
  // and waits for both.
  void Exchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                size_t recv_bytes, uint64_t tag);
  // dst = a op b over `count` elements of the run's dtype and reduce op.
  void Reduce(void* dst, const void* a, const void* b, size_t count) const;

  // all_reduce's start: recv = send (unless in place).
  void CopySendToRecv() const;

  // The fold of a non-power-of-two count (schedule.h): an even rank of the first 2 * rem sends
  // its buffer to its odd neighbour, which reduces it in (lower rank first). Returns false on a
  // rank that folded away: it gets the result from FoldOut and takes no other part.
  bool FoldIn(const Fold& fold, size_t count, uint64_t tag);
  // The odd rank sends the result back to its even neighbour, which receives it.
  void FoldOut(const Fold& fold, size_t count, uint64_t tag);

  // Ring passes over `group` (ranks, in ring order; this rank is group[index]) on the blocks of
  // `layout` over `data`. ReduceScatter leaves group[i] with the reduction of block (i + 1) % g;
  // AllGather starts from there and leaves every block everywhere.
  void RingReduceScatter(const std::vector<int>& group, size_t index, uint8_t* data,
                         const sdk::BlockLayout& layout, uint64_t tag);
  void RingAllGather(const std::vector<int>& group, size_t index, uint8_t* data,
                     const sdk::BlockLayout& layout, uint64_t tag);

 private:
  const chorus_algorithm_run_args& args_;
  const chorus_p2p& p2p_;
  const char* name_;
  const uint64_t tag_base_;
  const size_t element_bytes_;
  std::unique_ptr<uint8_t[]> scratch_;
  size_t scratch_bytes_ = 0;
};

// The algorithms, each on validated arguments.
void RunRhdAllReduce(RunContext& run);
void RunRecursiveDoublingAllReduce(RunContext& run);
void RunDisseminationBarrier(RunContext& run);
void RunBinomialBroadcast(RunContext& run, size_t segment_bytes);
void RunTorusAllReduce(RunContext& run, const Grid& grid);

}  // namespace chorus::algorithms

#endif  // CHORUS_ALGORITHMS_RUN_CONTEXT_H_
