"""Ring backend collectives on real processes (loopback), checked against NumPy, at world sizes 2, 3, 4."""
import time

import ml_dtypes
import numpy as np
import pytest

from dist_helpers import run_ranks

# Small segments, a small latency-path threshold and a small shared-memory ring make modest payloads
# exercise multi-segment pipelining, both all-reduce paths and ring-buffer wrap-around.
STRESS_ENV = {
    "TINYTORCH_RING_SEGMENT_BYTES": "4096",
    "TINYTORCH_RING_SMALL_BYTES": "1024",
    "TINYTORCH_RING_SHM_BYTES": "16384",
}
DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.int32, np.int64]
OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX"]
SIZES = [0, 1, 7, 1001, 5003]


FLOATS = {np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32), np.dtype(np.float64)}


def _is_float(dtype):
    return np.dtype(dtype) in FLOATS


class Holder:
    """Any object with a `_data` ndarray is accepted, like a Tensor."""

    def __init__(self, a):
        self._data = a
        self.bumps = 0

    def _bump_version(self):
        self.bumps += 1


def _input(rank, n, dtype, op):
    rng = np.random.default_rng(1000 * rank + n)
    if op == "PRODUCT":
        vals = rng.choice([1.0, 2.0, -1.0, 0.5], size=n) if _is_float(dtype) else rng.choice([1, 2, -1], size=n)
    elif _is_float(dtype):
        vals = rng.integers(-8, 8, size=n) / 4.0
    else:
        vals = rng.integers(-1000, 1000, size=n)
    return np.asarray(vals).astype(dtype)


def _expected(arrays, op, dtype):
    acc = np.stack([a.astype(np.float64) for a in arrays])
    if op == "SUM":
        r = acc.sum(0)
    elif op == "AVG":
        r = acc.mean(0)
    elif op == "PRODUCT":
        r = acc.prod(0)
    elif op == "MIN":
        r = acc.min(0)
    else:
        r = acc.max(0)
    return r.astype(dtype)


def _close(got, want, dtype):
    if _is_float(dtype):
        tol = 1e-2 if np.dtype(dtype).itemsize == 2 else 1e-6
        return np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)
    return np.array_equal(got, want)


def _all_collectives(rank, ws, port):
    import tinytorch
    import tinytorch.distributed as dist

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws, timeout=20)
    assert dist.is_initialized() and dist.get_rank() == rank and dist.get_world_size() == ws
    assert dist.get_backend() == "ring"
    failures = []
    R = dist.ReduceOp
    for dtype in DTYPES:
        for op in OPS:
            if op == "AVG" and not _is_float(dtype):
                continue
            for n in SIZES:
                # all_reduce, through a real tinytorch Tensor for numpy-native dtypes
                mine = _input(rank, n, dtype, op)
                everyone = [_input(r, n, dtype, op) for r in range(ws)]
                want = _expected(everyone, op, dtype)
                if dtype in (np.float32, np.float64, np.int64):
                    t = tinytorch.from_numpy(mine.copy())
                    dist.all_reduce(t, op=getattr(R, op))
                    got = t._data
                else:
                    h = Holder(mine.copy())
                    dist.all_reduce(h, op=getattr(R, op))
                    got = h._data
                    assert h.bumps == 1
                if not _close(got, want, dtype):
                    failures.append(f"all_reduce {np.dtype(dtype)} {op} n={n}")
                # reduce_scatter_tensor: input is world_size blocks of n
                big = [np.concatenate([_input(r * 7 + k, n, dtype, op) for k in range(ws)]) for r in range(ws)]
                out = np.full(n, 99, dtype=dtype)
                dist.reduce_scatter_tensor(out, big[rank].copy(), op=getattr(R, op))
                want_rs = _expected(big, op, dtype)[rank * n:(rank + 1) * n]
                if not _close(out, want_rs, dtype):
                    failures.append(f"reduce_scatter_tensor {np.dtype(dtype)} {op} n={n}")
                # reduce to a rotating root; the others must keep their input
                root = n % ws
                buf = mine.copy()
                dist.reduce(buf, dst=root, op=getattr(R, op))
                if rank == root and not _close(buf, want, dtype):
                    failures.append(f"reduce {np.dtype(dtype)} {op} n={n}")
                if rank != root and not np.array_equal(buf, mine):
                    failures.append(f"reduce modified non-root {np.dtype(dtype)} {op} n={n}")
        for n in SIZES:
            mine = _input(rank, n, dtype, "SUM")
            everyone = [_input(r, n, dtype, "SUM") for r in range(ws)]
            out = np.zeros(n * ws, dtype=dtype)
            dist.all_gather_into_tensor(out, mine)
            if not np.array_equal(out, np.concatenate(everyone)):
                failures.append(f"all_gather_into_tensor {np.dtype(dtype)} n={n}")
            lst = [tinytorch.from_numpy(np.zeros(n, dtype=dtype)) if dtype == np.float32 else np.zeros(n, dtype=dtype)
                   for _ in range(ws)]
            dist.all_gather(lst, mine)
            for r in range(ws):
                got = lst[r]._data if hasattr(lst[r], "_data") else lst[r]
                if not np.array_equal(got, everyone[r]):
                    failures.append(f"all_gather {np.dtype(dtype)} n={n} block {r}")
            for root in range(ws):
                b = mine.copy()
                dist.broadcast(b, src=root)
                if not np.array_equal(b, everyone[root]):
                    failures.append(f"broadcast {np.dtype(dtype)} n={n} root={root}")
    # all_gather_into_tensor with the input aliasing this rank's block of the output (ZeRO's pattern)
    out = np.zeros(10 * ws, np.float32)
    out[rank * 10:(rank + 1) * 10] = rank + 1
    dist.all_gather_into_tensor(out, out[rank * 10:(rank + 1) * 10])
    if not np.array_equal(out, np.repeat(np.arange(1, ws + 1, dtype=np.float32), 10)):
        failures.append("all_gather_into_tensor aliased input")
    # send/recv around the ring, then the reverse direction
    x = np.full(3001, rank, np.int64)
    y = np.empty_like(x)
    right, left = (rank + 1) % ws, (rank - 1) % ws
    if rank % 2 == 0:
        dist.send(x, dst=right)
        dist.recv(y, src=left)
    else:
        dist.recv(y, src=left)
        dist.send(x, dst=right)
    if not (y == left).all():
        failures.append("send/recv ring")
    reqs = [dist.isend(x, dst=left, tag=5), dist.irecv(y, src=right, tag=5)]
    for w in reqs:
        w.wait()
    if not (y == right).all():
        failures.append("isend/irecv reverse ring")
    # Point-to-point with a rank that is not a ring neighbour (a connection made on first use).
    if ws == 4:
        partner = (rank + 2) % ws
        z = np.empty(100, np.float64)
        if rank < partner:
            dist.send(np.full(100, rank, np.float64), dst=partner)
            dist.recv(z, src=partner)
        else:
            dist.recv(z, src=partner)
            dist.send(np.full(100, rank, np.float64), dst=partner)
        if not (z == partner).all():
            failures.append("send/recv across the ring")
    dist.barrier()
    transport = dist.distributed_c10d._default_pg.transport
    dist.destroy_process_group()
    assert not dist.is_initialized()
    return failures, transport


@pytest.mark.parametrize("transport", ["tcp", "shm"])
@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_every_collective_op_and_dtype(world_size, transport):
    env = dict(STRESS_ENV, TINYTORCH_RING_TRANSPORT=transport)
    results = run_ranks(_all_collectives, world_size, env=env, timeout=120)
    for rank, (failures, used) in enumerate(results):
        assert used == transport
        assert failures == [], f"rank {rank}: {failures}"


def _async_overlap(rank, ws, port):
    import tinytorch.distributed as dist

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws, timeout=20)
    a = np.full(200_000, rank + 1, np.float32)
    b = np.full(100_001, 2 * (rank + 1), np.float64)
    seen = []
    t0 = time.monotonic_ns()
    w1 = dist.all_reduce(a, async_op=True)
    w2 = dist.all_reduce(b, op=dist.ReduceOp.MAX, async_op=True)
    chained = w1.then(lambda fut: seen.append("cb") or float(fut.value()[0][0]))
    w3 = dist.all_gather_into_tensor(np.zeros(4 * ws, np.int32), np.full(4, rank, np.int32), async_op=True)
    fut3 = w3.get_future()
    w2.wait(timeout=10)
    w1.wait()
    w3.wait()
    # The backend stamps when it started and finished each collective (DDP's overlap figure uses them):
    # on the issuing clock, in issue order, one after another.
    stamps = [(w._c.start_ns, w._c.end_ns) for w in (w1, w2, w3)]
    assert t0 <= stamps[0][0] and all(s <= e <= time.monotonic_ns() for s, e in stamps), stamps
    assert stamps[0][1] <= stamps[1][0] and stamps[1][1] <= stamps[2][0], stamps
    total = sum(range(1, ws + 1))
    assert (a == total).all() and (b == 2 * ws).all()
    assert w1.is_completed() and w2.is_completed() and w1.exception() is None and w1.is_success()
    assert chained.wait(timeout=10) == float(total) and seen == ["cb"]
    assert fut3.wait(timeout=10) is not None
    # A Work completed before then() is attached runs the callback at once.
    w4 = dist.all_reduce(np.ones(3, np.float32), async_op=True)
    w4.wait()
    assert w4.then(lambda fut: 42).wait(timeout=5) == 42
    # A synchronous call issued behind pending async ones runs after them, in issue order.
    p = np.full(300_000, 1.0, np.float32)
    q = np.full(7, rank, np.int64)
    wp = dist.all_reduce(p, async_op=True)
    dist.all_reduce(q)
    assert (q == sum(range(ws))).all()
    wp.wait()
    assert (p == ws).all()
    bw = dist.barrier(async_op=True)
    bw.wait()
    dist.destroy_process_group()
    return True


@pytest.mark.parametrize("world_size", [2, 3])
def test_async_overlap_and_futures(world_size):
    assert all(run_ranks(_async_overlap, world_size, timeout=60))


def _subgroups(rank, ws, port):
    import tinytorch.distributed as dist

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws, timeout=20)
    evens = dist.new_group([r for r in range(ws) if r % 2 == 0])
    odds = dist.new_group([r for r in range(ws) if r % 2 == 1])
    mine = evens if rank % 2 == 0 else odds
    other = odds if rank % 2 == 0 else evens
    assert other is dist.GroupMember.NON_GROUP_MEMBER
    assert dist.all_reduce(np.zeros(1, np.float32), group=other) is None
    members = dist.get_process_group_ranks(mine)
    x = np.array([rank], np.int64)
    dist.all_reduce(x, group=mine)
    assert x[0] == sum(members)
    y = np.array([rank * 10], np.int64)
    dist.broadcast(y, src=members[-1], group=mine)
    assert y[0] == members[-1] * 10
    assert dist.get_rank(mine) == members.index(rank) and dist.get_world_size(mine) == len(members)
    z = np.ones(5, np.float32)
    dist.all_reduce(z)
    assert (z == ws).all()
    objs = [None] * ws
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": r} for r in range(ws)]
    lst = ["a", rank] if rank == 1 else [None, None]
    dist.broadcast_object_list(lst, src=1)
    assert lst == ["a", 1]
    sub = [None] * len(members)
    dist.all_gather_object(sub, rank, group=mine)
    assert sub == members
    dist.destroy_process_group()
    return True


def test_new_group():
    assert all(run_ranks(_subgroups, 4, timeout=60))


def _complex(rank, ws, port):
    import tinytorch
    import tinytorch.distributed as dist

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws, timeout=20)
    z = tinytorch.tensor(np.arange(6) * (1 + 1j) * (rank + 1), dtype=tinytorch.complex64)
    dist.all_reduce(z)
    np.testing.assert_array_equal(z.numpy(), np.arange(6) * (1 + 1j) * sum(range(1, ws + 1)))
    avg = tinytorch.tensor([1j * rank], dtype=tinytorch.complex128)
    dist.all_reduce(avg, op=dist.ReduceOp.AVG)
    assert avg.item() == 1j * (ws - 1) / 2
    out = tinytorch.zeros(ws * 2, dtype=tinytorch.complex64)
    dist.all_gather_into_tensor(out, tinytorch.tensor([rank + 1j, -rank * 1j], dtype=tinytorch.complex64))
    assert out.tolist() == [v for r in range(ws) for v in (r + 1j, -r * 1j)]
    b = tinytorch.tensor([rank * (2 - 3j)], dtype=tinytorch.complex64)
    dist.broadcast(b, src=1)
    assert b.item() == 2 - 3j
    errors = []
    for op in (dist.ReduceOp.MAX, dist.ReduceOp.PRODUCT):
        try:
            dist.all_reduce(z, op=op)
        except ValueError as e:
            errors.append(str(e))
    dist.destroy_process_group()
    return errors


def test_complex_tensors_travel_as_real_pairs():
    """Complex tensors are summed, averaged, gathered and broadcast as (re, im) pairs; MAX and PRODUCT, which
    are not pairwise, are refused on every rank before anything is sent."""
    for errors in run_ranks(_complex, 2, timeout=60):
        assert errors == ["all_reduce does not support MAX on complex tensors",
                          "all_reduce does not support PRODUCT on complex tensors"]


def _env_init(rank, ws, port, second_port):
    import os

    import tinytorch.distributed as dist

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "RANK": str(rank), "WORLD_SIZE": str(ws)})
    # destroy, then init again (on a new port: the old store dies with rank 0's first group)
    for p in (port, second_port):
        os.environ["MASTER_PORT"] = str(p)
        dist.init_process_group(backend=None, timeout=20)
        assert dist.get_backend() == "ring"
        x = np.ones(2, np.float32)
        dist.all_reduce(x)
        assert (x == ws).all()
        dist.destroy_process_group()
    return True


def test_env_init_and_reinit():
    from dist_helpers import free_port

    assert all(run_ranks(_env_init, 2, free_port(), timeout=60))


def _killed(rank, ws, port):
    import os

    import tinytorch.distributed as dist

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws, timeout=4)
    x = np.ones(2_000_000, np.float32)
    dist.all_reduce(np.ones(4, np.float32))  # everyone is connected and has done one collective
    if rank == ws - 1:
        # Die while the others are inside the collective, waiting on this rank's data.
        time.sleep(0.3)
        os._exit(17)
    t = time.monotonic()
    try:
        dist.all_reduce(x)
        return "no error"
    except dist.DistError as e:
        msg = str(e)
    elapsed = time.monotonic() - t
    try:
        dist.all_reduce(np.ones(1, np.float32))
        after = "no error"
    except dist.DistError as e:
        after = str(e)
    if rank == 0:
        time.sleep(1.0)  # rank 0 hosts the store: let the others read the root cause before it exits
    return msg, elapsed, after


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_rank_killed_mid_collective(transport):
    ws = 3
    res = run_ranks(_killed, ws, env={"TINYTORCH_RING_TRANSPORT": transport}, timeout=60, expect_exit=[ws - 1])
    for rank in range(ws - 1):
        msg, elapsed, after = res[rank]
        assert f"rank {ws - 1}" in msg, msg
        assert "all_reduce" in msg, msg
        assert elapsed < 4.5, (elapsed, msg)
        assert "unusable" in after, after


def _stalled(rank, ws, port):
    import tinytorch.distributed as dist

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws, timeout=1.5)
    dist.barrier()
    if rank == 1:
        time.sleep(3)
        return None
    t = time.monotonic()
    try:
        dist.all_reduce(np.ones(10, np.float32))
        return "no error"
    except dist.DistError as e:
        return type(e).__name__, str(e), time.monotonic() - t


def test_stalled_rank_times_out_naming_it():
    res = run_ranks(_stalled, 3, timeout=60)
    for rank in (0, 2):
        kind, msg, elapsed = res[rank]
        assert "rank 1 never reached" in msg and "all_reduce" in msg, msg
        assert elapsed < 4.5, elapsed
    assert res[0][0] == "DistTimeoutError" or res[2][0] == "DistTimeoutError"


def _mismatch(rank, ws, port, mode):
    import tinytorch.distributed as dist

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws, timeout=5)
    dist.barrier()
    t = time.monotonic()
    try:
        if mode == "shape":
            dist.all_reduce(np.ones(4 + rank, np.float32))
        else:
            if rank == 0:
                dist.all_reduce(np.ones(4, np.float32))
            else:
                dist.broadcast(np.ones(4, np.float32), src=0)
        return "no error"
    except dist.DistError as e:
        return str(e), time.monotonic() - t


@pytest.mark.parametrize("mode", ["shape", "op"])
@pytest.mark.parametrize("debug", ["DETAIL", ""])
def test_mismatched_collective_raises(mode, debug):
    res = run_ranks(_mismatch, 2, mode, env={"TINYTORCH_DISTRIBUTED_DEBUG": debug}, timeout=60)
    for msg, elapsed in res:
        assert "mismatch" in msg, msg
        assert elapsed < 4
        if debug:
            assert "TINYTORCH_DISTRIBUTED_DEBUG" in msg and "all_reduce" in msg, msg


def _p2p_mismatch(rank, ws, port):
    import tinytorch.distributed as dist

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws, timeout=5)
    try:
        if rank == 0:
            dist.send(np.ones(10, np.float32), dst=1)
            return "sent"
        dist.recv(np.ones(12, np.float32), src=0)
        return "no error"
    except dist.DistError as e:
        return str(e)


def test_send_recv_size_mismatch():
    res = run_ranks(_p2p_mismatch, 2, timeout=60)
    assert "mismatched send from rank 0" in res[1], res[1]


def _ring_full_at_boundary(rank, ws, port):
    import tinytorch.distributed as dist

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws, timeout=20)
    rng = np.random.default_rng(rank)
    for i in range(300):
        n = 997 + 3 * (i % 11)  # odd byte counts: collectives end unaligned, at ever-different ring offsets
        if rng.random() < 0.3:
            time.sleep(rng.random() * 0.001)  # let the neighbour run ahead and fill the ring
        out = np.zeros(n * ws, np.float32)
        dist.all_gather_into_tensor(out, np.full(n, rank + i, np.float32))
        assert (out.reshape(ws, n) == (np.arange(ws) + i)[:, None]).all(), i
    dist.destroy_process_group()
    return True


def test_shm_ring_full_at_collective_boundary():
    # A 4 KiB ring filled to the brim by one collective, then realigned for the next one's header.
    env = {"TINYTORCH_RING_TRANSPORT": "shm", "TINYTORCH_RING_SHM_BYTES": "4096", "TINYTORCH_RING_SMALL_BYTES": "64"}
    assert all(run_ranks(_ring_full_at_boundary, 2, env=env, timeout=60))


def _destroy_in_flight(rank, ws, port):
    import tinytorch.distributed as dist

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws, timeout=60)
    dist.barrier()
    if rank == 1:
        time.sleep(3)  # never joins the collective below
        return None
    w = dist.all_reduce(np.ones(1000, np.float32), async_op=True)
    time.sleep(0.2)
    t = time.monotonic()
    dist.destroy_process_group()
    elapsed = time.monotonic() - t
    return elapsed, w.is_completed(), str(w.exception())


def test_destroy_with_collective_in_flight_returns_promptly():
    elapsed, completed, exc = run_ranks(_destroy_in_flight, 2, timeout=60)[0]
    assert elapsed < 5, elapsed
    assert completed and "all_reduce" in exc, exc
