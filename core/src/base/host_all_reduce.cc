#include "base/host_all_reduce.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "base/helper_pool.h"
#include "base/host_kernels.h"

namespace chorus::internal {
namespace {

// Bytes of one work unit: small enough that the accumulator stays in L1/L2 while every input
// streams through it, large enough that the per-unit overhead vanishes.
constexpr size_t kChunkBytes = size_t{32} << 10;
// Below this many bytes read and written in a batch, a helper costs more than it saves: waking
// it and sharing the caches with it made 2 MB (a CNN's 0.5 MB of gradients over 2 replicas) slower
// than one thread here, while 8 MB (1 MiB over 4 replicas) gains from it.
constexpr size_t kParallelBytes = size_t{4} << 20;

// Elements [begin, end) of one reduce.
struct Piece {
  const HostReduce* reduce;
  size_t begin;  // elements
  size_t end;
};

// What one thread takes at a time: consecutive pieces of at most kChunkBytes together. Small
// tensors of a batch go several to a unit, so that a thread walks through neighbouring tensors
// (which often lie next to each other in memory) rather than alternating with the other threads.
struct Unit {
  size_t first;  // pieces [first, last)
  size_t last;
};

// A work unit's accumulators, one per level of the summation tree (a thread's own).
struct alignas(64) Slot {
  unsigned char bytes[kChunkBytes];
};

// Sums the inputs in a pairwise tree over their order: ((in0 + in1) + (in2 + in3)) + ..., the
// association tf.distribute's hierarchical copy and a 2-level all-reduce (pairs of replicas, then
// across them) give for 2^k replicas. With every reduction summing replicas in one order, a
// model's update is the same bits whichever of them computed it (chorus::FitOptions::
// gradient_shards relies on it), and pairwise sums lose less to rounding than a running sum.
// Returns where the result lies: an input when there is one, else a slot.
const unsigned char* ReducePairwise(const HostReduce& r, size_t offset, size_t n,
                                    std::vector<Slot>& slots) {
  auto at = [offset](const void* base) { return static_cast<const unsigned char*>(base) + offset; };
  struct Partial {
    const unsigned char* data;
    unsigned level;  // 2^level inputs summed
  };
  // Partial sums of consecutive runs of inputs, each level lower than the one below it (a
  // binary counter): partial d, when not an input, lives in slots[d].
  Partial stack[64];
  size_t depth = 0;
  for (const void* input : r.inputs) {
    Partial current{at(input), 0};
    while (depth > 0 && stack[depth - 1].level == current.level) {
      --depth;
      unsigned char* into = slots[depth].bytes;
      ReduceHost(into, stack[depth].data, current.data, n, r.dtype, r.op);
      current = {into, current.level + 1};
    }
    stack[depth++] = current;
  }
  // What is left, from the last (smallest) run back to the first.
  Partial sum = stack[--depth];
  while (depth > 0) {
    --depth;
    unsigned char* into = slots[depth].bytes;
    ReduceHost(into, stack[depth].data, sum.data, n, r.dtype, r.op);
    sum = {into, 0};
  }
  return sum.data;
}

void RunPiece(const Piece& unit, std::vector<Slot>& slots) {
  const HostReduce& r = *unit.reduce;
  const size_t element = chorus_dtype_size(r.dtype);
  const size_t offset = unit.begin * element;
  const size_t n = unit.end - unit.begin;
  const size_t bytes = n * element;
  // The tree keeps at most floor(log2(inputs)) + 1 partial sums.
  const size_t levels = static_cast<size_t>(std::bit_width(r.inputs.size()));
  if (slots.size() < levels) slots.resize(levels);
  const unsigned char* sum = ReducePairwise(r, offset, n, slots);
  // Every input of this chunk has been read before any output is written: in place is safe.
  for (void* out : r.outputs) {
    unsigned char* to = static_cast<unsigned char*>(out) + offset;
    if (to != sum) std::memcpy(to, sum, bytes);
  }
}

}  // namespace

void HostAllReduce(const std::vector<HostReduce>& batch, unsigned max_threads) {
  std::vector<Piece> pieces;
  std::vector<Unit> units;
  size_t total_bytes = 0, unit_bytes = 0;
  for (const HostReduce& r : batch) {
    const size_t element = chorus_dtype_size(r.dtype);
    if (r.count == 0 || r.inputs.empty() || element == 0) continue;
    const size_t per_piece = std::max<size_t>(1, kChunkBytes / element);
    for (size_t begin = 0; begin < r.count; begin += per_piece) {
      const size_t end = std::min(r.count, begin + per_piece);
      const size_t bytes = (end - begin) * element;
      if (units.empty() || unit_bytes + bytes > kChunkBytes) {
        units.push_back({pieces.size(), pieces.size()});
        unit_bytes = 0;
      }
      pieces.push_back({&r, begin, end});
      units.back().last = pieces.size();
      unit_bytes += bytes;
    }
    total_bytes += r.count * element * (r.inputs.size() + r.outputs.size());
  }
  if (units.empty()) return;
  // Asked once: glibc reads sysfs for it, a few microseconds per call.
  static const unsigned cores = std::thread::hardware_concurrency();
  unsigned threads = max_threads != 0 ? max_threads : cores;
  threads = std::clamp(threads, 1u, 8u);
  if (total_bytes < kParallelBytes) threads = 1;
  threads = std::min<unsigned>(threads, static_cast<unsigned>(units.size()));

  std::atomic<size_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;  // the first failure, rethrown on the calling thread
  auto work = [&] {
    static thread_local std::vector<Slot> slots;
    try {
      for (size_t i = next.fetch_add(1); i < units.size(); i = next.fetch_add(1)) {
        for (size_t p = units[i].first; p < units[i].last; ++p) RunPiece(pieces[p], slots);
      }
    } catch (...) {
      next.store(units.size());
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  // Through the pool even on one thread: replicas waiting for this reduce join it as guests
  // (helper threads, which need waking, only from kParallelBytes).
  HelperPool::Get().Run(threads, work);
  if (error) std::rethrow_exception(error);
}

}  // namespace chorus::internal
