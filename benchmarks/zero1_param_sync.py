"""ZeroRedundancyOptimizer's parameter sync on the ring backend: one all-gather vs broadcasts from the owners.

Run:  python benchmarks/zero1_param_sync.py --nproc 2
Spawns --nproc local ranks. For transformer-shaped parameter lists (4 blocks of width d) it times, by median
(the methods interleaved rep by rep, so machine load falls on all alike), the sharing of updated parameters
after the local step, four ways:
  all_gather/views   ZeroRedundancyOptimizer(parameters_as_bucket_view=True)._sync_params(): one all-gather
                     into the flat buffer the parameters are views of (what tinytorch does, no copies)
  all_gather/copy    parameters_as_bucket_view=False: pack own block, one all-gather, copy the rest out
  bcast/owner        N broadcasts, one per owner, of its block of the same flat buffer
  bcast/param        one broadcast per parameter from its owner (PyTorch's non-bucket path), all async
and PyTorch's ZeroRedundancyOptimizer._sync_params() on gloo beside them when torch is importable.
Prints a table and writes benchmarks/results/zero_sync_<n>ranks.json.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import statistics
import sys
import time
from typing import Any, Dict, List

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import write_json  # noqa: E402


def shapes(d: int, layers: int = 4) -> List[tuple]:
    """Per block: qkv, proj, fc1, fc2 weights and biases, two layer norms."""
    one = [(3 * d, d), (3 * d,), (d, d), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,), (d,), (d,), (d,), (d,)]
    return one * layers


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _interleaved_ms(fns: Dict[str, Any], reps: int, barrier: Any) -> Dict[str, float]:
    """Median ms of each fn, timed round-robin (rep by rep) after a barrier, so that load from other processes
    on the machine falls on every method alike; two warm-up rounds first."""
    times: Dict[str, List[float]] = {k: [] for k in fns}
    for i in range(reps + 2):
        for k, fn in fns.items():
            barrier()
            t0 = time.perf_counter()
            fn()
            if i >= 2:
                times[k].append(1e3 * (time.perf_counter() - t0))
    return {k: statistics.median(v) for k, v in times.items()}


def _ours(rank: int, n: int, port: int, widths: List[int], reps: int) -> Dict[str, Dict[str, float]]:
    import tinytorch as torch
    import tinytorch.distributed as dist
    from tinytorch.distributed.optim import ZeroRedundancyOptimizer

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n, timeout=120)
    out: Dict[str, Dict[str, float]] = {}
    for d in widths:
        fns: Dict[str, Any] = {}
        for views in (True, False):
            params = [torch.nn.Parameter(torch.randn(*s)) for s in shapes(d)]
            zero = ZeroRedundancyOptimizer(params, torch.optim.SGD, parameters_as_bucket_view=views, lr=0.1)
            fns["all_gather/views" if views else "all_gather/copy"] = zero._sync_params
        b = zero._buckets["cpu"]
        owner = zero._param_to_rank

        def bcast_owner(b: Any = b) -> None:
            works = [dist.broadcast(b.shard(r), src=r, async_op=True) for r in range(n)]
            for w in works:
                w.wait()

        def bcast_param(params: List[Any] = params) -> None:
            works = [dist.broadcast(p, src=owner[id(p)], async_op=True) for p in params]
            for w in works:
                w.wait()

        fns["bcast/owner"], fns["bcast/param"] = bcast_owner, bcast_param
        row = _interleaved_ms(fns, reps, dist.barrier)
        row["MB"] = sum(int(np.prod(s)) for s in shapes(d)) * 4 / 2 ** 20
        out[str(d)] = row
    dist.destroy_process_group()
    return out


def _torch(rank: int, n: int, port: int, widths: List[int], reps: int) -> Dict[str, Dict[str, float]]:
    import torch
    import torch.distributed as dist
    from torch.distributed.optim import ZeroRedundancyOptimizer

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    out: Dict[str, Dict[str, float]] = {}
    for d in widths:
        fns: Dict[str, Any] = {}
        for views in (True, False):
            params = [torch.nn.Parameter(torch.randn(*s)) for s in shapes(d)]
            zero = ZeroRedundancyOptimizer(params, torch.optim.SGD, parameters_as_bucket_view=views, lr=0.1)
            fns["torch gloo views" if views else "torch gloo copy"] = zero._sync_params
        out[str(d)] = _interleaved_ms(fns, reps, dist.barrier)
    dist.destroy_process_group()
    return out


def _entry(fn: Any, rank: int, n: int, port: int, widths: List[int], reps: int, q: Any) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        q.put((rank, fn(rank, n, port, widths, reps)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        q.put((rank, f"error: {type(e).__name__}: {e}"))


def _spawn(fn: Any, n: int, widths: List[int], reps: int) -> Any:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _port()
    procs = [ctx.Process(target=_entry, args=(fn, r, n, port, widths, reps, q), daemon=True) for r in range(n)]
    for p in procs:
        p.start()
    results = dict(q.get(timeout=300) for _ in range(n))
    for p in procs:
        p.join(30)
    if isinstance(results[0], str):
        raise RuntimeError(results[0])
    return results[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--widths", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    ours = _spawn(_ours, args.nproc, args.widths, args.reps)
    try:
        import torch  # noqa: F401
        theirs = _spawn(_torch, args.nproc, args.widths, args.reps)
    except ImportError:
        theirs = {}
    cols = ["all_gather/views", "all_gather/copy", "bcast/owner", "bcast/param", "torch gloo views",
            "torch gloo copy"]
    print(f"parameter sync after the local step, {args.nproc} ranks, median ms over {args.reps}")
    print(f"{'d':>5} {'MB':>6} " + " ".join(f"{c:>17}" for c in cols))
    rows = []
    for d in args.widths:
        row = dict(ours[str(d)], **theirs.get(str(d), {}))
        row["d"] = d
        rows.append(row)
        print(f"{d:>5} {row['MB']:>6.1f} " + " ".join(f"{row[c]:>17.2f}" if c in row else f"{'-':>17}" for c in cols))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", f"zero_sync_{args.nproc}ranks.json")
    write_json(path, {"nproc": args.nproc, "reps": args.reps, "rows": rows})


if __name__ == "__main__":
    main()
