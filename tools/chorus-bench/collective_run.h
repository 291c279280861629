// One operation of one size, in place or out of place, on a worker's buffers: filling the
// inputs, preparing each iteration (outside the timed region), running it through a
// Communicator, and counting the wrong elements of the result.
#ifndef CHORUS_TOOLS_BENCH_COLLECTIVE_RUN_H_
#define CHORUS_TOOLS_BENCH_COLLECTIVE_RUN_H_

#include <chorus/collective/communicator.h>

#include <cstdint>
#include <vector>

#include "collective_kind.h"

namespace chorus::bench {

struct RunSpec {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  chorus_dtype dtype = CHORUS_F32;
  chorus_reduce_op reduce_op = CHORUS_REDUCE_SUM;
  int root = 0;
  int rank = 0;
  int ranks = 1;
  size_t count = 0;  // elements per rank, as metrics.h's RowLayout
  bool in_place = false;
};

// Buffers shared by every backend and size of an operation (allocated once, at the largest).
struct RunBuffers {
  std::vector<unsigned char> input;  // this rank's inputs, written once per size
  std::vector<unsigned char> work;   // the output; in place, the input copy the op works on
};

// Bytes `input` and `work` need for `spec` (the larger of the in-place and out-of-place needs).
size_t InputBytes(const RunSpec& spec);
size_t WorkBytes(const RunSpec& spec);

// Writes this rank's inputs into buffers.input.
void FillInputs(const RunSpec& spec, RunBuffers& buffers);
// Before an iteration: in place, copies the inputs into `work`; before the checked iteration,
// also overwrites the output with a value no correct result holds.
void PrepareIteration(const RunSpec& spec, RunBuffers& buffers, bool checked);
void RunOperation(const RunSpec& spec, RunBuffers& buffers, Communicator& comm);
// Elements of this rank's result that differ from the exact answer.
uint64_t CountWrongElements(const RunSpec& spec, const RunBuffers& buffers);

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_COLLECTIVE_RUN_H_
