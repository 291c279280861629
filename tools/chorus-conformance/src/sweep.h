// The operations a collective or an algorithm is swept through, one rank's buffers for each, and
// the check of its result against the reference (reference.h). Shared by the Collective suite
// (interface 3) and the Algorithm suite (interface 4), which differ only in how they call.
#ifndef CHORUS_CONFORMANCE_SWEEP_H_
#define CHORUS_CONFORMANCE_SWEEP_H_

#include <chorus/plugin.h>

#include <functional>
#include <string>
#include <vector>

#include "reference.h"

namespace chorus::conformance::internal {

// One operation of a sweep, the same on every rank. count as chorus_algorithm_run_args has it:
// elements for all_reduce and broadcast, per rank for all_gather, received per rank for
// reduce_scatter.
struct OpCase {
  chorus_collective_op op = CHORUS_OP_ALL_REDUCE;
  chorus_dtype dtype = CHORUS_F32;
  chorus_reduce_op reduce = CHORUS_REDUCE_SUM;  // all_reduce and reduce_scatter
  size_t count = 0;
  int root = 0;           // broadcast
  bool in_place = false;  // all_reduce: recv is send; all_gather: send is this rank's block of recv
};

// "all_reduce f32 sum count 1001 in place", "broadcast i8 count 0 from rank 2".
std::string Describe(const OpCase& c);

// The counts a sweep runs for each dtype.
using CountsOf = std::function<std::vector<size_t>(chorus_dtype)>;

// Every case of `op` for `size` ranks: every dtype x its counts; x every plugin reduce op for
// all_reduce and reduce_scatter; x every root for broadcast; x `placements` (false: out of place,
// true: in place) for all_reduce and all_gather.
std::vector<OpCase> Cases(chorus_collective_op op, int size, const CountsOf& counts,
                          const std::vector<bool>& placements = {false});

// One rank's buffers for a case: its input from the reference patterns (every rank's differs),
// and the result every rank must end with.
class CaseBuffers {
 public:
  CaseBuffers(const OpCase& c, int rank, int size);
  // As the collective's argument structs and chorus_algorithm_run_args take them: send is NULL
  // for broadcast (recv is its data), and in place it points into recv.
  const void* send() const;
  void* recv();
  // "" when the result holds the expected values, else the case and what differs.
  std::string Check() const;

 private:
  OpCase case_;
  int rank_;
  HostTensor send_;
  HostTensor recv_;
  HostTensor expected_;
};

// Rank `rank`'s input for a case with `pattern`: the reference pattern from position `offset`.
HostTensor Input(chorus_dtype dtype, Pattern pattern, int rank, size_t count, size_t offset = 0);

}  // namespace chorus::conformance::internal

#endif  // CHORUS_CONFORMANCE_SWEEP_H_
