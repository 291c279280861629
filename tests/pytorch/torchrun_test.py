"""Under torchrun, as is: init_process_group("chorus") with env:// (torchrun's TCPStore), the
user's three lines. Run without torchrun's variables, this script starts torchrun on itself:

    python3 torchrun_test.py    # = torchrun --nproc_per_node 2 --master_port <free> <this file>

torchrun's own --redirects and --tee must be given: PyTorch 1.13's default "0" fails under
Python 3.11 (its Std.from_str finds no member 0 of the flag), whatever the backend.
"""

import os
import subprocess
import sys


def worker():
    import torch
    import torch.distributed as dist

    import chorus_torch  # noqa: F401  (registers "chorus")

    dist.init_process_group("chorus")
    rank, size = dist.get_rank(), dist.get_world_size()
    assert size == int(os.environ["WORLD_SIZE"]) and rank == int(os.environ["RANK"])
    t = torch.full((1001,), float(rank + 1))
    dist.all_reduce(t)
    assert t.eq(size * (size + 1) / 2).all(), t[:4]
    out = [torch.empty(3) for _ in range(size)]
    dist.all_gather(out, torch.full((3,), float(rank)))
    assert [o[0].item() for o in out] == [float(r) for r in range(size)]
    dist.barrier()
    print("[rank %d] torchrun job over %s ok" % (rank, dist.get_backend()), flush=True)
    dist.destroy_process_group()


def launch():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import harness

    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
               "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
               "--master_port", str(harness.free_port()), "--redirects", "2", "--tee", "2",
               os.path.abspath(__file__)]
    done = subprocess.run(command, timeout=100)
    if done.returncode != 0:
        sys.exit("torchrun failed with exit status %d" % done.returncode)


if __name__ == "__main__":
    if "TORCHELASTIC_RUN_ID" in os.environ or "RANK" in os.environ:
        worker()
    else:
        launch()
