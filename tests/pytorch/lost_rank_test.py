"""A rank that exits mid-job makes the others' next operation fail with chorus's error, not
hang: well within the group's time-out, the error names the operation, and the work's future
fails the same way.

    lost_rank_test.py WORLD_SIZE [p2p | stopped]

The last rank leaves after a first all-reduce (rank 0 serves the TCPStore, so the store stays).
With p2p, the others wait in a receive from it (over chorus's point-to-point transport) instead,
and the error must name that rank. With stopped, every rank plays a host of its own
(CHORUS_HOST_ID) and the last rank stops (SIGSTOP) instead: the others' all-reduce ends at the
group's time-out, naming it as the rank that stopped answering.
"""

import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import harness

TIMEOUT_S = 20


def p2p_body(rank, size):
    """The others wait for a message the last rank never sends."""
    lost = size - 1
    start = time.monotonic()
    work = dist.irecv(torch.empty(1 << 16), lost, tag=1)
    try:
        work.wait()
    except RuntimeError as e:
        message = str(e)
    else:
        raise AssertionError("recv from rank %d succeeded with it gone" % lost)
    took = time.monotonic() - start
    harness.say(rank, "recv failed after %.1f s: %s" % (took, message))
    assert took < TIMEOUT_S / 2, "the failure took %.1f s (time-out %d s)" % (took, TIMEOUT_S)
    assert message.startswith("chorus: recv failed: PEER_LOST"), message
    assert "rank %d" % lost in message, message
    # Later point-to-point operations fail at once, naming the first failure.
    start = time.monotonic()
    try:
        if lost > 1:  # to a rank that is still there
            dist.send(torch.ones(4), (rank + 1) % lost, tag=2)
        else:
            dist.recv(torch.empty(4), lost, tag=2)
        raise AssertionError("a point-to-point operation succeeded after a failure")
    except RuntimeError as e:
        assert time.monotonic() - start < 5, time.monotonic() - start
        assert "PEER_LOST" in str(e) or "ABORTED" in str(e), str(e)
    os._exit(0)


STOPPED_TIMEOUT_S = 8


def stopped_body(rank, size, init_method):
    os.environ["CHORUS_HOST_ID"] = "host-%d" % rank
    harness.init(rank, size, init_method, timeout_s=STOPPED_TIMEOUT_S)
    store = dist.distributed_c10d._get_default_store()
    t = torch.ones(1001)
    dist.all_reduce(t)
    stopped = size - 1
    if rank == stopped:
        harness.say(rank, "stopping")
        store.set("stopped_pid", str(os.getpid()))
        os.kill(os.getpid(), signal.SIGSTOP)
        os._exit(0)  # continued by rank 0 once it has seen the failure
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(1001))
        raise AssertionError("all_reduce succeeded with rank %d stopped" % stopped)
    except RuntimeError as e:
        message = str(e)
    took = time.monotonic() - start
    harness.say(rank, "failed after %.1f s: %s" % (took, message))
    # Continue the stopped rank (so that it can exit) once every survivor has its message: a
    # heartbeat of it during another's diagnosis would make it look alive.
    store.add("survivors_failed", 1)
    if rank == 0:
        while int(store.add("survivors_failed", 0)) < size - 1:
            time.sleep(0.05)
        os.kill(int(store.get("stopped_pid")), signal.SIGCONT)
    assert took < STOPPED_TIMEOUT_S + 10, took
    assert message.startswith("chorus: allreduce failed: "), message
    assert "rank %d (on host host-%d) stopped answering" % (stopped, stopped) in message, message
    os._exit(0)


def body(rank, size, init_method, mode):
    if mode == "stopped":
        return stopped_body(rank, size, init_method)
    harness.init(rank, size, init_method, timeout_s=TIMEOUT_S)
    t = torch.ones(1001)
    dist.all_reduce(t)
    assert t[0].item() == size
    if rank == size - 1:
        harness.say(rank, "leaving the job")
        os._exit(0)  # no goodbye: as a crashed process
    if mode == "p2p":
        p2p_body(rank, size)

    start = time.monotonic()
    work = dist.all_reduce(torch.ones(1 << 16), async_op=True)
    future = work.get_future()
    try:
        work.wait()
    except RuntimeError as e:
        message = str(e)
    else:
        raise AssertionError("all_reduce succeeded with rank %d gone" % (size - 1))
    took = time.monotonic() - start
    harness.say(rank, "failed after %.1f s: %s" % (took, message))
    assert took < TIMEOUT_S + 5, "the failure took %.1f s (time-out %d s)" % (took, TIMEOUT_S)
    assert message.startswith("chorus: allreduce failed: PEER_LOST: rank %d " % (size - 1)), \
        message  # the rank that died, not the neighbour that passed the failure on
    try:
        future.wait()
        raise AssertionError("the future completed although the work failed")
    except RuntimeError as e:
        assert "chorus: allreduce failed" in str(e), str(e)
    # Later operations fail as well, at once, rather than wait on the missing rank.
    start = time.monotonic()
    try:
        dist.barrier()
        raise AssertionError("barrier succeeded with a rank gone")
    except RuntimeError as e:
        harness.say(rank, "barrier failed after %.1f s: %s" % (time.monotonic() - start, e))
    os._exit(0)  # the job is broken: skip the teardown's goodbyes to the lost rank


if __name__ == "__main__":
    harness.run(body, int(sys.argv[1]), harness.tcp_init_method(),
                sys.argv[2] if len(sys.argv) > 2 else "")
