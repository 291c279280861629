#include "host_memory_all_reduce.h"

#include <algorithm>
#include <chorus/parallel_for.hpp>
#include <cstdint>
#include <cstring>
#include <thread>

#include "roots.h"

namespace chorus::hierarchical {
namespace {

// Bytes of one chunk: the two partial sums of a chunk stay in L1/L2 while the inputs stream
// through them once.
constexpr size_t kChunkBytes = size_t{32} << 10;
// Below this much memory traffic, starting threads costs more than they save.
constexpr size_t kParallelBytes = size_t{1} << 20;
constexpr unsigned kMaxThreads = 8;

bool Overlap(const void* a, const void* b, size_t bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

}  // namespace

bool CanFuseOnHost(const DeviceApi& api, std::span<const void* const> inputs,
                   std::span<const chorus_buffer> outputs, size_t bytes, chorus_stream* stream) {
  if (!api.host_memory() || stream != nullptr) return false;
  for (const chorus_buffer& out : outputs) {
    for (const void* in : inputs) {
      if (out.data != in && Overlap(out.data, in, bytes)) return false;
    }
  }
  return true;
}

void HostMemoryAllReduce(const DeviceApi& api, std::span<const uint32_t> devices,
                         std::span<const void* const> inputs,
                         std::span<const chorus_buffer> outputs, const ReduceShape& shape,
                         size_t root_index) {
  const size_t n = devices.size();
  const size_t element = chorus_dtype_size(shape.dtype);
  const Roots roots = ChooseRoots(n, root_index);
  const size_t per_chunk = std::max<size_t>(1, kChunkBytes / element);
  const size_t chunks = (shape.count + per_chunk - 1) / per_chunk;

  // One chunk: elements [begin, end), summed into the thread's two partial sums.
  const auto run_chunk = [&](size_t chunk, char* sum_a_buffer, char* sum_b_buffer) {
    const size_t begin = chunk * per_chunk;
    const size_t count = std::min(per_chunk, shape.count - begin);
    const size_t offset = begin * element;
    const auto at = [offset](const void* base) { return static_cast<const char*>(base) + offset; };
    // As HierarchicalAllReduce's reduce_half: the root's input, then each other member in order.
    const auto reduce_half = [&](size_t first, size_t last, size_t root,
                                 char* partial) -> const void* {
      const void* sum = at(inputs[root]);
      for (size_t k = first; k < last; ++k) {
        if (k == root) continue;
        api.Reduce(devices[root], partial, sum, at(inputs[k]), count, shape.dtype, shape.op,
                   nullptr);
        sum = partial;
      }
      return sum;
    };
    const void* sum_a = reduce_half(0, roots.half, roots.root_a, sum_a_buffer);
    const void* sum_b = reduce_half(roots.half, n, roots.root_b, sum_b_buffer);
    api.Reduce(devices[roots.root_a], sum_a_buffer, sum_a, sum_b, count, shape.dtype, shape.op,
               nullptr);
    // Every input of this chunk has been read: the outputs (which may be inputs) come last.
    for (const chorus_buffer& out : outputs) {
      std::memcpy(static_cast<char*>(out.data) + offset, sum_a_buffer, count * element);
    }
  };

  const size_t traffic = shape.count * element * (n + outputs.size());
  const unsigned threads = traffic < kParallelBytes
                               ? 1u
                               : std::clamp(std::thread::hardware_concurrency(), 1u, kMaxThreads);
  sdk::ParallelFor(chunks, threads, [&](size_t chunk) {
    alignas(64) static thread_local char sum_a[kChunkBytes];
    alignas(64) static thread_local char sum_b[kChunkBytes];
    run_chunk(chunk, sum_a, sum_b);
  });
}

}  // namespace chorus::hierarchical
