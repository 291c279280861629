#include "collectives.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>

#include <cstring>
#include <memory>

#include "element_types.h"
#include "reduce_functions.h"
#include "ring_chunked.h"

namespace chorus::gloo_plugin {
namespace {

::gloo::AllreduceOptions::Algorithm FunctionApiAlgorithm(Algorithm algorithm) {
  return algorithm == Algorithm::kBcube ? ::gloo::AllreduceOptions::Algorithm::BCUBE
                                        : ::gloo::AllreduceOptions::Algorithm::RING;
}

}  // namespace

void AllReduce(const GlooContext& context, Algorithm algorithm, const void* send, void* recv,
               size_t count, chorus_dtype dtype, chorus_reduce_op op, uint32_t tag) {
  if (algorithm == Algorithm::kRingChunked) {
    if (send != recv) std::memmove(recv, send, count * chorus_dtype_size(dtype));
    RingChunkedAllReduce(context, recv, count, dtype, op);
    return;
  }
  const ReduceFunction reduce = FindReduceFunction(dtype, op);
  VisitElementType(dtype, [&]<typename T>() {
    ::gloo::AllreduceOptions options(context);
    options.setAlgorithm(FunctionApiAlgorithm(algorithm));
    // Without an input Gloo reduces the output in place. Gloo only reads the input.
    if (send != recv) options.setInput(static_cast<T*>(const_cast<void*>(send)), count);
    options.setOutput(static_cast<T*>(recv), count);
    options.setReduceFunction(reduce);
    options.setTag(tag);
    ::gloo::allreduce(options);
  });
}

void Broadcast(const GlooContext& context, void* data, size_t count, chorus_dtype dtype, int root,
               uint32_t tag) {
  VisitElementType(dtype, [&]<typename T>() {
    ::gloo::BroadcastOptions options(context);
    options.setOutput(static_cast<T*>(data), count);  // the root sends its output
    options.setRoot(root);
    options.setTag(tag);
    ::gloo::broadcast(options);
  });
}

void AllGather(const GlooContext& context, const void* send, void* recv, size_t count,
               chorus_dtype dtype, uint32_t tag) {
  VisitElementType(dtype, [&]<typename T>() {
    ::gloo::AllgatherOptions options(context);
    T* own_block = static_cast<T*>(recv) + static_cast<size_t>(context->rank) * count;
    // Without an input Gloo sends this rank's block of the output as it is.
    if (send != own_block) options.setInput(static_cast<T*>(const_cast<void*>(send)), count);
    options.setOutput(static_cast<T*>(recv), count * static_cast<size_t>(context->size));
    options.setTag(tag);
    ::gloo::allgather(options);
  });
}

void ReduceScatter(const GlooContext& context, Algorithm algorithm, const void* send, void* recv,
                   size_t recv_count, chorus_dtype dtype, chorus_reduce_op op, uint32_t tag) {
  const size_t block = recv_count * chorus_dtype_size(dtype);
  const size_t total = block * static_cast<size_t>(context->size);
  const auto scratch = std::make_unique_for_overwrite<unsigned char[]>(total);
  std::memcpy(scratch.get(), send, total);
  AllReduce(context, algorithm, scratch.get(), scratch.get(),
            recv_count * static_cast<size_t>(context->size), dtype, op, tag);
  std::memcpy(recv, scratch.get() + block * static_cast<size_t>(context->rank), block);
}

void Barrier(const GlooContext& context, uint32_t tag) {
  ::gloo::BarrierOptions options(context);
  options.setTag(tag);
  ::gloo::barrier(options);
}

std::vector<CallSignature> GatherCalls(const GlooContext& context, const CallSignature& mine,
                                       uint32_t tag) {
  constexpr size_t kFields = sizeof(CallSignature) / sizeof(int64_t);
  std::vector<CallSignature> all(static_cast<size_t>(context->size));
  CallSignature input = mine;
  ::gloo::AllgatherOptions options(context);
  options.setInput(reinterpret_cast<int64_t*>(&input), kFields);
  options.setOutput(reinterpret_cast<int64_t*>(all.data()), kFields * all.size());
  options.setTag(tag);
  ::gloo::allgather(options);
  return all;
}

}  // namespace chorus::gloo_plugin
