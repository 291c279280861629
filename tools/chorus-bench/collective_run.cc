#include "collective_run.h"

#include <algorithm>
#include <cstring>

#include "expected_values.h"

namespace chorus::bench {

namespace {

size_t ElementSize(const RunSpec& spec) { return chorus_dtype_size(spec.dtype); }
size_t Ranks(const RunSpec& spec) { return static_cast<size_t>(spec.ranks); }
size_t Rank(const RunSpec& spec) { return static_cast<size_t>(spec.rank); }

// Where this rank's result lies in `work`.
size_t ResultOffsetBytes(const RunSpec& spec) {
  if (spec.kind == CollectiveKind::kReduceScatter && spec.in_place) {
    return Rank(spec) * spec.count * ElementSize(spec);
  }
  return 0;
}

}  // namespace

size_t InputBytes(const RunSpec& spec) {
  const size_t bytes = spec.count * ElementSize(spec);
  return spec.kind == CollectiveKind::kReduceScatter ? bytes * Ranks(spec) : bytes;
}

size_t WorkBytes(const RunSpec& spec) {
  const size_t bytes = spec.count * ElementSize(spec);
  switch (spec.kind) {
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      return bytes * Ranks(spec);
    default:
      return bytes;
  }
}

void FillInputs(const RunSpec& spec, RunBuffers& buffers) {
  // At least one byte, so that no pointer is null (memcpy's and the plugins' rule) at size 0.
  const size_t input_bytes = std::max<size_t>(InputBytes(spec), 1);
  const size_t work_bytes = std::max<size_t>(WorkBytes(spec), 1);
  if (buffers.input.size() < input_bytes) buffers.input.resize(input_bytes);
  if (buffers.work.size() < work_bytes) buffers.work.resize(work_bytes);
  const size_t offset = spec.kind == CollectiveKind::kAllGather ? Rank(spec) * spec.count : 0;
  const size_t count = InputBytes(spec) / ElementSize(spec);
  FillInput(buffers.input.data(), count, spec.dtype, spec.reduce_op, spec.rank, offset);
}

void PrepareIteration(const RunSpec& spec, RunBuffers& buffers, bool checked) {
  const size_t element = ElementSize(spec);
  if (checked) std::memset(buffers.work.data(), 0xff, WorkBytes(spec));  // NaN, -1 or 255
  if (!spec.in_place) return;
  if (spec.kind == CollectiveKind::kAllGather) {
    std::memcpy(buffers.work.data() + Rank(spec) * spec.count * element, buffers.input.data(),
                spec.count * element);
  } else {
    std::memcpy(buffers.work.data(), buffers.input.data(), InputBytes(spec));
  }
}

void RunOperation(const RunSpec& spec, RunBuffers& buffers, Communicator& comm) {
  unsigned char* work = buffers.work.data();
  const unsigned char* send = spec.in_place ? work : buffers.input.data();
  const size_t block = spec.count * ElementSize(spec);
  switch (spec.kind) {
    case CollectiveKind::kAllReduce:
      comm.AllReduce(send, work, spec.count, spec.dtype, spec.reduce_op);
      break;
    case CollectiveKind::kBroadcast:  // in place only: the Communicator has no send buffer
      comm.Broadcast(work, spec.count, spec.dtype, spec.root);
      break;
    case CollectiveKind::kAllGather:
      // In place as nccl-tests: this rank's input is its own block of the output.
      if (spec.in_place) send = work + Rank(spec) * block;
      comm.AllGather(send, work, spec.count, spec.dtype);
      break;
    case CollectiveKind::kReduceScatter:
      // In place as nccl-tests: the output is this rank's block of the input.
      comm.ReduceScatter(send, work + ResultOffsetBytes(spec), spec.count, spec.dtype,
                         spec.reduce_op);
      break;
    case CollectiveKind::kBatchReduce:
      break;  // an in-process operation; never reaches a Communicator
  }
}

uint64_t CountWrongElements(const RunSpec& spec, const RunBuffers& buffers) {
  const unsigned char* result = buffers.work.data() + ResultOffsetBytes(spec);
  switch (spec.kind) {
    case CollectiveKind::kAllReduce:
      return CountWrongReduced(result, spec.count, spec.dtype,
                               ReducedPattern(spec.ranks, spec.reduce_op, spec.dtype), 0);
    case CollectiveKind::kReduceScatter:
      return CountWrongReduced(result, spec.count, spec.dtype,
                               ReducedPattern(spec.ranks, spec.reduce_op, spec.dtype),
                               Rank(spec) * spec.count);
    case CollectiveKind::kBroadcast:
      return CountWrongInput(result, spec.count, spec.dtype, spec.reduce_op, spec.root, 0);
    case CollectiveKind::kAllGather: {
      uint64_t wrong = 0;
      const size_t block = spec.count * ElementSize(spec);
      for (int q = 0; q < spec.ranks; ++q) {
        const size_t qs = static_cast<size_t>(q);
        wrong += CountWrongInput(result + qs * block, spec.count, spec.dtype, spec.reduce_op, q,
                                 qs * spec.count);
      }
      return wrong;
    }
    case CollectiveKind::kBatchReduce:
      break;
  }
  return 0;
}

}  // namespace chorus::bench
