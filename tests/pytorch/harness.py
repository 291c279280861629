"""What the chorus_torch tests share: starting ranks as real processes on 127.0.0.1 and joining
them into a torch.distributed job.

Each test runs `body(rank, size, *args)` in `size` processes (torch.multiprocessing, start method
spawn); a rank that raises fails the test with its traceback. The build tree's chorus_torch comes
first on PYTHONPATH (CTest sets it), and its libchorus finds the build tree's plugins, as every
chorus test does.
"""

import atexit
import datetime
import os
import shutil
import socket
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def file_init_method():
    """A FileStore rendezvous in a fresh temporary folder (no port to race for), removed when
    the test's main process exits."""
    folder = tempfile.mkdtemp(prefix="chorus_torch_test_")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return "file://" + os.path.join(folder, "store")


def tcp_init_method():
    return "tcp://127.0.0.1:%d" % free_port()


def init(rank, size, init_method, backend="chorus", timeout_s=60):
    import chorus_torch  # noqa: F401  (registers the backend "chorus")

    torch.set_num_threads(1)  # two cores for every rank of the job
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=timeout_s))


def _entry(rank, size, body, args):
    body(rank, size, *args)


def run(body, size, *args):
    """Runs body(rank, size, *args) in `size` processes; raises when one of them fails."""
    mp.start_processes(_entry, args=(size, body, args), nprocs=size, join=True,
                       start_method="spawn")


def say(rank, *words):
    print("[rank %d]" % rank, *words, flush=True)
    sys.stdout.flush()
