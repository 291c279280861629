#!/usr/bin/python3
"""The tutorial's CNN on Fashion-MNIST with torch DistributedDataParallel, over the backend
"chorus" (chorus_torch) and over "gloo", one after the other, to compare them.

    PYTHONPATH=build/release/python /usr/bin/python3 examples/pytorch/fashion_mnist_ddp.py
    ... --backends chorus,gloo --workers 2 --epochs 1 --data-dir /usr/share/datasets/fashion-mnist

The model and the training are those of examples/fashion_mnist (TensorFlow's "Custom training
with tf.distribute.Strategy" tutorial): Conv2d 1->32 3x3 relu, max-pool 2, Conv2d 32->64 3x3 relu,
max-pool 2, flatten, Linear 64 relu, Linear 10; cross-entropy, Adam lr 1e-3, global batch 64.
For each backend, --workers processes (torch.multiprocessing, start method spawn) join one job
over a fresh tcp:// port on 127.0.0.1, one torch thread each. Every epoch the 60000 training
images are shuffled the same way on every rank (seed 1000 + epoch); each global batch of 64 is
split into one slice per rank (64 / workers images), the last partial batch dropped (937 steps an
epoch). Each rank evaluates its share of the 10000 test images; the counts are summed over the
backend under test. At the end every rank's weights are compared bit for bit (all_gather through
a gloo group, not through the backend under test).

The data are the IDX files of Debian's dataset-fashion-mnist package, found as the C++ example
finds them (examples/fashion_mnist/fashion_mnist_files.cc): NAME, else NAME.gz, in --data-dir
(default /usr/share/datasets/fashion-mnist).
"""

import argparse
import datetime
import gzip
import importlib
import json
import os
import shutil
import socket
import struct
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

DEBIAN_DATA_DIR = "/usr/share/datasets/fashion-mnist"
FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
GLOBAL_BATCH = 64
NUM_CLASSES = 10


class DataError(Exception):
    pass


def find_files(data_dir, named_dir):
    """The four files' paths (NAME, else NAME.gz); DataError naming what is missing."""
    paths, missing = [], []
    for name in FILES:
        found = next((os.path.join(data_dir, c) for c in (name, name + ".gz")
                      if os.path.isfile(os.path.join(data_dir, c))), None)
        paths.append(found)
        if found is None:
            missing.append(name + "[.gz]")
    if len(missing) == len(FILES):
        raise DataError("no Fashion-MNIST files in '%s'%s" % (
            data_dir, "" if named_dir else
            " (install them: apt-get install -y dataset-fashion-mnist, or give --data-dir)"))
    if missing:
        raise DataError("Fashion-MNIST in '%s' is incomplete: missing %s" %
                        (data_dir, ", ".join(missing)))
    return paths


def read_idx(path):
    """An IDX file of unsigned bytes (gzip-compressed or not) as a numpy array."""
    with open(path, "rb") as f:
        compressed = f.read(2) == b"\x1f\x8b"
    with (gzip.open if compressed else open)(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[3] == 0:
        raise DataError("%s: not an IDX file (bad magic number)" % path)
    if data[2] != 0x08:
        raise DataError("%s: unsupported IDX element type 0x%02x; only unsigned byte (0x08)"
                        % (path, data[2]))
    ndims = data[3]
    header = 4 + 4 * ndims
    if len(data) < header:
        raise DataError("%s: truncated header" % path)
    dims = struct.unpack(">%dI" % ndims, data[4:header])
    if len(data) - header != int(np.prod(dims)):
        raise DataError("%s: dimensions %s need %d bytes of data, the file has %d" %
                        (path, "x".join(map(str, dims)), int(np.prod(dims)), len(data) - header))
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)


def load_set(images_path, labels_path, what):
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
        raise DataError("%s: images %s and labels %s do not match" %
                        (what, images.shape, labels.shape))
    if labels.max() >= NUM_CLASSES:
        raise DataError("%s: a label is %d; classes are 0..9" % (what, labels.max()))
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)  # [n, 1, 28, 28]
    return x, torch.from_numpy(labels.astype(np.int64))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(64 * 5 * 5, 64)
        self.fc2 = nn.Linear(64, NUM_CLASSES)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc2(torch.relu(self.fc1(torch.flatten(x, 1))))


def say(text):
    print(text, flush=True)


def worker(rank, size, backend, init_method, paths, options, result_path):
    torch.set_num_threads(1)  # the machine's cores are shared by the ranks
    if backend == "chorus":
        importlib.import_module("chorus_torch")  # registers the backend "chorus"
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=options["timeout"]))
    # Weights are compared through gloo, whatever the backend under test.
    check_group = dist.group.WORLD if backend == "gloo" else dist.new_group(backend="gloo")
    pg = dist.distributed_c10d._get_default_group()
    collective = getattr(pg, "collective", None)
    if rank == 0 and collective is not None:
        say("   %s: chorus runs collective '%s' (%s)" % (backend, collective, pg.plan_source))

    train_x, train_y = load_set(paths[0], paths[1], "the train set")
    test_x, test_y = load_set(paths[2], paths[3], "the test set")
    per_rank = GLOBAL_BATCH // size
    steps = len(train_x) // GLOBAL_BATCH
    if options["max_steps"] > 0:
        steps = min(steps, options["max_steps"])

    torch.manual_seed(0)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = Cnn()
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    epochs = []
    for epoch in range(options["epochs"]):
        order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(1000 + epoch))
        ddp.train()
        loss_sum = 0.0
        dist.barrier()
        start = time.perf_counter()
        for step in range(steps):
            first = step * GLOBAL_BATCH + rank * per_rank
            index = order[first:first + per_rank]
            optimizer.zero_grad()
            loss = loss_fn(ddp(train_x[index]), train_y[index])
            loss.backward()
            optimizer.step()
            loss_sum += loss.item()
        dist.barrier()
        train_s = time.perf_counter() - start

        # The test set, one share per rank; correct answers and losses summed over the ranks.
        model.eval()
        start = time.perf_counter()
        share = slice(rank * len(test_x) // size, (rank + 1) * len(test_x) // size)
        with torch.no_grad():
            logits = torch.cat([model(b) for b in torch.split(test_x[share], 1000)])
        correct = (logits.argmax(1) == test_y[share]).sum().item()
        totals = torch.tensor([loss_sum, float(steps), float(correct)], dtype=torch.float64)
        dist.all_reduce(totals)
        test_s = time.perf_counter() - start
        epochs.append({"epoch": epoch + 1, "train_s": train_s, "test_s": test_s,
                       "loss": totals[0].item() / totals[1].item(),
                       "accuracy": totals[2].item() / len(test_x), "steps": steps})
        if rank == 0:
            e = epochs[-1]
            say("   %s: epoch %d/%d: %d steps in %.1f s (%.1f ms a step), loss %.4f, "
                "test accuracy %.2f%% (test %.1f s)" %
                (backend, e["epoch"], options["epochs"], steps, train_s, 1e3 * train_s / steps,
                 e["loss"], 100 * e["accuracy"], test_s))

    # Every rank must hold the same weights, bit for bit.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(size)]
    dist.all_gather(everyone, flat, group=check_group)
    for r in range(size):
        assert torch.equal(everyone[r], flat), (
            "%s: rank %d's weights differ from rank %d's (max difference %g)" %
            (backend, r, rank, (everyone[r] - flat).abs().max().item()))
    if rank == 0:
        say("   %s: the %d ranks hold the same %d weights" % (backend, size, flat.numel()))
        with open(result_path, "w") as f:
            json.dump({"backend": backend, "collective": collective, "epochs": epochs}, f)
    dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(
        description="The tutorial's CNN on Fashion-MNIST under torch DistributedDataParallel, "
                    "over chorus and over gloo")
    parser.add_argument("--backends", default="chorus,gloo",
                        help="comma-separated torch.distributed backends, run one after the "
                             "other (default chorus,gloo)")
    parser.add_argument("--workers", type=int, default=2, help="processes per backend (default 2)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=0,
                        help="at most this many steps an epoch (default 0: the whole epoch, 937)")
    parser.add_argument("--data-dir", default=None,
                        help="the folder of the four IDX files (default %s, Debian's "
                             "dataset-fashion-mnist)" % DEBIAN_DATA_DIR)
    parser.add_argument("--timeout", type=float, default=300,
                        help="the process groups' time-out in seconds (default 300)")
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    if not backends:
        parser.error("--backends: no backend given")
    if args.workers < 1 or GLOBAL_BATCH % args.workers:
        parser.error("--workers must divide the global batch of %d" % GLOBAL_BATCH)
    if args.epochs < 1:
        parser.error("--epochs must be at least 1")
    try:
        paths = find_files(args.data_dir or DEBIAN_DATA_DIR, args.data_dir is not None)
    except DataError as e:
        print("fashion_mnist_ddp.py: %s" % e, file=sys.stderr)
        return 2
    if "chorus" in backends:
        try:
            importlib.import_module("chorus_torch")
        except ImportError as e:
            print("fashion_mnist_ddp.py: cannot import chorus_torch (%s); build it with "
                  "`cmake --build build/release --target chorus_torch` and put build/release/python "
                  "on PYTHONPATH" % e, file=sys.stderr)
            return 2

    say("Fashion-MNIST from %s; the CNN, Adam 1e-3, global batch %d over %d workers "
        "(%d each), %d epoch(s)%s" %
        (os.path.dirname(paths[0]), GLOBAL_BATCH, args.workers, GLOBAL_BATCH // args.workers,
         args.epochs, ", at most %d steps each" % args.max_steps if args.max_steps else ""))
    options = {"epochs": args.epochs, "max_steps": args.max_steps, "timeout": args.timeout}
    folder = tempfile.mkdtemp(prefix="fashion_mnist_ddp_")
    results = {}
    try:
        for backend in backends:
            result_path = os.path.join(folder, backend + ".json")
            init_method = "tcp://127.0.0.1:%d" % free_port()
            mp.start_processes(worker, nprocs=args.workers, join=True, start_method="spawn",
                               args=(args.workers, backend, init_method, paths, options,
                                     result_path))
            with open(result_path) as f:
                results[backend] = json.load(f)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    # The comparison: one line per backend.
    labels = {b: b + (" (%s)" % results[b]["collective"] if results[b]["collective"] else "")
              + ":" for b in backends}
    width = max(len(label) for label in labels.values())
    first = results[backends[0]]["epochs"][-1]["train_s"]
    for i, backend in enumerate(backends):
        last = results[backend]["epochs"][-1]
        say("%-*s epoch time %6.1f s, loss %.4f, test accuracy %.2f%%%s" %
            (width, labels[backend], last["train_s"], last["loss"], 100 * last["accuracy"],
             " (%.2fx %s's time)" % (last["train_s"] / first, backends[0]) if i else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
