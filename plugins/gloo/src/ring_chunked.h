// ring_chunked: Gloo's AllreduceRingChunked<T>, the class-based algorithm.
#ifndef CHORUS_PLUGINS_GLOO_RING_CHUNKED_H_
#define CHORUS_PLUGINS_GLOO_RING_CHUNKED_H_

#include <chorus/plugin.h>
#include <gloo/context.h>

#include <cstddef>
#include <memory>

namespace chorus::gloo_plugin {

// All-reduces `count` elements at `data` in place over every rank of `context` with
// gloo::AllreduceRingChunked<T> (Gloo has ring_chunked only in its class-based API, not in
// gloo::allreduce()). That class counts elements and bytes in int, so a buffer of more than
// INT_MAX bytes runs as several pieces, one after the other. count > 0. Throws what Gloo throws.
void RingChunkedAllReduce(const std::shared_ptr<::gloo::Context>& context, void* data, size_t count,
                          chorus_dtype dtype, chorus_reduce_op op);

}  // namespace chorus::gloo_plugin

#endif  // CHORUS_PLUGINS_GLOO_RING_CHUNKED_H_
