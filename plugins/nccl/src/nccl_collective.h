// The NCCL collective ("nccl") across workers: one rank per process and GPU. Rank 0 makes the
// ncclUniqueId and hands it over through the rendezvous store; every rank then joins with
// ncclCommInitRankConfig on a non-blocking communicator, polled with the time-out. Buffers are
// device memory of the cuda enumerator's device the communicator was created on.
// Operations run on the caller's stream when given one (then "complete" means "enqueued"), else
// on the communicator's own stream, waited on with the time-out. A time-out, abort() or an
// asynchronous NCCL error aborts the communicator (ncclCommAbort): it is unusable afterwards.
#ifndef CHORUS_NCCL_NCCL_COLLECTIVE_H_
#define CHORUS_NCCL_NCCL_COLLECTIVE_H_

#include <chorus/plugin.h>

namespace chorus::nccl {

const chorus_collective_api* NcclCollectiveTable();

}  // namespace chorus::nccl

#endif  // CHORUS_NCCL_NCCL_COLLECTIVE_H_
