"""Every operation chorus_torch implements, on every dtype chorus reduces, at sizes 0, 1, 1001
and 1 << 20 elements, against a reference each rank computes from every rank's inputs (they are
drawn from seeds, so each rank can make all of them), and the common ones against gloo.

    ops_test.py WORLD_SIZE [EXPECTED_COLLECTIVE]

EXPECTED_COLLECTIVE: the collective chorus must have picked (e.g. core_ring under
CHORUS_COMMUNICATION=core_ring): the variable reaches chorus through the backend.
"""

import sys
import warnings

import torch
import torch.distributed as dist

import harness

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8, torch.int8]
SIZES = [0, 1, 1001, 1 << 20]
# 1 << 20 elements for these only, to keep the test short on two cores.
LARGE_DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.uint8]
OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG}


def values(rank, n, dtype, op="SUM", salt=0):
    """Rank `rank`'s input: small integers, so that every reduction is exact in every dtype
    (a product of 3 ranks' values at most 27, a sum within [-9, 9])."""
    g = torch.Generator().manual_seed(1000003 * rank + 7919 * n + 31 * salt + 1)
    lo, hi = (1, 3) if op == "PRODUCT" else ((0, 3) if dtype == torch.uint8 else (-3, 3))
    return torch.randint(lo, hi + 1, (n,), generator=g, dtype=torch.int64).to(dtype)


def reduce_ref(tensors, op, size):
    wide = torch.stack([t.to(torch.float64 if t.is_floating_point() else torch.int64)
                        for t in tensors])
    if op == "SUM":
        out = wide.sum(0)
    elif op == "PRODUCT":
        out = wide.prod(0)
    elif op == "MIN":
        out = wide.min(0).values
    elif op == "MAX":
        out = wide.max(0).values
    elif tensors[0].is_floating_point():  # AVG
        out = wide.sum(0) / size
    else:  # AVG of integers truncates toward zero (chorus's MEAN)
        out = torch.div(wide.sum(0), size, rounding_mode="trunc")
    return out.to(tensors[0].dtype)


def check(what, got, want):
    if got.dtype != want.dtype or got.shape != want.shape:
        raise AssertionError("%s: got %s %s, want %s %s" % (what, got.dtype, tuple(got.shape),
                                                           want.dtype, tuple(want.shape)))
    if want.is_floating_point():
        # AVG divides: the quotient rounds once in chorus, once here from float64.
        tol = {torch.float16: 1e-3, torch.bfloat16: 8e-3}.get(want.dtype, 1e-6)
        ok = torch.allclose(got.double(), want.double(), rtol=tol, atol=tol)
    else:
        ok = torch.equal(got, want)
    if not ok:
        bad = (got.double() - want.double()).abs().argmax().item()
        raise AssertionError("%s: element %d is %s, want %s" % (what, bad, got[bad].item(),
                                                               want[bad].item()))


def body(rank, size, init_method, expected_collective):
    harness.init(rank, size, init_method)
    pg = dist.distributed_c10d._get_default_group()
    if expected_collective:
        assert pg.collective == expected_collective, (pg.collective, pg.plan_source)
    harness.say(rank, "chorus picked", pg.collective, "--", pg.plan_source)
    root = size - 1  # not rank 0: the root must be honoured
    for dtype in DTYPES:
        floating = dtype.is_floating_point
        for n in SIZES:
            if n == 1 << 20 and dtype not in LARGE_DTYPES:
                continue
            tag = "%s n=%d" % (dtype, n)
            for name, op in OPS.items():
                inputs = [values(r, n, dtype, name) for r in range(size)]
                t = inputs[rank].clone()
                dist.all_reduce(t, op=op)
                check("allreduce %s %s" % (name, tag), t, reduce_ref(inputs, name, size))

            inputs = [values(r, n, dtype, salt=1) for r in range(size)]
            t = inputs[rank].clone() if rank == root else torch.zeros(n, dtype=dtype)
            dist.broadcast(t, src=root)
            check("broadcast " + tag, t, inputs[root])

            outs = [torch.full((n,), 5, dtype=dtype) for _ in range(size)]
            dist.all_gather(outs, inputs[rank])
            for r in range(size):
                check("allgather block %d %s" % (r, tag), outs[r], inputs[r])
            out = torch.empty(n * size, dtype=dtype)
            dist.all_gather_into_tensor(out, inputs[rank])  # _allgather_base
            check("_allgather_base " + tag, out, torch.cat(inputs))

            for name in ["SUM", "MAX"] + (["AVG"] if floating else []):
                # Rank r's list: one block per destination rank.
                lists = [[values(r, n, dtype, name, salt=10 + d) for d in range(size)]
                         for r in range(size)]
                out = torch.empty(n, dtype=dtype)
                dist.reduce_scatter(out, lists[rank], op=OPS[name])
                want = reduce_ref([lists[r][rank] for r in range(size)], name, size)
                check("reduce_scatter %s %s" % (name, tag), out, want)
                out = torch.empty(n, dtype=dtype)
                dist.reduce_scatter_tensor(out, torch.cat(lists[rank]), op=OPS[name])
                check("_reduce_scatter_base %s %s" % (name, tag), out, want)
        harness.say(rank, "dtype", dtype, "ok")

    # allreduce_coalesced, in place: torch's API takes one dtype; the process group's own
    # method takes mixed dtypes (chorus reduces each dtype's tensors packed together).
    for label, mixed in [("float32", [(torch.float32, (3, 5)), (torch.float32, (0,)),
                                      (torch.float32, (1001,))]),
                         ("mixed", [(torch.float32, (3, 5)), (torch.int64, (7,)),
                                    (torch.bfloat16, (2, 2, 2)), (torch.float32, (1001,))])]:
        inputs = [[values(r, torch.Size(shape).numel(), dtype, salt=20 + i).reshape(shape)
                   for i, (dtype, shape) in enumerate(mixed)] for r in range(size)]
        mine = [t.clone() for t in inputs[rank]]
        if label == "mixed":
            pg.allreduce_coalesced(mine, dist.AllreduceCoalescedOptions()).wait()
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "will be deprecated"
                dist.all_reduce_coalesced(mine)
        for i in range(len(mixed)):
            check("allreduce_coalesced %s tensor %d" % (label, i), mine[i].reshape(-1),
                  reduce_ref([inputs[r][i].reshape(-1) for r in range(size)], "SUM", size))

    # Asynchronous: many operations in flight at once complete in order, futures carry outputs.
    tensors = [values(rank, 1001, torch.float32, salt=30 + i) for i in range(8)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    futures = [w.get_future() for w in works[:4]]
    for w in works[4:]:
        w.wait()
    for i, t in enumerate(tensors):
        want = reduce_ref([values(r, 1001, torch.float32, salt=30 + i) for r in range(size)],
                          "SUM", size)
        check("async allreduce %d" % i, t, want)
    for i, f in enumerate(futures):
        check("future %d" % i, f.wait()[0], tensors[i])
    dist.barrier()

    # The same operations through gloo give the same results (a group of its own).
    gloo = dist.new_group(backend="gloo")
    for n in [1, 1001]:
        a = values(rank, n, torch.float32, salt=40)
        b = a.clone()
        dist.all_reduce(a)
        dist.all_reduce(b, group=gloo)
        check("allreduce vs gloo n=%d" % n, a, b)
        outs_c = [torch.empty(n) for _ in range(size)]
        outs_g = [torch.empty(n) for _ in range(size)]
        dist.all_gather(outs_c, values(rank, n, torch.float32, salt=41))
        dist.all_gather(outs_g, values(rank, n, torch.float32, salt=41), group=gloo)
        check("allgather vs gloo n=%d" % n, torch.cat(outs_c), torch.cat(outs_g))
        x_c = values(rank, n, torch.float64, salt=42) if rank == 0 else torch.zeros(n, dtype=torch.float64)
        x_g = x_c.clone()
        dist.broadcast(x_c, 0)
        dist.broadcast(x_g, 0, group=gloo)
        check("broadcast vs gloo n=%d" % n, x_c, x_g)
    dist.barrier()
    dist.destroy_process_group()
    harness.say(rank, "all operations ok")


if __name__ == "__main__":
    world = int(sys.argv[1])
    expected = sys.argv[2] if len(sys.argv) > 2 else ""
    harness.run(body, world, harness.file_init_method(), expected)
