// The ring collectives, over a RingLink: each operation's data is cut into one block per rank and
// each block into segments; a segment is forwarded as soon as it is reduced or stored, so the
// steps of the ring overlap (pipelining). Host memory; the caller checked the arguments.
#ifndef CHORUS_PLUGINS_RING_GRPC_RING_ALGORITHMS_H_
#define CHORUS_PLUGINS_RING_GRPC_RING_ALGORITHMS_H_

#include <chorus/plugin.h>

#include <cstddef>
#include <cstdint>

#include "ring_link.h"

namespace chorus::ring_grpc {

// What every operation needs besides its arguments.
struct OpContext {
  RingLink* link = nullptr;    // a ring of at least 2 ranks
  uint64_t sequence = 0;       // the operation's number, the same on every rank
  int64_t timeout_ms = 0;      // for every wait
  uint64_t segment_bytes = 0;  // as every rank's
};

// Reduce-scatter then all-gather around the ring. recv may equal send.
void RingAllReduce(const OpContext& context, const void* send, void* recv, size_t count,
                   chorus_dtype dtype, chorus_reduce_op op);

// A pipelined chain from root through root+1, ... to root-1.
void RingBroadcast(const OpContext& context, void* data, size_t count, chorus_dtype dtype,
                   int32_t root);

// recv holds size * count elements, rank r's block at r * count.
void RingAllGather(const OpContext& context, const void* send, void* recv, size_t count,
                   chorus_dtype dtype);

// send holds size * recv_count elements; rank r receives the reduction of block r.
void RingReduceScatter(const OpContext& context, const void* send, void* recv, size_t recv_count,
                       chorus_dtype dtype, chorus_reduce_op op);

// A token twice around the ring: once to learn that every rank arrived, once to tell them.
void RingBarrier(const OpContext& context);

}  // namespace chorus::ring_grpc

#endif  // CHORUS_PLUGINS_RING_GRPC_RING_ALGORITHMS_H_
