"""W4: collective bandwidth/latency of tinytorch's ring backend beside PyTorch gloo (when importable).

Run:  python benchmarks/collectives.py --nproc 2
The nccl-tests-style sweep of every collective (all_to_all and broadcast too, results checked) is
`tinytorch-bench collectives` (tinytorch/bench/collectives.py); this script keeps the side-by-side with gloo.
Spawns --nproc local ranks unless launched by a launcher (RANK/WORLD_SIZE set). Prints an nccl-tests
style table per collective and writes JSON. algbw = bytes/time; busbw = algbw * 2(n-1)/n for
all_reduce and algbw * (n-1)/n for all_gather/reduce_scatter (nccl-tests' definitions). Times are medians.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import socket
import statistics
import sys
import time
from typing import Any, Dict, List

import numpy as np

COLLECTIVES = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor"]


def sizes(lo: int, hi: int) -> List[int]:
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= 2
    return out


def iters_for(nbytes: int, scale: float) -> int:
    return max(5, min(200, int(scale * (64 << 20) / max(nbytes, 1))))


from tinytorch.bench.collectives import bus_factor  # noqa: E402,F401 - nccl-tests' factors, defined once


def bench_one(dist: Any, make: Any, coll: str, nbytes: int, n: int, rank: int, iters: int, barrier: Any) -> float:
    """Median seconds of one collective of `nbytes` (the full buffer: all_reduce's, or the gathered/scattered whole)."""
    count = nbytes // 4
    per = max(count // n, 0)
    if coll == "all_reduce":
        buf = make(count)
        op = lambda: dist.all_reduce(buf)  # noqa: E731
    elif coll == "all_gather_into_tensor":
        out, inp = make(per * n), make(per)
        op = lambda: dist.all_gather_into_tensor(out, inp)  # noqa: E731
    else:
        out, inp = make(per), make(per * n)
        op = lambda: dist.reduce_scatter_tensor(out, inp)  # noqa: E731
    for _ in range(3):
        op()
    times = []
    for _ in range(iters):
        barrier()
        t = time.perf_counter()
        op()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run_suite(dist: Any, make: Any, rank: int, n: int, args: Any, barrier: Any) -> Dict[str, List[Dict[str, float]]]:
    results: Dict[str, List[Dict[str, float]]] = {}
    for coll in COLLECTIVES:
        rows = []
        for nbytes in sizes(args.min_bytes, args.max_bytes):
            t = bench_one(dist, make, coll, nbytes, n, rank, iters_for(nbytes, args.scale), barrier)
            algbw = nbytes / t / 1e9
            rows.append({"bytes": nbytes, "count": nbytes // 4, "time_us": t * 1e6, "algbw_GBps": algbw,
                         "busbw_GBps": algbw * bus_factor(coll, n)})
        results[coll] = rows
    return results


def worker(rank: int, n: int, port: int, torch_port: int, args: Any, q: Any) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import tinytorch.distributed as dist

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n,
                            timeout=120)
    transport = dist.distributed_c10d._default_pg.transport
    tiny = run_suite(dist, lambda c: np.ones(c, np.float32), rank, n, args, lambda: dist.barrier())
    dist.destroy_process_group()
    report: Dict[str, Any] = {"tinytorch_ring": {"transport": transport, "results": tiny}}
    if not args.no_torch:
        try:
            import torch
            import torch.distributed as tdist
        except ImportError:
            torch = None
        if torch is not None:
            torch.set_num_threads(1)
            tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{torch_port}", rank=rank, world_size=n)
            gloo = run_suite(tdist, lambda c: torch.ones(c, dtype=torch.float32), rank, n, args,
                             lambda: tdist.barrier())
            tdist.destroy_process_group()
            report["torch_gloo"] = {"transport": "tcp", "version": torch.__version__, "results": gloo}
    if rank == 0:
        q.put(report)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def table(name: str, transport: str, coll: str, rows: List[Dict[str, float]]) -> str:
    lines = [f"#### {coll} — {name} (transport: {transport})", "",
             "| size (B) | count (fp32) | time (us) | algbw (GB/s) | busbw (GB/s) |",
             "| ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['bytes']} | {r['count']} | {r['time_us']:.1f} | {r['algbw_GBps']:.3f} | {r['busbw_GBps']:.3f} |")
    return "\n".join(lines)


def comparison(report: Dict[str, Any]) -> str:
    if "torch_gloo" not in report:
        return "(torch not importable: no gloo comparison)"
    lines = ["#### ratios, tinytorch ring vs gloo (busbw ratio = ring/gloo; time ratio = ring/gloo)", "",
             "| collective | size (B) | busbw ratio | time ratio |", "| --- | ---: | ---: | ---: |"]
    for coll in COLLECTIVES:
        for a, b in zip(report["tinytorch_ring"]["results"][coll], report["torch_gloo"]["results"][coll]):
            lines.append(f"| {coll} | {a['bytes']} | {a['busbw_GBps'] / b['busbw_GBps']:.2f} | "
                         f"{a['time_us'] / b['time_us']:.2f} |")
    return "\n".join(lines)


def render(report: Dict[str, Any]) -> str:
    n = report["meta"]["world_size"]
    out = [f"W4 collectives, {n} local ranks, float32, median times", ""]
    for coll in COLLECTIVES:
        out.append(table("tinytorch ring", report["tinytorch_ring"]["transport"], coll,
                         report["tinytorch_ring"]["results"][coll]))
        out.append("")
        if "torch_gloo" in report:
            out.append(table(f"torch {report['torch_gloo']['version']} gloo", "tcp", coll,
                             report["torch_gloo"]["results"][coll]))
            out.append("")
    out.append(comparison(report))
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--min-bytes", type=int, default=64 << 10)
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--scale", type=float, default=1.0, help="more or fewer iterations per size")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch gloo comparison")
    p.add_argument("--render", nargs="+", metavar="JSON", help="print the tables of saved results and exit")
    p.add_argument("--json", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                  "collectives.json"))
    args = p.parse_args()
    if args.render:
        for path in args.render:
            with open(path) as f:
                saved = json.load(f)
            meta = saved["meta"]
            print(f"Command: `{meta['command']}` ({meta['time']}, {meta['cpus']} CPUs)\n")
            print(render(saved))
            print()
        return
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        # Launched by a launcher: one process per rank; the store address comes from MASTER_ADDR/PORT.
        import queue

        rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        port = int(os.environ.get("MASTER_PORT", "29500"))
        q: Any = queue.Queue()
        worker(rank, n, port, port + 1, args, q)
        if rank != 0:
            return
        report = q.get()
    else:
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        port, tport = free_port(), free_port()
        procs = [ctx.Process(target=worker, args=(r, args.nproc, port, tport, args, q)) for r in range(args.nproc)]
        for pr in procs:
            pr.start()
        report = q.get(timeout=1800)
        for pr in procs:
            pr.join(60)
        n = args.nproc
    report["meta"] = {"world_size": n, "host": platform.node(), "cpus": os.cpu_count(),
                      "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
                      "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    print(render(report))
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nJSON written to {args.json}")


if __name__ == "__main__":
    main()
