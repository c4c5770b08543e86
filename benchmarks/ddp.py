"""W5: W2 and W3 under DistributedDataParallel on 2 local ranks, beside each rank training alone and
beside PyTorch's DDP on gloo (when torch is importable), in one run.

    python benchmarks/ddp.py [--steps 12] [--warmup 3] [--workloads W2 W3] [--caps 1 4 25 all]

Every configuration starts 2 fresh processes (1 BLAS thread each: 2 ranks share the 2 cores).
"alone" runs the same 2 processes at the same time with no process group, so it sees the same CPU
contention. Step = zero_grad, forward, cross-entropy, backward, AdamW step; per-rank batch as in W2/W3.
Reported: median step time on rank 0; for tinytorch, the median share of all-reduce time hidden behind
backward (DDP's last_step_stats). Writes JSON, a PNG timeline of one W3 step (backward nodes and bucket
all-reduces of both ranks on one axis) with its Chrome trace, and a plot of step time against bucket_cap_mb.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import socket
import statistics
import sys
import time
import traceback
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

ONE_BUCKET = 1e6  # MB: a cap no model reaches, with the first bucket as large -> one bucket for everything


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, cfg: Dict[str, Any], q: Any) -> None:
    try:
        q.put((rank, "ok", _run(rank, world, port, cfg)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        q.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


def _run(rank: int, world: int, port: int, cfg: Dict[str, Any]) -> Dict[str, Any]:
    import models
    import numpy as np

    backend, workload, mode = cfg["backend"], cfg["workload"], cfg["mode"]
    if backend == "torch":
        import torch
        torch.set_num_threads(1)
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
    else:
        import tinytorch as torch
        import tinytorch.distributed as dist
        import tinytorch.nn  # noqa: F401
        from tinytorch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = (models.mlp if workload == "W2" else models.gpt)(torch)
    train = model
    if mode == "ddp":
        dist.init_process_group("gloo" if backend == "torch" else "ring", init_method=f"tcp://127.0.0.1:{port}",
                                rank=rank, world_size=world)
        if backend == "torch":
            train = DDP(model)
        else:
            cap = cfg["cap_mb"]
            train = DDP(model, bucket_cap_mb=cap, first_bucket_cap_mb=cap if cap >= ONE_BUCKET else None)
    x_np, y_np = models.batch(workload, seed=rank)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    F = torch.nn.functional
    times, stats = [], []
    prof = None
    profile_step = cfg["steps"] - 1 if cfg.get("profile") else -1
    for step in range(cfg["steps"]):
        if step == profile_step:
            from tinytorch.profiler import profile
            prof = profile()
            prof.start()
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(train(x), y)
        loss.backward()
        opt.step()
        loss.item()
        times.append(time.perf_counter() - t0)
        if prof is not None:
            prof.stop()
        if mode == "ddp" and backend == "tinytorch":
            stats.append(train.last_step_stats)
    out: Dict[str, Any] = {"times": times, "stats": stats}
    if prof is not None:
        path = os.path.join(cfg["out_dir"], f"ddp_w3_trace_rank{rank}.json")
        prof.export_chrome_trace(path)
        out["trace"] = path
        out["events"] = [(e.name, e.cat, e.start_ns, e.end_ns, e.track) for e in prof.events()
                         if e.cat in ("backward", "comm", "ddp")]
    if mode == "ddp":
        dist.destroy_process_group()
    return out


def spawn(cfg: Dict[str, Any], world: int = 2, timeout: float = 900.0) -> List[Dict[str, Any]]:
    """Run one configuration on `world` fresh processes; per-rank results."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, world, port, cfg, q), daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    results: List[Any] = [None] * world
    deadline = time.monotonic() + timeout
    try:
        for _ in range(world):
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"benchmark {cfg} did not finish within {timeout}s")
                try:
                    rank, status, payload = q.get(timeout=min(left, 5.0))
                    break
                except queue.Empty:
                    if all(p.exitcode is not None for p in procs) and q.empty():
                        raise RuntimeError(f"benchmark {cfg}: workers exited without reporting")
            if status != "ok":
                raise RuntimeError(f"benchmark {cfg}: rank {rank} failed: {payload}")
            results[rank] = payload
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    return results


def _median_ms(res: Dict[str, Any], warmup: int) -> float:
    return 1e3 * statistics.median(res["times"][warmup:])


def _timeline(path: str, ranks: List[Dict[str, Any]]) -> None:
    from tinytorch.utils.png import timeline

    t0 = min(ev[2] for r in ranks for ev in r["events"])
    tracks: Dict[str, list] = {}
    for rank, r in enumerate(ranks):
        bwd = [((s - t0) / 1e6, (e - t0) / 1e6, "backward node") for n, c, s, e, _ in r["events"] if c == "backward"]
        comm = [((s - t0) / 1e6, (e - t0) / 1e6, "bucket all-reduce") for n, c, s, e, _ in r["events"] if c == "comm"]
        launch = [((s - t0) / 1e6, (e - t0) / 1e6 + 0.3, "bucket launch") for n, c, s, e, _ in r["events"] if c == "ddp"]
        tracks[f"rank {rank} backward"] = bwd
        tracks[f"rank {rank} launches"] = launch
        tracks[f"rank {rank} all-reduce"] = comm
    timeline(path, tracks, title="W3 DDP step, 2 ranks", unit="ms")


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the median")
    p.add_argument("--workloads", nargs="+", default=["W2", "W3"])
    p.add_argument("--caps", nargs="+", default=["1", "4", "25", "all"], help="bucket_cap_mb values ('all': one bucket)")
    p.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    args = p.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[k] = "1"
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    caps = [ONE_BUCKET if c == "all" else float(c) for c in args.caps]
    results: Dict[str, Any] = {"steps": args.steps, "warmup": args.warmup, "ranks": 2, "cpus": os.cpu_count(),
                               "load_avg_start": os.getloadavg(), "workloads": {}}
    base = {"steps": args.steps, "out_dir": args.out_dir}
    print(f"{'workload':8} {'config':26} {'step ms':>9} {'comm ms':>8} {'hidden':>7} {'buckets':>8}")
    for w in args.workloads:
        row: Dict[str, Any] = {"sweep": {}}
        alone = spawn(dict(base, backend="tinytorch", workload=w, mode="alone"))
        row["tinytorch_alone_ms"] = _median_ms(alone[0], args.warmup)
        print(f"{w:8} {'tinytorch alone':26} {row['tinytorch_alone_ms']:9.1f}")
        for cap in caps:
            label = "all" if cap >= ONE_BUCKET else f"{cap:g}"
            res = spawn(dict(base, backend="tinytorch", workload=w, mode="ddp", cap_mb=cap,
                             profile=(w == "W3")))
            st = res[0]["stats"][args.warmup:]
            entry = {"step_ms": _median_ms(res[0], args.warmup),
                     "step_ms_rank1": _median_ms(res[1], args.warmup),
                     "comm_ms": statistics.median(s["comm_ms"] for s in st),
                     "overlapped_ms": statistics.median(s["overlapped_ms"] for s in st),
                     "overlap_fraction": statistics.median(s["overlap_fraction"] for s in st),
                     "num_buckets": st[-1]["num_buckets"], "bucket_bytes": st[-1]["bucket_bytes"]}
            if w == "W3":
                entry["_events"] = [r["events"] for r in res]
                entry["traces"] = [r["trace"] for r in res]
            row["sweep"][label] = entry
            print(f"{w:8} {'tinytorch DDP cap ' + label + ' MB':26} {entry['step_ms']:9.1f} {entry['comm_ms']:8.1f} "
                  f"{entry['overlap_fraction']:7.0%} {entry['num_buckets']:8d}")
        row["tinytorch_ddp_ms"] = row["sweep"].get("25", next(iter(row["sweep"].values())))["step_ms"]
        best = max(row["sweep"], key=lambda k: row["sweep"][k]["overlap_fraction"])
        row["best_overlap_cap"] = best
        row["best_overlap_fraction"] = row["sweep"][best]["overlap_fraction"]
        if have_torch:
            talone = spawn(dict(base, backend="torch", workload=w, mode="alone"))
            tddp = spawn(dict(base, backend="torch", workload=w, mode="ddp"))
            row["torch_alone_ms"] = _median_ms(talone[0], args.warmup)
            row["torch_ddp_ms"] = _median_ms(tddp[0], args.warmup)
            row["ratio_ddp_vs_torch_ddp"] = row["tinytorch_ddp_ms"] / row["torch_ddp_ms"]
            print(f"{w:8} {'torch alone':26} {row['torch_alone_ms']:9.1f}")
            print(f"{w:8} {'torch DDP gloo (25 MB)':26} {row['torch_ddp_ms']:9.1f}")
            print(f"{w:8} tinytorch DDP / torch DDP = {row['ratio_ddp_vs_torch_ddp']:.2f} (target <= 0.70)")
        results["workloads"][w] = row
    results["load_avg_end"] = os.getloadavg()

    from tinytorch.profiler import merge_chrome_traces
    from tinytorch.utils.png import line_chart

    series = {}
    for w, row in results["workloads"].items():
        xs, ys = [], []
        for label, e in row["sweep"].items():
            total_mb = sum(e["bucket_bytes"]) / 2 ** 20
            xs.append(total_mb if label == "all" else float(label))
            ys.append(e["step_ms"])
        series[f"tinytorch DDP {w}"] = (xs, ys)
    hl = {}
    for w, row in results["workloads"].items():
        if "torch_ddp_ms" in row:
            hl[f"torch DDP {w} (25 MB)"] = row["torch_ddp_ms"]
    plot = os.path.join(args.out_dir, "ddp_bucket_sweep.png")
    line_chart(plot, series, title="DDP step vs bucket cap (2 ranks)",
               xlabel="bucket_cap_mb", ylabel="ms per step", hlines=hl or None, log_x=True)
    results["sweep_plot"] = plot
    if "W3" in results["workloads"]:
        row = results["workloads"]["W3"]
        e = row["sweep"][row["best_overlap_cap"]]
        png = os.path.join(args.out_dir, "ddp_w3_timeline.png")
        _timeline(png, [{"events": ev} for ev in e["_events"]])
        merged = os.path.join(args.out_dir, "ddp_w3_trace.json")
        merge_chrome_traces(e["traces"], merged)
        results["timeline_png"], results["chrome_trace"] = png, merged
        for ent in row["sweep"].values():
            ent.pop("_events", None)
    path = os.path.join(args.out_dir, "ddp.json")
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {path}, {plot}" + (f", {results.get('timeline_png')}, {results.get('chrome_trace')}"
                                     if "timeline_png" in results else ""))
    return results


if __name__ == "__main__":
    main()
