"""DistributedDataParallel of a small CNN over "chorus" (TCPStore rendezvous): after a few
steps every rank holds the same weights, and the same weights as the same training over "gloo"
(within float tolerance). Each rank starts from different weights, so DDP's initial broadcast
must work too; small buckets put several all-reduces in flight during the backward pass.

    ddp_test.py WORLD_SIZE
"""

import copy
import sys

import torch
import torch.distributed as dist
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


if __name__ == "__main__":
    harness.run(body, int(sys.argv[1]), harness.tcp_init_method())
