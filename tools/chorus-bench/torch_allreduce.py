#!/usr/bin/python3
"""torch.distributed all_reduce measured the way chorus-bench measures a collective, printed as
chorus-bench's table rows (backend column `torch-<backend>`), so that its rows stand beside
chorus-bench's and mpi-allreduce-baseline's in one table.

    PYTHONPATH=build/release/python /usr/bin/python3 tools/chorus-bench/torch_allreduce.py \\
        -n 2 --backends gloo,chorus -b 4K -e 64M -f 4 -w 5 -i 20 -R 3

f32 SUM on CPU tensors, in place (`dist.all_reduce(tensor)`: torch has no out-of-place
all_reduce, so the out-of-place columns read n/a, as chorus-bench's broadcast's do). It starts
its -n ranks itself (torch.multiprocessing, start method spawn) on 127.0.0.1: one job, a tcp://
rendezvous on a fresh port, one torch thread per rank. The default process group is gloo and
carries only the bookkeeping (the timings to rank 0); each measured backend gets a group of its
own (`dist.new_group(backend=...)`). As chorus-bench (multi_worker_bench.cc, metrics.cc):

- sizes: -b, -b x f, ... up to -e (0 first, then 1, f, ...), rounded down to whole elements;
- for each size the backends alternate, in an order rotated by one per size and per repeat (-R);
- each pass: -w untimed, then -i timed iterations; an iteration copies the input into the tensor
  (outside the timed region), waits in a barrier of the measured group (`dist.barrier(group)`),
  then times the one `dist.all_reduce(tensor, group=group)` (synchronous: it returns once the
  result is there) with time.perf_counter;
- an iteration takes as long as its slowest rank; the row's time is the median over the -i x -R
  timed iterations; algbw = size / time (GB/s, 1e9 B/s), busbw = algbw x 2(n-1)/n;
- element i of rank r holds (i + r) mod 7 + 1; the last iteration of each pass is checked
  against the exact sums (its tensor filled with NaN before the input is copied in); #wrong is
  the most wrong elements of a pass, summed over the ranks; any wrong element makes the exit
  code 1.

chorus's own signature exchange before each collective is off (CHORUS_CHECK_COLLECTIVES=0, as
chorus-bench's check_signatures=false), unless CHORUS_CHECK_COLLECTIVES is set already. The
chorus group runs whatever chorus picks for the job (AUTO, or CHORUS_COMMUNICATION /
CHORUS_ALGORITHM when set): a comment line says which (`pg.collective`) and why.
"""

import argparse
import datetime
import importlib
import os
import re
import shutil
import socket
import statistics
import sys
import tempfile
import time

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError as error:
    sys.exit("torch_allreduce: cannot import torch (%s); it runs under a Python with PyTorch, "
             "e.g. Debian's /usr/bin/python3 with python3-torch" % error)

DESCRIPTION = ("torch.distributed all_reduce (f32 sum, in place, CPU tensors) timed as "
               "chorus-bench times a collective, printed as chorus-bench's table rows")


def parse_size(text):
    """Bytes with an optional suffix K, M or G (powers of 1024), as chorus-bench's sizes.cc."""
    match = re.fullmatch(r"([0-9]+)([KMGkmg]?)", text)
    if not match:
        raise argparse.ArgumentTypeError(
            "bad size '%s'; use bytes with an optional suffix K, M or G, e.g. 4K, 64M" % text)
    shift = {"": 0, "K": 10, "M": 20, "G": 30}[match.group(2).upper()]
    return int(match.group(1)) << shift


def size_sweep(min_bytes, max_bytes, factor):
    """chorus-bench's SizeSweep: min, min x f, ... up to max; 0 first, then 1, f, f^2, ..."""
    sizes = []
    size = min_bytes
    if size == 0:
        sizes.append(0)
        size = 1
    while size <= max_bytes:
        sizes.append(size)
        if size > max_bytes // factor:
            break
        size *= factor
    return sizes


def table_header():
    """chorus-bench's TableHeader (table_output.cc), column for column."""
    first = "# %-23s %14s %12s %6s %6s %5s %-36s %-36s" % (
        "", "", "", "", "", "", "             out-of-place", "               in-place")
    fmt = "# %-23s %14s %12s %6s %6s %5s %10s %8s %8s %7s %10s %8s %8s %7s"
    second = fmt % ("backend", "size", "count", "type", "redop", "root", "time", "algbw",
                    "busbw", "#wrong", "time", "algbw", "busbw", "#wrong")
    third = fmt % ("", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                   "(GB/s)", "(GB/s)", "")
    return "\n".join([first, second, third])


def figures(time_us, size, ranks, wrong):
    """chorus-bench's Figures: time, algbw, busbw, #wrong (all_reduce's busbw factor)."""
    algbw = size / (time_us * 1e3) if time_us > 0 else 0.0
    busbw = algbw * 2 * (ranks - 1) / ranks if ranks > 0 else 0.0
    return " %10.2f %8.3f %8.3f %7d" % (time_us, algbw, busbw, wrong)


def table_row(backend, size, count, ranks, time_us, wrong):
    """chorus-bench's TableRow for an in-place-only row (out-of-place columns n/a)."""
    return ("  %-23s %14d %12d %6s %6s %5d" % (backend, size, count, "f32", "sum", -1) +
            " %10s %8s %8s %7s" % ("n/a", "n/a", "n/a", "n/a") +
            figures(time_us, size, ranks, wrong))


def median(values):
    """metrics.cc's Median: the middle value, the mean of the two middle ones for an even count."""
    return statistics.median(values) if values else 0.0


def measure_pass(options, group, source, work, expected, samples):
    """-w untimed and -i timed iterations, each after a barrier of `group`; the last is checked.
    Appends the timed iterations' times (us) to samples["times"]; returns #wrong."""
    total = options.warmup_iters + options.iters
    wrong = 0
    for it in range(total):
        checked = it == total - 1
        if checked:
            work.fill_(float("nan"))  # chorus-bench's 0xff bytes: no correct result
        work.copy_(source)  # in place: the input copied into the buffer the call works on
        dist.barrier(group=group)
        start = time.perf_counter()
        dist.all_reduce(work, group=group)
        elapsed_us = (time.perf_counter() - start) * 1e6
        if it >= options.warmup_iters:
            samples.append(elapsed_us)
        if checked:
            wrong = int((work != expected).sum().item())
    return wrong


def say(line):
    print(line, flush=True)


def worker(rank, ranks, init_method, options):
    torch.set_num_threads(1)  # the machine's cores are shared by the ranks
    os.environ.setdefault("CHORUS_CHECK_COLLECTIVES", "0")
    if "chorus" in options.backends:
        importlib.import_module("chorus_torch")  # registers the backend "chorus"
    timeout = datetime.timedelta(seconds=options.timeout)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=ranks,
                            timeout=timeout)
    groups = [dist.new_group(backend=b, timeout=timeout) for b in options.backends]
    names = ["torch-" + b for b in options.backends]
    leader = rank == 0
    if leader:
        say("# torch_allreduce: %d ranks (torch.multiprocessing spawn, %s), torch %s, "
            "backends %s" % (ranks, init_method, torch.__version__, ", ".join(names)))
        for backend, group in zip(options.backends, groups):
            if hasattr(group, "collective"):
                say("# torch-%s: chorus collective %s (%s)" %
                    (backend, group.collective, group.plan_source))
        say("# dtype f32, reduce op sum, warm-up %d, iterations %d x %d repeats, backends "
            "alternate per size and repeat; in place only (dist.all_reduce), out of place n/a" %
            (options.warmup_iters, options.iters, options.repeats))
        say("# time: median over iterations of the slowest rank's time, each iteration timed "
            "after a barrier of the measured group; CHORUS_CHECK_COLLECTIVES=%s" %
            os.environ["CHORUS_CHECK_COLLECTIVES"])
        say("# algbw = size / time; busbw = algbw x 2(n-1)/n all_reduce")
        say("#\n# all_reduce (torch.distributed, in place only: torch's all_reduce has no "
            "output tensor)\n" + table_header())

    sizes = size_sweep(options.minbytes, options.maxbytes, options.stepfactor)
    max_count = max(options.maxbytes // 4, 1)
    index = torch.arange(max_count, dtype=torch.int64)
    source_all = ((index + rank) % 7 + 1).to(torch.float32)
    expected_all = sum(((index + r) % 7 + 1) for r in range(ranks)).to(torch.float32)
    work_all = torch.empty(max_count, dtype=torch.float32)
    total_wrong = 0
    for si, size in enumerate(sizes):
        count = size // 4
        size = count * 4
        source, expected, work = source_all[:count], expected_all[:count], work_all[:count]
        samples = [[] for _ in options.backends]
        wrong = [0 for _ in options.backends]
        for repeat in range(options.repeats):
            for k in range(len(options.backends)):
                b = (k + si + repeat) % len(options.backends)
                wrong[b] = max(wrong[b], measure_pass(options, groups[b], source, work,
                                                      expected, samples[b]))
        for b, name in enumerate(names):
            # The slowest rank's time per iteration and #wrong summed, through the default group.
            times = torch.tensor(samples[b], dtype=torch.float64)
            dist.reduce(times, 0, op=dist.ReduceOp.MAX)
            bad = torch.tensor([wrong[b]], dtype=torch.int64)
            dist.reduce(bad, 0, op=dist.ReduceOp.SUM)
            if leader:
                total_wrong += int(bad.item())
                say(table_row(name, size, count, ranks, median(times.tolist()), int(bad.item())))
    dist.barrier()
    if leader and total_wrong > 0:
        print("torch_allreduce: %d wrong elements in total (see the #wrong columns)" %
              total_wrong, file=sys.stderr, flush=True)
    for group in groups:
        dist.destroy_process_group(group)
    dist.destroy_process_group()
    if leader:
        with open(options.verdict_path, "w") as f:
            f.write("%d\n" % total_wrong)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--backends", default="gloo,chorus",
                        help="comma list of torch.distributed backends (default gloo,chorus; "
                             "chorus needs chorus_torch on PYTHONPATH)")
    parser.add_argument("-n", "--workers", type=int, default=2, help="ranks (default 2)")
    parser.add_argument("-b", "--minbytes", type=parse_size, default=4 << 10,
                        help="smallest size (suffix K, M, G; default 4K)")
    parser.add_argument("-e", "--maxbytes", type=parse_size, default=64 << 20,
                        help="largest size (default 64M)")
    parser.add_argument("-f", "--stepfactor", type=parse_size, default=4,
                        help="multiplication factor between sizes (default 4)")
    parser.add_argument("-w", "--warmup_iters", type=int, default=5,
                        help="untimed iterations per row and pass (default 5)")
    parser.add_argument("-i", "--iters", type=int, default=20,
                        help="timed iterations per row and pass (default 20)")
    parser.add_argument("-R", "--repeats", type=int, default=1,
                        help="passes over the backends per size; the median is over every timed "
                             "iteration (default 1)")
    parser.add_argument("--timeout", type=float, default=120,
                        help="seconds each collective (and the rendezvous) may take (default 120)")
    options = parser.parse_args()
    options.backends = [b for b in options.backends.split(",") if b]
    if not options.backends:
        parser.error("--backends: no backend given")
    if len(set(options.backends)) != len(options.backends):
        parser.error("--backends: a backend is given twice")
    if options.minbytes > options.maxbytes:
        parser.error("-b is larger than -e; the minimum size must not exceed the maximum")
    if options.stepfactor < 2:
        parser.error("-f: the multiplication factor must be at least 2")
    if options.warmup_iters < 0 or options.iters < 1 or options.repeats < 1:
        parser.error("-w must be at least 0, -i and -R at least 1")
    if options.workers < 1:
        parser.error("-n must be at least 1")
    if "chorus" in options.backends:
        try:
            importlib.import_module("chorus_torch")
        except ImportError as e:
            print("torch_allreduce: cannot import chorus_torch (%s); build it (cmake --build "
                  "build/release --target chorus_torch) and put build/release/python on "
                  "PYTHONPATH" % e, file=sys.stderr)
            return 2
    for backend in options.backends:
        try:
            dist.Backend(backend)
        except ValueError:
            parser.error("--backends: '%s' is not a torch.distributed backend (gloo, chorus, "
                         "mpi, nccl, or one a package registers)" % backend)
    folder = tempfile.mkdtemp(prefix="torch_allreduce_")
    options.verdict_path = os.path.join(folder, "wrong")  # rank 0 writes the total #wrong there
    try:
        mp.start_processes(worker, args=(options.workers, "tcp://127.0.0.1:%d" % free_port(),
                                         options),
                           nprocs=options.workers, join=True, start_method="spawn")
        with open(options.verdict_path) as f:
            return 1 if int(f.read()) > 0 else 0
    except (mp.ProcessExitedException, mp.ProcessRaisedException) as e:
        print("torch_allreduce: a rank failed: %s" % e, file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
