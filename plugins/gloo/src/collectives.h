// The five collectives as calls into Gloo, on a connected context and host memory.
#ifndef CHORUS_PLUGINS_GLOO_COLLECTIVES_H_
#define CHORUS_PLUGINS_GLOO_COLLECTIVES_H_

#include <chorus/plugin.h>
#include <gloo/context.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "call_check.h"
#include "options.h"

namespace chorus::gloo_plugin {

using GlooContext = std::shared_ptr<::gloo::Context>;

// Each call runs to completion (or throws what Gloo throws) with the context's time-out. `tag`
// keeps the messages of one operation apart from the others' in Gloo's function API; every rank
// passes the same tag to the same operation. Counts are > 0: count 0 never reaches Gloo (its
// functions reject it), the communicator returns before.

// recv may equal send. ring and bcube: gloo::allreduce() with that AllreduceOptions::Algorithm
// and this plugin's reduce function; ring_chunked: gloo::AllreduceRingChunked<T> on recv.
void AllReduce(const GlooContext& context, Algorithm algorithm, const void* send, void* recv,
               size_t count, chorus_dtype dtype, chorus_reduce_op op, uint32_t tag);

// gloo::broadcast(); the root's data is the source, the others' the destination.
void Broadcast(const GlooContext& context, void* data, size_t count, chorus_dtype dtype, int root,
               uint32_t tag);

// gloo::allgather(): recv holds size * count elements, rank r's block at r * count. send may be
// recv's own block (in place).
void AllGather(const GlooContext& context, const void* send, void* recv, size_t count,
               chorus_dtype dtype, uint32_t tag);

// This Gloo's only reduce-scatter, gloo::ReduceScatterHalvingDoubling<T>, can return on one rank
// before a peer has received that rank's last messages (a peer that then closes the context makes
// the slow rank fail with "Connection closed by peer"), and counts in int. So this is an
// all-reduce of a copy of send (size * recv_count elements) with `algorithm`, of which rank r
// keeps block r: correct for every size and count, at twice the traffic of a true
// reduce-scatter.
void ReduceScatter(const GlooContext& context, Algorithm algorithm, const void* send, void* recv,
                   size_t recv_count, chorus_dtype dtype, chorus_reduce_op op, uint32_t tag);

// gloo::barrier().
void Barrier(const GlooContext& context, uint32_t tag);

// Every rank's `mine`, by gloo::allgather() of a fixed size (call_check.h), rank r's at [r].
std::vector<CallSignature> GatherCalls(const GlooContext& context, const CallSignature& mine,
                                       uint32_t tag);

}  // namespace chorus::gloo_plugin

#endif  // CHORUS_PLUGINS_GLOO_COLLECTIVES_H_
