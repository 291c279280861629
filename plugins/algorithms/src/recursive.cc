// The power-of-two schedules, for any rank count through the fold (schedule.h):
//  - rhd: Rabenseifner's all-reduce. Recursive halving reduce-scatter (log2 p steps, each rank
//    exchanging half of what it still holds with the partner at distance p/2, p/4, ..., 1), then
//    recursive doubling all-gather (distance 1, 2, ..., p/2). Each rank sends 2(p-1)/p of the
//    buffer in 2 log2 p messages: the ring's bandwidth with log2 p instead of p-1 latencies.
//  - recursive_doubling: all-reduce where every step exchanges the whole buffer with the partner
//    at distance 1, 2, ..., p/2: log2 p messages, each the whole buffer; for small buffers.
//  - the dissemination barrier (any count, no fold): at step k a zero-byte message to rank + 2^k,
//    one from rank - 2^k.
// Every rank ends with the same bits: each block's final value is computed by one rank and
// copied (rhd), or both partners of a step reduce the same two operands in the same order, the
// lower new rank's first (recursive_doubling).
#include <chorus/algorithm_sdk.hpp>

#include "run_context.h"

namespace chorus::algorithms {
namespace {

enum RecursivePhase : uint64_t {
  kFoldIn = 1,
  kHalving = 2,
  kDoubling = 3,
  kFoldOut = 4,
  kBarrier = 5
};

// An all-reduce on the power-of-two new ranks of the fold: the fold in, `schedule` on the active
// ranks (with this rank's new rank and where its first step reads this rank's data), the fold
// out. With a power-of-two count nothing folds, and the first step reads send and writes recv:
// copying send to recv first cost a pass over the whole buffer (the ring makes none either).
template <typename Schedule>
void FoldedAllReduce(RunContext& run, Schedule schedule) {
  const size_t count = run.args().count;
  const Fold fold(run.size());
  if (run.size() == 1 || count == 0 || fold.rem > 0) run.CopySendToRecv();
  if (run.size() == 1 || count == 0) return;
  const uint8_t* first_source =
      fold.rem > 0 ? run.recv() : static_cast<const uint8_t*>(run.args().send);
  if (run.FoldIn(fold, count, run.Tag(kFoldIn))) {
    schedule(fold, fold.NewRank(run.rank()), count, first_source);
  }
  run.FoldOut(fold, count, run.Tag(kFoldOut));
}

}  // namespace

void RunRhdAllReduce(RunContext& run) {
  FoldedAllReduce(run, [&](const Fold& fold, int me, size_t count, const uint8_t* source) {
    const size_t es = run.element_bytes();
    const sdk::BlockLayout layout{count, static_cast<size_t>(fold.pof2)};
    uint8_t* data = run.recv();
    uint8_t* incoming = run.Scratch(layout.SizeOf(0, static_cast<size_t>(fold.pof2) / 2) * es);
    // Blocks [first, first + blocks) are this rank's part; halved at every step.
    size_t first = 0, blocks = static_cast<size_t>(fold.pof2);
    uint64_t step = 0;
    for (int distance = fold.pof2 / 2; distance >= 1; distance /= 2, ++step) {
      const int partner = me ^ distance;
      const size_t half = blocks / 2;
      const bool lower = (me & distance) == 0;
      const size_t keep = lower ? first : first + half, give = lower ? first + half : first;
      const size_t keep_count = layout.SizeOf(keep, half);
      run.Exchange(fold.RankOf(partner), source + layout.Begin(give) * es,
                   layout.SizeOf(give, half) * es, fold.RankOf(partner), incoming, keep_count * es,
                   run.Tag(kHalving, step));
      uint8_t* mine = data + layout.Begin(keep) * es;
      const uint8_t* own = source + layout.Begin(keep) * es;
      if (me < partner) {
        run.Reduce(mine, own, incoming, keep_count);
      } else {
        run.Reduce(mine, incoming, own, keep_count);
      }
      first = keep;
      blocks = half;
      source = data;  // from the second step on, this rank's part is in recv
    }
    // Now first == me and blocks == 1: the reduced block me. Gather the others back.
    step = 0;
    for (int distance = 1; distance < fold.pof2; distance *= 2, ++step) {
      const int partner = me ^ distance;
      const size_t theirs = first ^ static_cast<size_t>(distance);
      run.Exchange(fold.RankOf(partner), data + layout.Begin(first) * es,
                   layout.SizeOf(first, blocks) * es, fold.RankOf(partner),
                   data + layout.Begin(theirs) * es, layout.SizeOf(theirs, blocks) * es,
                   run.Tag(kDoubling, step));
      first = std::min(first, theirs);
      blocks *= 2;
    }
  });
}

void RunRecursiveDoublingAllReduce(RunContext& run) {
  FoldedAllReduce(run, [&](const Fold& fold, int me, size_t count, const uint8_t* source) {
    const size_t bytes = count * run.element_bytes();
    uint8_t* data = run.recv();
    uint8_t* incoming = run.Scratch(bytes);
    uint64_t step = 0;
    for (int distance = 1; distance < fold.pof2; distance *= 2, ++step) {
      const int partner = me ^ distance;
      run.Exchange(fold.RankOf(partner), source, bytes, fold.RankOf(partner), incoming, bytes,
                   run.Tag(kDoubling, step));
      if (me < partner) {
        run.Reduce(data, source, incoming, count);
      } else {
        run.Reduce(data, incoming, source, count);
      }
      source = data;
    }
  });
}

void RunDisseminationBarrier(RunContext& run) {
  const int n = run.size();
  uint64_t step = 0;
  for (int distance = 1; distance < n; distance *= 2, ++step) {
    run.Exchange((run.rank() + distance) % n, nullptr, 0, (run.rank() + n - distance) % n, nullptr,
                 0, run.Tag(kBarrier, step));
  }
}

}  // namespace chorus::algorithms
