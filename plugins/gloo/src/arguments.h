// Checks of the collective's argument structs: every caller mistake becomes
// CHORUS_INVALID_ARGUMENT (or CHORUS_UNSUPPORTED) naming it, before any data moves.
#ifndef CHORUS_PLUGINS_GLOO_ARGUMENTS_H_
#define CHORUS_PLUGINS_GLOO_ARGUMENTS_H_

#include <chorus/plugin.h>

#include <cstddef>

namespace chorus::gloo_plugin {

// The struct itself (present, struct_size large enough), its dtype and reduce op (MEAN is
// CHORUS_UNSUPPORTED), stream NULL (this plugin works on host memory: a stream is
// CHORUS_UNSUPPORTED), buffers non-NULL unless the count is 0, and element counts whose bytes fit
// a size_t. `size` is the communicator's rank count.
const chorus_all_reduce_args& CheckAllReduce(const chorus_all_reduce_args* args);
const chorus_collective_broadcast_args& CheckBroadcast(const chorus_collective_broadcast_args* args,
                                                       int size);
const chorus_collective_all_gather_args& CheckAllGather(
    const chorus_collective_all_gather_args* args, int size);
const chorus_reduce_scatter_args& CheckReduceScatter(const chorus_reduce_scatter_args* args,
                                                     int size);

// count elements of dtype in bytes; CHORUS_INVALID_ARGUMENT when it overflows.
size_t BytesOf(size_t count, chorus_dtype dtype, const char* what);

}  // namespace chorus::gloo_plugin

#endif  // CHORUS_PLUGINS_GLOO_ARGUMENTS_H_
