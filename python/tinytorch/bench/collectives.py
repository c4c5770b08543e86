"""`tinytorch-bench collectives`: an nccl-tests-style sweep of tinytorch.distributed's collectives.

    tinytorch-bench collectives --nproc 2 --op all_reduce --min-bytes 1M --max-bytes 16M --json F
    tinytorch-run --nproc-per-node 8 --nnodes 2 ... -m tinytorch.bench collectives --backend nccl

Columns and bandwidths follow nccl-tests (doc/PERFORMANCE.md there): `size` is the bytes of the whole buffer
(all_gather's output, reduce_scatter's input, all_to_all's per-rank input), algbw = size / time and
busbw = algbw * factor, with factor 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and
all_to_all, and 1 for broadcast, so busbw is comparable with the hardware's link bandwidth whatever the op.
`time` is the mean of `--iters` back-to-back calls after `--warmup`, the slowest rank's; `#wrong` counts
elements that differ from the exact expected result of one more call on fresh data, summed over ranks.
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Any, Dict, List, Optional

import numpy as np

from ._cli import byte_size, choice_list, int_at_least, nonnegative_int, positive_float, positive_int, usage_error
from ._common import format_size, run_ranks, table, write_json

OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"]
DTYPES = {"float32": "float", "float": "float", "float16": "half", "half": "half", "bfloat16": "bfloat16",
          "float64": "double", "double": "double", "int32": "int32", "int64": "int64"}
_NP = {"float": "float32", "half": "float16", "double": "float64", "int32": "int32", "int64": "int64"}


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw for a collective over n ranks."""
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op == "broadcast":
        return 1.0
    return (n - 1) / n


def np_dtype(name: str) -> Any:
    """The NumPy dtype of an nccl-tests type name ('float', 'half', 'bfloat16', ...)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(_NP[name])


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The collectives subcommand's flags (nccl-tests' names where it has them)."""
    p.add_argument("--nproc", type=positive_int, default=None,
                   help="spawn this many local ranks (default: the launched ranks under tinytorch-run, else 2)")
    p.add_argument("--op", type=choice_list(OPS, everything="all"), default="all_reduce",
                   help=f"comma-separated, of {','.join(OPS)} (or 'all')")
    p.add_argument("--min-bytes", "-b", type=byte_size, default="1K")
    p.add_argument("--max-bytes", "-e", type=byte_size, default="256M")
    p.add_argument("--step-factor", "-f", type=int_at_least(2), default=2)
    p.add_argument("--iters", "-n", type=positive_int, default=20)
    p.add_argument("--warmup", "-w", type=nonnegative_int, default=5)
    p.add_argument("--dtype", "-d", choices=sorted(DTYPES), default="float",
                   help="float, half, bfloat16, double, int32, int64")
    p.add_argument("--backend", default="auto", choices=["auto", "ring", "nccl"],
                   help="auto: nccl when CUDA is available, else ring")
    p.add_argument("--json", default=None, help="write {'rows': [...]} here")
    p.add_argument("--plot", default=None, help="PNG of busbw against size, one line per op (matplotlib)")
    p.add_argument("--timeout", type=positive_float, default=1800.0,
                   help="seconds before spawned ranks are given up on")


def sizes(lo: int, hi: int, factor: int) -> List[int]:
    """lo, lo*factor, ... up to hi (nccl-tests' -b/-e/-f)."""
    if lo <= 0 or hi < lo or factor < 2:
        raise ValueError(f"need 0 < min-bytes <= max-bytes and step-factor >= 2, got {lo}, {hi}, {factor}")
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def _resolve_backend(backend: str) -> str:
    if backend != "auto":
        return backend
    from tinytorch.distributed.distributed_c10d import _cuda_available

    return "nccl" if _cuda_available() else "ring"


class _Case:
    """Buffers, the call and the exact expected output of one op at one size on one rank."""

    def __init__(self, op: str, nbytes: int, dt: Any, rank: int, n: int, xp: Any) -> None:
        import tinytorch.distributed as dist

        self.op, self.n, self.rank, self.xp = op, n, rank, xp
        per = max(nbytes // dt.itemsize // (1 if op in ("all_reduce", "broadcast") else n), 1)
        self.count = per if op in ("all_reduce", "broadcast") else per * n  # elements of the whole buffer
        self.bytes = self.count * dt.itemsize
        self.dt = dt
        base = np.arange(self.count) % 5  # small integers: exact in every dtype, sums included
        if op == "all_reduce":
            self.fresh = lambda: (base + rank + 1).astype(dt)
            self.expect = (n * base + n * (n + 1) // 2).astype(dt)
            self.buf = xp.asarray(self.fresh())
            self.out = self.buf
            self.call = lambda: dist.all_reduce(self.buf)
        elif op == "broadcast":
            self.fresh = lambda: (base + 1).astype(dt) if rank == 0 else np.zeros(self.count, dt)
            self.expect = (base + 1).astype(dt)
            self.buf = xp.asarray(self.fresh())
            self.out = self.buf
            self.call = lambda: dist.broadcast(self.buf, src=0)
        elif op == "all_gather":
            self.fresh = lambda: (base[:per] + rank + 1).astype(dt)
            self.expect = np.concatenate([base[:per] + r + 1 for r in range(n)]).astype(dt)
            self.buf = xp.asarray(self.fresh())
            self.out = xp.zeros(self.count, dt)
            self.call = lambda: dist.all_gather_into_tensor(self.out, self.buf)
        elif op == "reduce_scatter":
            self.fresh = lambda: (base + rank + 1).astype(dt)
            self.expect = (n * base + n * (n + 1) // 2).astype(dt)[rank * per:(rank + 1) * per]
            self.buf = xp.asarray(self.fresh())
            self.out = xp.zeros(per, dt)
            self.call = lambda: dist.reduce_scatter_tensor(self.out, self.buf)
        elif op == "all_to_all":
            # Block p of rank r's input holds r*n + p (+ the pattern); rank r's output block p is rank p's block r.
            blk = base[:per]
            self.fresh = lambda: np.concatenate([blk + (rank * n + p) % 64 for p in range(n)]).astype(dt)
            self.expect = np.concatenate([blk + (p * n + rank) % 64 for p in range(n)]).astype(dt)
            self.buf = xp.asarray(self.fresh())
            self.out = xp.zeros(self.count, dt)
            self.call = lambda: dist.all_to_all_single(self.out, self.buf)
        else:
            raise ValueError(f"unknown collective {op!r}; choose from {', '.join(OPS)}")

    def check(self) -> int:
        """Run once on fresh data; the number of output elements that differ from the exact result."""
        fresh = self.fresh()
        self.buf[...] = self.xp.asarray(fresh)
        self.call()
        got = self.out if self.xp is np else self.xp.asnumpy(self.out)
        return int(np.count_nonzero(np.asarray(got, np.float64) != np.asarray(self.expect, np.float64)))


def _sync(xp: Any) -> None:
    if xp is not np:
        xp.cuda.get_current_stream().synchronize()


def sweep(cfg: Dict[str, Any]) -> Optional[List[Dict[str, Any]]]:
    """Run the sweep on this rank (inside an initialized or launchable group); rank 0 returns the rows."""
    import tinytorch.distributed as dist

    from ._common import init_group

    backend = _resolve_backend(cfg["backend"])
    xp: Any = np
    if backend == "nccl":  # this rank's GPU first: NCCL binds its communicator to the current device
        import cupy

        cupy.cuda.Device(int(os.environ.get("LOCAL_RANK", "0"))).use()
        xp = cupy
    init_group(backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    dt = np_dtype(cfg["dtype"])
    rows = []
    for op in cfg["ops"]:
        for nbytes in cfg["sizes"]:
            case = _Case(op, nbytes, dt, rank, n, xp)
            for _ in range(cfg["warmup"]):
                case.call()
            dist.barrier()
            _sync(xp)
            t0 = time.perf_counter()
            for _ in range(cfg["iters"]):
                case.call()
            _sync(xp)
            t = (time.perf_counter() - t0) / cfg["iters"]
            wrong = case.check()
            stats = xp.asarray(np.array([t, wrong], np.float64))
            tmax = xp.asarray(np.array([t], np.float64))
            dist.all_reduce(tmax, op=dist.ReduceOp.MAX)
            dist.all_reduce(stats)
            t_slowest = float(tmax[0])
            algbw = case.bytes / t_slowest / 1e9
            rows.append({"op": op, "bytes": case.bytes, "count": case.count, "dtype": cfg["dtype"],
                         "redop": "sum" if op in ("all_reduce", "reduce_scatter") else "none",
                         "root": 0 if op == "broadcast" else -1, "time_us": t_slowest * 1e6,
                         "algbw_gbps": algbw, "busbw_gbps": algbw * bus_factor(op, n), "wrong": int(stats[1]),
                         "world": n, "backend": backend})
    transport = getattr(dist.distributed_c10d._default_pg, "transport", backend)
    dist.destroy_process_group()
    if rank == 0:
        for r in rows:
            r["transport"] = transport
        return rows
    return None


def render(rows: List[Dict[str, Any]]) -> str:
    """nccl-tests' table per op, then the average bus bandwidth over all rows."""
    out = []
    n = rows[0]["world"] if rows else 0
    out.append(f"# tinytorch-bench collectives: {n} ranks, backend {rows[0]['backend'] if rows else '?'} "
               f"(transport {rows[0].get('transport', '?') if rows else '?'})")
    for op in dict.fromkeys(r["op"] for r in rows):
        out.append(f"#\n# {op}")
        body = [(r["bytes"], r["count"], r["dtype"], r["redop"], r["root"], r["time_us"], r["algbw_gbps"],
                 r["busbw_gbps"], r["wrong"]) for r in rows if r["op"] == op]
        out.append(table(["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"], body,
                         ["{}", "{}", "{}", "{}", "{}", "{:.1f}", "{:.3f}", "{:.3f}", "{}"]))
    out.append("#  (size in B, time in us, algbw and busbw in GB/s)")
    if rows:
        avg = sum(r["busbw_gbps"] for r in rows) / len(rows)
        out.append(f"# Out of bounds values : {sum(r['wrong'] for r in rows)} "
                   f"{'OK' if all(r['wrong'] == 0 for r in rows) else 'FAILED'}")
        out.append(f"# Avg bus bandwidth    : {avg:.4f} GB/s")
    return "\n".join(out)


def plot(rows: List[Dict[str, Any]], path: str) -> bool:
    """busbw against message size per op (matplotlib; False with a message when it is not installed)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install 'tinytorch[plot]')")
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for op in dict.fromkeys(r["op"] for r in rows):
        rs = [r for r in rows if r["op"] == op]
        ax.plot([r["bytes"] for r in rs], [r["busbw_gbps"] for r in rs], marker="o", label=op)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    n = rows[0]["world"] if rows else 0
    ax.set_title(f"tinytorch-bench collectives, {n} ranks, {rows[0]['backend'] if rows else ''}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")
    return True


def config(args: argparse.Namespace) -> Dict[str, Any]:
    """The sweep's settings from parsed flags (sizes expanded)."""
    if args.max_bytes < args.min_bytes:
        usage_error(args, f"argument --max-bytes: must be at least --min-bytes ({format_size(args.min_bytes)}), "
                          f"got {format_size(args.max_bytes)}")
    return {"ops": args.op, "sizes": sizes(args.min_bytes, args.max_bytes, args.step_factor),
            "dtype": DTYPES[args.dtype], "iters": args.iters, "warmup": args.warmup, "backend": args.backend}


def main(args: argparse.Namespace) -> Optional[List[Dict[str, Any]]]:
    """Run the sweep (spawned or launched), print the table and write JSON on rank 0; the rows there."""
    cfg = config(args)
    from ._common import launched

    nproc = args.nproc if args.nproc or launched() else 2
    results = run_ranks(sweep, nproc, (cfg,), timeout=args.timeout)
    if not results:
        return None  # a launched rank other than 0
    rows = results[0]
    print(render(rows))
    if args.json:
        write_json(args.json, {"rows": rows, "world": rows[0]["world"] if rows else 0,
                               "command": "tinytorch-bench collectives", "time":
                               time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpus": os.cpu_count()})
    if args.plot:
        plot(rows, args.plot)
    return rows
