"""Ranks that disagree on a collective fail, every one of them, at once and with chorus's words,
instead of hanging or computing garbage: the communicator all-gathers each operation's signature
(operation, count, dtype, reduce op, root, the collective it is routed to) before running it
(core/src/collective/communicator.cc, Communicator::CheckSignature), so a rank with another numel,
dtype, reduce op, root or operation makes every rank's work fail with

    chorus: <op> failed: INVALID_ARGUMENT: collective mismatch across workers at operation #N:
    rank 0 issues <its signature> but rank R issues <its signature>; every worker must issue ...

well within the group's time-out (60 s here; each failure must come in < 20 s), leaving the
tensors as they were, the work's future failed as well, and the group usable afterwards.

    mismatch_test.py WORLD_SIZE

The last rank is the odd one out; the collective is whatever the environment picks (AUTO,
CHORUS_COMMUNICATION=core_ring, CHORUS_ALGORITHM rules that route the two sizes to different
collectives: the message then names them).
"""

import re
import sys
import time

import torch
import torch.distributed as dist

import bounded
import harness

TIMEOUT_S = 60  # the group's
WITHIN_S = 20  # what a mismatch may take to fail


def _root(rank):
    opts = dist.BroadcastOptions()
    opts.rootRank = rank
    return opts


def cases(rank, size, odd):
    """(name, the op's name in each rank's message, signature on rank 0, signature on the odd
    rank, start) for each case; start() issues the operation and returns its work and the tensors
    (with their contents before) that must stay as they were."""
    def filled(n, dtype=torch.float32, value=None):
        return torch.full((n,), float(rank + 1 if value is None else value), dtype=dtype)

    def allreduce(n, dtype=torch.float32, op=dist.ReduceOp.SUM):
        def start():
            t = filled(n, dtype)
            return dist.all_reduce(t, op=op, async_op=True), [t]
        return start

    def broadcast(n, dtype=torch.float32, root=0):
        def start():
            t = filled(n, dtype)
            return dist.broadcast(t, root, async_op=True), [t]
        return start

    def allgather_into(n, dtype=torch.float32):
        def start():
            t, out = filled(n, dtype), filled(n * size, dtype, value=-7)
            return dist.all_gather_into_tensor(out, t, async_op=True), [t, out]
        return start

    def allgather_list(n):
        def start():
            t, outs = filled(n), [filled(n, value=-7) for _ in range(size)]
            return dist.all_gather(outs, t, async_op=True), [t] + outs
        return start

    def reduce_scatter_tensor(n, dtype=torch.float32):
        def start():
            t, out = filled(n * size, dtype), filled(n, dtype, value=-7)
            return dist.reduce_scatter_tensor(out, t, async_op=True), [t, out]
        return start

    def reduce_scatter_list(n, dtype):
        def start():
            ins, out = [filled(n, dtype) for _ in range(size)], filled(n, dtype, value=-7)
            return dist.reduce_scatter(out, ins, async_op=True), ins + [out]
        return start

    def coalesced(dtypes):
        def start():
            ts = [filled(8, d) for d in dtypes]
            pg = dist.distributed_c10d._get_default_group()
            return pg.allreduce_coalesced(ts, dist.AllreduceCoalescedOptions()), ts
        return start

    f32, f64 = torch.float32, torch.float64
    both = lambda word: (word, word)  # noqa: E731
    return [
        ("all_reduce numel", both("allreduce"), "all_reduce of 1000 f32 (sum)",
         "all_reduce of 1001 f32 (sum)", allreduce(1001 if odd else 1000)),
        ("all_reduce dtype", both("allreduce"), "all_reduce of 1000 f32 (sum)",
         "all_reduce of 1000 f64 (sum)", allreduce(1000, f64 if odd else f32)),
        ("all_reduce 4 MiB numel", both("allreduce"), "all_reduce of 1048576 f32 (sum)",
         "all_reduce of 1048577 f32 (sum)", allreduce((1 << 20) + (1 if odd else 0))),
        ("all_reduce empty", both("allreduce"), "all_reduce of 0 f32 (sum)",
         "all_reduce of 4 f32 (sum)", allreduce(4 if odd else 0)),
        ("all_reduce reduce op", both("allreduce"), "all_reduce of 1000 f32 (sum)",
         "all_reduce of 1000 f32 (max)",
         allreduce(1000, op=dist.ReduceOp.MAX if odd else dist.ReduceOp.SUM)),
        ("broadcast numel", both("broadcast"), "broadcast of 1000 f32 from rank 0",
         "broadcast of 1001 f32 from rank 0", broadcast(1001 if odd else 1000)),
        ("broadcast dtype", both("broadcast"), "broadcast of 1000 i32 from rank 0",
         "broadcast of 1000 i64 from rank 0",
         broadcast(1000, torch.int64 if odd else torch.int32)),
        ("broadcast root", both("broadcast"), "broadcast of 1000 f32 from rank 0",
         "broadcast of 1000 f32 from rank 1", broadcast(1000, root=1 if odd else 0)),
        ("all_gather_into_tensor numel", both("_allgather_base"), "all_gather of 100 f32",
         "all_gather of 101 f32", allgather_into(101 if odd else 100)),
        ("all_gather_into_tensor dtype", both("_allgather_base"), "all_gather of 100 f32",
         "all_gather of 100 f16", allgather_into(100, torch.float16 if odd else f32)),
        ("all_gather numel", both("allgather"), "all_gather of 100 f32", "all_gather of 101 f32",
         allgather_list(101 if odd else 100)),
        ("reduce_scatter_tensor numel", both("_reduce_scatter_base"),
         "reduce_scatter of 100 f32 (sum)", "reduce_scatter of 101 f32 (sum)",
         reduce_scatter_tensor(101 if odd else 100)),
        ("reduce_scatter_tensor dtype", both("_reduce_scatter_base"),
         "reduce_scatter of 100 f32 (sum)", "reduce_scatter of 100 bf16 (sum)",
         reduce_scatter_tensor(100, torch.bfloat16 if odd else f32)),
        ("reduce_scatter dtype", both("reduce_scatter"), "reduce_scatter of 10 i32 (sum)",
         "reduce_scatter of 10 i64 (sum)",
         reduce_scatter_list(10, torch.int64 if odd else torch.int32)),
        ("all_reduce vs broadcast", ("allreduce", "broadcast"), "all_reduce of 1000 f32 (sum)",
         "broadcast of 1000 f32 from rank 0", broadcast(1000) if odd else allreduce(1000)),
        ("coalesced dtype order", both("allreduce_coalesced"), "all_reduce of 8 f32 (sum)",
         "all_reduce of 8 f64 (sum)", coalesced([f64, f32] if odd else [f32, f64])),
    ]


def body(rank, size, init_method):
    harness.init(rank, size, init_method, timeout_s=TIMEOUT_S)
    pg = dist.distributed_c10d._get_default_group()
    if rank == 0:
        bounded.say(rank, "collective %s (%s)" % (pg.collective, pg.plan_source.split(" (")[0]))
    odd_rank = size - 1
    odd = rank == odd_rank
    for name, ops, sig0, sig_odd, start in cases(rank, size, odd):
        began = time.monotonic()
        work, tensors = start()
        before = [t.clone() for t in tensors]
        try:
            work.wait()
        except RuntimeError as e:
            message = str(e).split("\nException raised from")[0]
        else:
            raise AssertionError("rank %d, %s: the operation succeeded (%s)" %
                                 (rank, name, [t[:4].tolist() for t in tensors]))
        took = time.monotonic() - began
        assert took < WITHIN_S, "rank %d, %s: the failure took %.1f s" % (rank, name, took)
        # Each rank's message leads with its own operation; rank 0's and the odd rank's
        # signatures follow (with the collective each is routed to, where they differ).
        pattern = (r"^chorus: %s failed: INVALID_ARGUMENT: collective mismatch across workers at "
                   r"operation #\d+: rank 0 issues %s( on [^ ]+)? but rank %d issues %s"
                   r"( on [^ ]+)?; every worker must issue the same collectives, in the same "
                   r"order, with the same sizes and dtypes" %
                   (ops[1] if odd else ops[0], re.escape(sig0), odd_rank, re.escape(sig_odd)))
        assert re.search(pattern, message), "rank %d, %s: %r does not match %r" % (
            rank, name, message, pattern)
        for t, b in zip(tensors, before):
            assert torch.equal(t, b), "rank %d, %s: a tensor changed: %s -> %s" % (
                rank, name, b[:4].tolist(), t[:4].tolist())
        try:
            work.get_future().wait()
        except RuntimeError as e:
            assert "collective mismatch" in str(e), str(e)
        else:
            raise AssertionError("rank %d, %s: the future completed" % (rank, name))
        if rank in (0, odd_rank):
            bounded.say(rank, "%s: failed after %.2f s: %s" % (name, took, message))
        # The group is still usable, with the right data.
        t = torch.full((1001,), float(rank + 1))
        dist.all_reduce(t)
        assert t.eq(size * (size + 1) / 2).all(), "rank %d after %s: %s" % (
            rank, name, t[:4].tolist())
    dist.barrier()
    dist.destroy_process_group()
    bounded.say(rank, "every mismatch failed on this rank, naming both signatures")


if __name__ == "__main__":
    bounded.run(body, int(sys.argv[1]), (harness.file_init_method(),), limit_s=50)
