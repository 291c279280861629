"""The operations chorus_torch builds from a chorus transport's sends and receives (send, recv,
isend/irecv, batch_isend_irecv, gather, scatter, all_to_all_single with equal and uneven splits,
all_to_all, monitored_barrier), reduce and all_gather_coalesced, against the same operations
through gloo in the same job, over sizes 0, 1, odd and large and every chorus dtype (and bool and
complex for the byte-moving ones).

    p2p_test.py WORLD_SIZE [EXPECTED_TRANSPORT | unmatched]

EXPECTED_TRANSPORT: the transport chorus must have picked for them (pg.p2p_transport), e.g. tcp
under CHORUS_P2P_TRANSPORT=tcp. unmatched: a receive whose send never comes ends at the time-out.
"""

import datetime
import os
import sys
import time
import warnings

import torch
import torch.distributed as dist

import harness
from ops_test import check, reduce_ref, values

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8, torch.int8]
SIZES = [0, 1, 1001, 1 << 20]


def data(rank, n, dtype, salt):
    if dtype == torch.bool:
        return values(rank, n, torch.int64, salt=salt) > 0
    if dtype == torch.complex64:
        return torch.complex(values(rank, n, torch.float32, salt=salt),
                             values(rank, n, torch.float32, salt=salt + 1))
    return values(rank, n, dtype, salt=salt)


def same(what, got, want):
    if got.dtype in (torch.bool, torch.complex64):
        assert got.dtype == want.dtype and torch.equal(got, want), what
    else:
        check(what, got, want)


# What gloo (PyTorch 1.13) takes in gather, scatter, all_to_all and reduce: not bfloat16 or bool.
GLOO_DTYPES = [torch.float32, torch.float64, torch.float16, torch.int32, torch.int64, torch.uint8,
               torch.int8]


def both(fn, gloo, dtype=torch.float32):
    """fn(group) under chorus (the default group) and, for the dtypes gloo takes, under gloo;
    returns both results (gloo's None for the others)."""
    return fn(None), (fn(gloo) if dtype in GLOO_DTYPES else None)


def same_as_gloo(what, got, gloo_result):
    if gloo_result is not None:
        same(what, got, gloo_result)


def body(rank, size, init_method, expected_transport):
    harness.init(rank, size, init_method)
    pg = dist.distributed_c10d._get_default_group()
    harness.say(rank, "collective", pg.collective, "p2p transport", pg.p2p_transport)
    if expected_transport:
        assert pg.p2p_transport == expected_transport, pg.p2p_transport
    gloo = dist.new_group(backend="gloo")
    root = size - 1
    nxt, prv = (rank + 1) % size, (rank - 1) % size

    for dtype in DTYPES + [torch.bool, torch.complex64]:
        reducible = dtype in DTYPES
        for n in SIZES:
            if n == 1 << 20 and dtype not in (torch.float32, torch.uint8):
                continue
            tag = "%s n=%d" % (dtype, n)
            mine = data(rank, n, dtype, 1)

            # send/recv around the ring, both directions at once: each rank sends before it
            # receives, so neither may wait for the other's receive.
            got_prv = torch.empty(n, dtype=dtype)
            got_nxt = torch.empty(n, dtype=dtype)
            works = [dist.isend(mine, nxt, tag=3), dist.isend(mine, prv, tag=4)]
            dist.recv(got_prv, prv, tag=3)
            works.append(dist.irecv(got_nxt, nxt, tag=4))
            for w in works:
                w.wait()
            same("recv from previous " + tag, got_prv, data(prv, n, dtype, 1))
            same("recv from next " + tag, got_nxt, data(nxt, n, dtype, 1))

            # gather and scatter against gloo's
            def gather(group):
                outs = [torch.full((n,), 7, dtype=dtype) if dtype != torch.bool else
                        torch.zeros(n, dtype=dtype) for _ in range(size)]
                dist.gather(mine, outs if rank == root else None, dst=root, group=group)
                return outs

            c, g = both(gather, gloo, dtype)
            if rank == root:
                for r in range(size):
                    same("gather block %d %s" % (r, tag), c[r], data(r, n, dtype, 1))
                    same_as_gloo("gather vs gloo %d %s" % (r, tag), c[r], g and g[r])

            def scatter(group):
                out = torch.zeros(n, dtype=dtype)
                parts = [data(r, n, dtype, 2) for r in range(size)] if rank == root else None
                dist.scatter(out, parts, src=root, group=group)
                return out

            c, g = both(scatter, gloo, dtype)
            same("scatter " + tag, c, data(rank, n, dtype, 2))
            same_as_gloo("scatter vs gloo " + tag, c, g)

            # all_to_all_single, equal parts: block r of rank s's input goes to rank r.
            def a2a(group):
                src = torch.cat([data(rank * size + r, n, dtype, 3) for r in range(size)])
                out = torch.empty(n * size, dtype=dtype)
                dist.all_to_all_single(out, src, group=group)
                return out

            c, g = both(a2a, gloo, dtype)
            same("all_to_all_single " + tag, c,
                 torch.cat([data(s * size + rank, n, dtype, 3) for s in range(size)]))
            same_as_gloo("all_to_all_single vs gloo " + tag, c, g)

            if reducible:
                for name in ["SUM", "MAX"]:
                    def reduce(group, name=name):
                        t = data(rank, n, dtype, 4).clone()
                        dist.reduce(t, dst=root, op=getattr(dist.ReduceOp, name), group=group)
                        return t

                    c, g = both(reduce, gloo, dtype)
                    if rank == root:
                        want = reduce_ref([data(r, n, dtype, 4) for r in range(size)], name, size)
                        same("reduce %s %s" % (name, tag), c, want)
                        same_as_gloo("reduce vs gloo %s %s" % (name, tag), c, g)
                    else:  # chorus leaves the other ranks' tensors as they were
                        same("reduce keeps a non-root's input " + tag, c, data(rank, n, dtype, 4))
        harness.say(rank, "dtype", dtype, "ok")

    # all_to_all_single with uneven splits (rows of 3 elements; some parts empty), and the list
    # form, against gloo.
    def uneven(group):
        send_rows = [(rank + r) % 3 for r in range(size)]  # rows rank sends to r
        recv_rows = [(s + rank) % 3 for s in range(size)]  # rows s sends to rank
        src = data(rank, sum(send_rows) * 3, torch.float32, 5).reshape(-1, 3)
        out = torch.full((sum(recv_rows), 3), -1.0)
        dist.all_to_all_single(out, src, recv_rows, send_rows, group=group)
        return out

    c, g = both(uneven, gloo)
    same("all_to_all_single uneven vs gloo", c, g)
    recv_rows = [(s + rank) % 3 for s in range(size)]
    want = []
    for s in range(size):
        send_rows = [(s + r) % 3 for r in range(size)]
        block = data(s, sum(send_rows) * 3, torch.float32, 5).reshape(-1, 3)
        start = sum(send_rows[:rank])
        want.append(block[start:start + send_rows[rank]])
    same("all_to_all_single uneven", c, torch.cat(want))
    assert c.shape[0] == sum(recv_rows)

    # The list form (gloo has none in PyTorch 1.13): against the reference.
    ins = [data(rank * size + r, 5 + r, torch.int64, 6) for r in range(size)]
    outs = [torch.empty(5 + rank, dtype=torch.int64) for _ in range(size)]
    dist.all_to_all(outs, ins)
    for s in range(size):
        same("all_to_all (lists) from rank %d" % s, outs[s],
             data(s * size + rank, 5 + rank, torch.int64, 6))

    # batch_isend_irecv: a ring exchange of several tensors in one call.
    ops, got = [], []
    for i in range(3):
        got.append(torch.empty(100 + i))
        ops.append(dist.P2POp(dist.isend, data(rank, 100 + i, torch.float32, 7 + i), nxt, tag=i))
        ops.append(dist.P2POp(dist.irecv, got[i], prv, tag=i))
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    for i in range(3):
        same("batch_isend_irecv %d" % i, got[i], data(prv, 100 + i, torch.float32, 7 + i))

    # Receives posted in another order than the sends (tags are independent).
    if rank == 0:
        a, b = torch.empty(64), torch.empty(1 << 18)
        wb = dist.irecv(b, 1, tag=11)
        wa = dist.irecv(a, 1, tag=10)
        wa.wait()
        wb.wait()
        same("out-of-order small", a, data(1, 64, torch.float32, 8))
        same("out-of-order large", b, data(1, 1 << 18, torch.float32, 9))
    elif rank == 1:
        dist.send(data(1, 64, torch.float32, 8), 0, tag=10)
        dist.send(data(1, 1 << 18, torch.float32, 9), 0, tag=11)

    # all_gather_coalesced (torch's API), against gloo's.
    def agc(group):
        ins = [data(rank, 3, torch.float32, 12), data(rank, 1001, torch.float32, 13)]
        outs = [[torch.empty(3), torch.empty(1001)] for _ in range(size)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "will be deprecated"
            dist.all_gather_coalesced(outs, ins, group=group)
        return torch.cat([torch.cat(o) for o in outs])

    c, g = both(agc, gloo)
    same("all_gather_coalesced vs gloo", c, g)
    same("all_gather_coalesced", c,
         torch.cat([torch.cat([data(r, 3, torch.float32, 12), data(r, 1001, torch.float32, 13)])
                    for r in range(size)]))

    # torch's dist.monitored_barrier takes gloo only; the process group's method is chorus's.
    pg.monitored_barrier(datetime.timedelta(seconds=30), True)

    # A receive without a source rank, and a send to itself, fail at the call, naming why.
    for what, call in [("recv without src", lambda: dist.recv(torch.empty(1))),
                       ("send to itself", lambda: dist.send(torch.empty(1), rank))]:
        try:
            call()
        except RuntimeError as e:
            assert "chorus" in str(e), (what, str(e))
        else:
            raise AssertionError(what + " did not fail")
    dist.barrier()
    dist.destroy_process_group()
    harness.say(rank, "point-to-point operations ok")


def unmatched_body(rank, size, init_method, _):
    """A receive whose send never comes fails at the group's time-out, naming what it waited
    for; the rank that never sends waits in a barrier meanwhile."""
    harness.init(rank, size, init_method, timeout_s=UNMATCHED_TIMEOUT_S)
    gloo = dist.new_group(backend="gloo")
    if rank == 0:
        start = time.monotonic()
        try:
            dist.recv(torch.empty(10), 1, tag=5)
            raise AssertionError("a receive without a send completed")
        except RuntimeError as e:
            took = time.monotonic() - start
            harness.say(rank, "recv failed after %.1f s: %s" % (took, e))
            assert UNMATCHED_TIMEOUT_S - 1 < took < UNMATCHED_TIMEOUT_S + 5, took
            assert str(e).startswith("chorus: recv failed: TIMEOUT"), str(e)
            assert "still waiting: receive of 40 bytes from rank 1" in str(e), str(e)
    dist.barrier(group=gloo)
    os._exit(0)  # the chorus group's point-to-point endpoint is aborted: no goodbyes


UNMATCHED_TIMEOUT_S = 6

if __name__ == "__main__":
    world = int(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else ""
    if mode == "unmatched":
        harness.run(unmatched_body, world, harness.file_init_method(), "")
    else:
        harness.run(body, world, harness.file_init_method(), mode)
