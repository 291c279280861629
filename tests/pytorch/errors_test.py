"""What chorus_torch refuses, it refuses at the call, with an error that names the operation and
the reason, and the group stays usable after it (nothing reached the other ranks):
  - ranks that are not ranks of the group, a receive from itself, split sizes that do not add up,
    inputs of mixed dtypes where chorus gathers one;
  - dtypes chorus does not reduce, named; reduce ops it lacks, named;
  - tensors that are not dense, contiguous CPU tensors; lists of the wrong length or shape;
  - a bad chorus variable (CHORUS_COMMUNICATION), at the group's creation, in chorus's words.
Also: Work.wait(timeout) gives up after its time-out, naming the operation; importing
chorus_torch registers the backend, and importing it again is harmless.

    errors_test.py
"""

import datetime
import importlib
import os
import re
import time

import torch
import torch.distributed as dist

import harness

TIMEOUT_S = 20  # the group's


def expect_error(what, pattern, call):
    try:
        result = call()
        if hasattr(result, "wait"):
            result.wait()
    except (RuntimeError, ValueError) as e:
        text = str(e).split("\nException raised from")[0]
        assert re.search(pattern, text), "%s: %r does not match %r" % (what, text, pattern)
        return text
    raise AssertionError("%s: no error" % what)


def body(rank, size, init_method):
    import chorus_torch

    importlib.reload(chorus_torch)  # a second registration is skipped, not an error
    assert dist.Backend("chorus") == "chorus"
    # A time-out far above what any case here needs, and short enough that a rank stuck in an
    # operation fails the test in seconds rather than minutes.
    harness.init(rank, size, init_method, timeout_s=TIMEOUT_S)
    pg = dist.distributed_c10d._get_default_group()
    assert isinstance(pg, chorus_torch.ProcessGroupChorus) and isinstance(pg, dist.ProcessGroup)
    assert dist.get_backend() == "chorus", dist.get_backend()
    gloo = dist.new_group(backend="gloo")  # to order the ranks without the group under test
    t = torch.ones(4)

    # Arguments that cannot mean anything, refused at the call (nothing is queued).
    expect_error("send to 7", r"^chorus: send: destination 7 is not a rank of this group of 2$",
                 lambda: dist.send(t, 7))
    expect_error("recv from itself", r"^chorus: recv: rank %d receives from itself$" % rank,
                 lambda: dist.recv(t, rank))
    expect_error("reduce root", r"^chorus: reduce: root rank 5 is not a rank of this group of 2$",
                 lambda: pg.reduce([t], _reduce_root(5)))
    expect_error("reduce BAND", r"chorus: reduce: ReduceOp.BAND is not supported",
                 lambda: dist.reduce(torch.ones(3, dtype=torch.int32), 0, op=dist.ReduceOp.BAND))
    expect_error("allgather_coalesced dtypes",
                 r"^chorus: allgather_coalesced: the inputs mix Float and Int; chorus gathers one "
                 r"dtype per call$",
                 lambda: pg.allgather_coalesced(
                     [[torch.empty(4), torch.empty(2, dtype=torch.int32)]] * size,
                     [t, torch.ones(2, dtype=torch.int32)]))
    expect_error("alltoall_base splits",
                 r"^chorus: alltoall_base: the input split sizes add up to 6 rows but the input "
                 r"has 4$",
                 lambda: dist.all_to_all_single(torch.empty(4), t, [2] * size, [3] * size))

    expect_error("bool", r"chorus: allreduce: dtype Bool is not supported",
                 lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool)))
    expect_error("int16", r"chorus: broadcast: dtype Short is not supported",
                 lambda: dist.broadcast(torch.ones(3, dtype=torch.int16), 0))
    expect_error("complex64", r"chorus: allreduce: dtype ComplexFloat is not supported",
                 lambda: pg.allreduce([torch.ones(3, dtype=torch.complex64)]))
    for op in ["BAND", "BOR", "BXOR"]:
        expect_error(op, r"chorus: allreduce: ReduceOp.%s is not supported" % op,
                     lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32),
                                             op=getattr(dist.ReduceOp, op)))
    expect_error("reduce_scatter BAND", r"chorus: reduce_scatter: ReduceOp.BAND is not supported",
                 lambda: dist.reduce_scatter(torch.empty(2, dtype=torch.int32),
                                             [torch.ones(2, dtype=torch.int32)] * size,
                                             op=dist.ReduceOp.BAND))
    expect_error("non-contiguous", r"chorus: allreduce: the input tensor is not contiguous",
                 lambda: dist.all_reduce(torch.ones(4, 4).t()))
    expect_error("sparse", r"chorus: allreduce: the input tensor is not dense",
                 lambda: dist.all_reduce(torch.ones(4).to_sparse()))
    expect_error("allgather list", r"chorus: allgather: the output list has 1 tensors",
                 lambda: dist.all_gather([torch.empty(4)], t))
    expect_error("allgather shape", r"chorus: allgather: the output 1 tensor has 3 elements",
                 lambda: dist.all_gather([torch.empty(4), torch.empty(3)] + [torch.empty(4)] *
                                         (size - 2), t))
    expect_error("_allgather_base", r"chorus: _allgather_base: the output tensor has 4 elements",
                 lambda: dist.all_gather_into_tensor(torch.empty(4), t))
    expect_error("_reduce_scatter_base", r"chorus: _reduce_scatter_base: the input tensor is Int",
                 lambda: dist.reduce_scatter_tensor(torch.empty(2),
                                                    torch.ones(2 * size, dtype=torch.int32)))
    expect_error("broadcast root", r"chorus: broadcast: root rank 7 is not a rank",
                 lambda: pg.broadcast([t], _root(7)))

    # An asynchronous operation returns at once, even a small one whose peers have not issued
    # it yet; Work.wait(timeout) gives up after its time-out, naming the operation; the operation
    # itself goes on and completes once every rank has issued it.
    if rank == 0:
        t = torch.ones(3)
        began = time.monotonic()
        work = dist.all_reduce(t, async_op=True)
        took = time.monotonic() - began
        assert took < 5, (
            "all_reduce(async_op=True) of 3 floats returned only after %.1f s, %s: the caller "
            "waited for rank 1, which waits for rank 0 (group time-out %d s)" %
            (took, "its work failed" if work.is_completed() and not work.is_success() else
             "its work done" if work.is_completed() else "its work pending", TIMEOUT_S))
        expect_error("Work.wait", r"^chorus: allreduce did not complete within the time-out of "
                     r"0\.3 s \(Work\.wait\)", lambda: work.wait(datetime.timedelta(seconds=0.3)))
        dist.barrier(group=gloo)
        assert work.wait() and t[0].item() == size, t
    else:
        dist.barrier(group=gloo)  # until rank 0's wait has timed out
        dist.all_reduce(torch.ones(3))

    # A chorus variable with a bad value fails the group's creation on every rank with chorus's
    # message (it lists the collectives there are).
    os.environ["CHORUS_COMMUNICATION"] = "no_such_collective"
    text = expect_error("CHORUS_COMMUNICATION",
                        r"^chorus: creating the process group failed: INVALID_ARGUMENT: "
                        r".*CHORUS_COMMUNICATION.*no_such_collective.*core_ring",
                        lambda: dist.new_group(backend="chorus"))
    del os.environ["CHORUS_COMMUNICATION"]
    harness.say(rank, text)

    # Nothing above reached the other ranks: the group still works.
    t = torch.full((1001,), float(rank + 1))
    dist.all_reduce(t)
    assert t[0].item() == size * (size + 1) / 2, t[0].item()
    dist.barrier()
    dist.destroy_process_group()
    harness.say(rank, "every refusal named its operation and reason")


def _root(rank):
    opts = dist.BroadcastOptions()
    opts.rootRank = rank
    return opts


def _reduce_root(rank):
    opts = dist.ReduceOptions()
    opts.rootRank = rank
    return opts


if __name__ == "__main__":
    harness.run(body, 2, harness.file_init_method())
