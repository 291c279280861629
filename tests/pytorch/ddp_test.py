"""DistributedDataParallel of a small CNN over "chorus" (TCPStore rendezvous): after a few
steps every rank holds the same weights, and the same weights as the same training over "gloo"
(within float tolerance). Each rank starts from different weights, so DDP's initial broadcast
must work too; small buckets put several all-reduces in flight during the backward pass.

    ddp_test.py WORLD_SIZE [killed]

killed: the last rank dies (SIGKILL) at the start of its third step's backward pass; the others'
training fails at that step with chorus's message naming it, well within the group's time-out.
"""

import copy
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import harness

STEPS = 5


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3)
        self.conv2 = nn.Conv2d(8, 8, 3)
        self.fc = nn.Linear(8 * 5 * 5, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


def batch(rank, step):
    g = torch.Generator().manual_seed(100 * rank + step)
    return torch.randn(16, 1, 28, 28, generator=g), torch.randint(0, 10, (16,), generator=g)


def train(model, group, rank):
    ddp = DDP(model, process_group=group, bucket_cap_mb=0.005)  # a few KiB: several buckets
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    for step in range(STEPS):
        x, y = batch(rank, step)
        optimizer.zero_grad()
        nn.functional.cross_entropy(ddp(x), y).backward()
        optimizer.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def body(rank, size, init_method):
    harness.init(rank, size, init_method)
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(rank)  # different initial weights on every rank
    model = SmallCnn()
    initial_rank0 = torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])
    dist.broadcast(initial_rank0, 0, group=gloo)

    over_chorus = train(copy.deepcopy(model), dist.group.WORLD, rank)
    over_gloo = train(copy.deepcopy(model), gloo, rank)

    # Every rank the same weights (compared through gloo, not through the backend under test).
    everyone = [torch.empty_like(over_chorus) for _ in range(size)]
    dist.all_gather(everyone, over_chorus, group=gloo)
    for r in range(size):
        diff = (everyone[r] - over_chorus).abs().max().item()
        assert diff == 0, "rank %d's weights differ from rank %d's by %g" % (r, rank, diff)
    assert not torch.allclose(over_chorus, initial_rank0), "training did not change the weights"
    diff = (over_chorus - over_gloo).abs().max().item()
    assert torch.allclose(over_chorus, over_gloo, rtol=1e-4, atol=1e-5), (
        "chorus and gloo trained different weights (max difference %g)" % diff)
    harness.say(rank, "DDP over chorus == DDP over gloo (max difference %g)" % diff)
    dist.destroy_process_group()


KILLED_TIMEOUT_S = 30


class DieInBackward(torch.autograd.Function):
    """Identity whose backward kills this process (on the model's output: the backward pass's
    first step, before any of DDP's buckets of that step is reduced)."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        os.kill(os.getpid(), signal.SIGKILL)
        return grad


def killed_body(rank, size, init_method):
    harness.init(rank, size, init_method, timeout_s=KILLED_TIMEOUT_S)
    torch.manual_seed(0)
    model = SmallCnn()
    ddp = DDP(model, bucket_cap_mb=0.005)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    victim = size - 1
    for step in range(5):
        x, y = batch(rank, step)
        optimizer.zero_grad()
        start = time.monotonic()
        try:
            out = ddp(x)
            if rank == victim and step == 2:
                out = DieInBackward.apply(out)
            nn.functional.cross_entropy(out, y).backward()
            optimizer.step()
        except RuntimeError as e:
            took = time.monotonic() - start
            harness.say(rank, "step %d failed after %.1f s: %s" % (step, took, str(e)[:300]))
            assert step == 2, "step %d failed, not the step rank %d died in" % (step, victim)
            assert took < KILLED_TIMEOUT_S / 2, took
            assert "PEER_LOST" in str(e) and "rank %d " % victim in str(e), str(e)
            os._exit(0)  # the job is broken: no goodbyes
    raise AssertionError("training went on with rank %d gone" % victim)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "killed":
        # The killed rank ends by SIGKILL; the survivors' asserts are the test (exit code 0).
        size = int(sys.argv[1])
        init_method = harness.tcp_init_method()
        ctx = mp.get_context("spawn")
        ranks = [ctx.Process(target=killed_body, args=(r, size, init_method)) for r in range(size)]
        for p in ranks:
            p.start()
        for p in ranks:
            p.join(90)
        codes = [p.exitcode for p in ranks]
        for p in ranks:
            if p.is_alive():
                p.kill()
        want = [0] * (size - 1) + [-signal.SIGKILL]
        assert codes == want, "exit codes %s, want %s" % (codes, want)
        print("survivors failed naming the killed rank; exit codes", codes)
    else:
        harness.run(body, int(sys.argv[1]), harness.tcp_init_method())
