"""harness.run with a bound, for the tests of what must fail rather than hang (mismatch_test.py,
job_secret_test.py): a rank still running `limit_s` after the start is killed and named, instead
of leaving CTest to kill the whole script at its TIMEOUT.
"""

import sys
import time

import torch.multiprocessing as mp


def _entry(rank, size, body, args):
    body(rank, size, *args)


def run_killing_stragglers(body, size, args=(), limit_s=45):
    """Runs body(rank, size, *args) in `size` processes (spawn). Returns the ranks still running
    limit_s after the start (they are killed), [] when all ended; raises when one of them fails
    (torch.multiprocessing then terminates the others)."""
    context = mp.start_processes(_entry, args=(size, body, tuple(args)), nprocs=size, join=False,
                                 start_method="spawn")
    deadline = time.monotonic() + limit_s
    # join() returns False while some ranks are still running (also each time one of them ends).
    while not context.join(timeout=max(0.1, deadline - time.monotonic())):
        if time.monotonic() < deadline:
            continue
        running = [rank for rank, p in enumerate(context.processes) if p.is_alive()]
        for p in context.processes:
            if p.is_alive():
                p.kill()
        for p in context.processes:
            p.join(5)
        return running
    return []


def run(body, size, args=(), limit_s=45):
    """As run_killing_stragglers, but a rank still running at limit_s fails the test."""
    running = run_killing_stragglers(body, size, args, limit_s)
    if running:
        raise AssertionError("rank(s) %s still running %d s after the start: a hang" %
                             (", ".join(map(str, running)), limit_s))


def say(rank, text):
    """One line, written at once (ranks' lines do not interleave)."""
    sys.stdout.write("[rank %d] %s\n" % (rank, text))
    sys.stdout.flush()
