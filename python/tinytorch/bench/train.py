"""`tinytorch-bench train`: step time, tokens/s, peak memory per rank, and exposed and hidden communication of
DDP and ZeRO-1/2/3 training steps on W2, W3 or a GPT preset.

    tinytorch-bench train --nproc 2 --model W3 --strategy ddp --steps 10 --json train.json
    tinytorch-bench train --nproc 1 --model W3 --strategy none --trace w3_trace.json   # input of simulate --profile
    tinytorch-run --nproc-per-node 8 -m tinytorch.bench train --model gpt-125m --device cuda --strategy zero3

Strategies: `none` (each rank alone, no communication), `ddp` (nn.parallel.DistributedDataParallel), `zero1`
(DDP + tinytorch.distributed.optim.ZeroRedundancyOptimizer), `zero2`/`zero3` (tinytorch.distributed.fsdp
.fully_shard on every block and the root, reshard_after_forward False/True). Each rank also steps an unwrapped
copy of the model on its own batch, round-robin with the measured configuration, so load on the machine hits
both alike: exposed communication = step - that copy's step (for DDP also the Reducer's own measurement of
all-reduce time hidden behind backward). Step = zero_grad, forward, cross-entropy, backward, AdamW step.
Peak memory: the process's peak RSS on CPU; on GPU the bytes CuPy's pool holds (it keeps freed blocks, so
that is its high-water mark).
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Any, Callable, Dict, List, Optional

from ._cli import choice_list, nonnegative_int, positive_float, positive_int, usage_error
from ._common import launched, median, run_ranks, table, write_json

STRATEGIES = ("none", "ddp", "zero1", "zero2", "zero3")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The train subcommand's flags."""
    from .model import GPT_PRESETS

    p.add_argument("--nproc", type=positive_int, default=None,
                   help="local ranks to spawn (default: launched ranks, else 2)")
    p.add_argument("--model", choices=list(dict.fromkeys(["W2", "W3", *GPT_PRESETS])), default="W3",
                   help="W2, W3, or a GPT preset (gpt-125m, ...)")
    p.add_argument("--strategy", type=choice_list(STRATEGIES), default="ddp",
                   help=f"comma-separated, of {', '.join(STRATEGIES)}")
    p.add_argument("--steps", type=positive_int, default=10)
    p.add_argument("--warmup", type=nonnegative_int, default=2, help="steps left out of the medians (< --steps)")
    p.add_argument("--batch", type=positive_int, default=None, help="sequences per rank (GPT models)")
    p.add_argument("--seq", type=positive_int, default=None, help="sequence length (GPT models)")
    p.add_argument("--bucket-mb", type=positive_float, default=25.0, help="DDP's bucket_cap_mb")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--threads", type=positive_int, default=1, help="intra-op threads per rank")
    p.add_argument("--no-baseline", action="store_true", help="skip the unwrapped copy (no exposed-comm figure)")
    p.add_argument("--trace", default=None, help="write rank 0's last step as a Chrome trace for simulate --profile")
    p.add_argument("--json", default=None)
    p.add_argument("--plot", default=None, help="PNG of step time split into compute and exposed communication")
    p.add_argument("--timeout", type=positive_float, default=1800.0)


def _unit_name(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 and parts[1].isdigit() else parts[0]


def _units(model: Any) -> List[Any]:
    """The modules fully_shard wraps one by one: GPT blocks, or a Sequential's layers that hold parameters."""
    if hasattr(model, "blocks"):
        return list(model.blocks)
    return [m for m in model.children() if any(True for _ in m.parameters())]


def wrap(strategy: str, model: Any, lib: Any, bucket_mb: float, lr: float = 1e-3) -> tuple:
    """(module to call, optimizer, DDP module or None) for a strategy; the ZeRO APIs are imported by name when
    asked for, with a clear error when this build lacks them."""
    if strategy == "none":
        return model, lib.optim.AdamW(model.parameters(), lr=lr), None
    from tinytorch.nn.parallel import DistributedDataParallel as DDP

    if strategy == "ddp":
        ddp = DDP(model, bucket_cap_mb=bucket_mb)
        return ddp, lib.optim.AdamW(model.parameters(), lr=lr), ddp
    if strategy == "zero1":
        try:
            from tinytorch.distributed.optim import ZeroRedundancyOptimizer
        except ImportError as e:
            raise RuntimeError("strategy zero1 needs tinytorch.distributed.optim.ZeroRedundancyOptimizer, which this "
                               f"build does not have ({e})") from None
        ddp = DDP(model, bucket_cap_mb=bucket_mb)
        return ddp, ZeroRedundancyOptimizer(model.parameters(), optimizer_class=lib.optim.AdamW, lr=lr), ddp
    if strategy in ("zero2", "zero3"):
        try:
            from tinytorch.distributed.fsdp import fully_shard
        except ImportError as e:
            raise RuntimeError(f"strategy {strategy} needs tinytorch.distributed.fsdp (fully_shard), which this build "
                               f"does not have ({e})") from None
        reshard = strategy == "zero3"
        for unit in _units(model):
            fully_shard(unit, reshard_after_forward=reshard)
        fully_shard(model, reshard_after_forward=reshard)
        return model, lib.optim.AdamW(model.parameters(), lr=lr), None
    raise ValueError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")


class _Recorder:
    """Post-accumulate-grad hooks that note when each parameter's gradient is ready (while armed)."""

    def __init__(self, model: Any) -> None:
        self.armed = False
        self.ready: List[tuple] = []
        for name, p in model.named_parameters():
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(self._hook(name, int(p.numel())))

    def _hook(self, name: str, numel: int) -> Callable[[Any], None]:
        def hook(_: Any) -> None:
            if self.armed:
                self.ready.append((time.monotonic_ns(), name, numel))
        return hook


def _activation_bytes(call: Any, x: Any, y: Any, lib: Any) -> Optional[int]:
    """Bytes the forward pass leaves alive for backward (NumPy's allocations through tracemalloc), on CPU."""
    import tracemalloc

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        loss = lib.nn.functional.cross_entropy(call(x), y)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    loss.backward()
    return max(after - before, 0)


def _peak_bytes(device: str) -> int:
    if device.startswith("cuda"):
        import cupy

        pool = cupy.get_default_memory_pool()
        return int(pool.total_bytes())
    from ._common import peak_rss_bytes

    return peak_rss_bytes()


def worker(cfg: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """One rank: build, wrap, step round-robin with the unwrapped copy, measure; rank 0 returns every rank's."""
    import tinytorch
    import tinytorch.distributed as dist
    import tinytorch.nn  # noqa: F401

    from . import workloads
    from ._common import init_group

    tinytorch.set_num_threads(cfg["threads"])
    strategy = cfg["strategy"]
    device = cfg["device"]
    if device == "cuda":  # pick this rank's GPU before NCCL binds its communicator to the current device
        import cupy

        local = int(os.environ.get("LOCAL_RANK", "0"))
        cupy.cuda.Device(local).use()
        device = f"cuda:{local}"
    init_group("nccl" if device.startswith("cuda") else "ring")
    rank, world = dist.get_rank(), dist.get_world_size()
    lib = tinytorch
    runs = []  # (label, call, opt, ddp, x, y, model, recorder)
    tokens = params = 0
    for label, strat in ([("alone", "none")] if cfg["baseline"] and strategy != "none" else []) + [(strategy, strategy)]:
        lib.manual_seed(0)
        model, _, _, tokens = workloads.build(lib, cfg["model"], cfg["batch"], cfg["seq"])
        x_np, y_np = _rank_batch(workloads, cfg, rank)
        model = model.to(device)
        if label == strategy:
            params = sum(int(p.numel()) for p in model.parameters())  # before any sharding
        recorder = _Recorder(model) if label == strategy else None
        call, opt, ddp = wrap(strat, model, lib, cfg["bucket_mb"])
        x, y = lib.from_numpy(x_np).to(device), lib.from_numpy(y_np).to(device)
        runs.append((label, call, opt, ddp, x, y, model, recorder))
    times: Dict[str, List[float]] = {r[0]: [] for r in runs}
    stats: List[Dict[str, Any]] = []
    for step in range(cfg["steps"]):
        order = runs if step % 2 == 0 else runs[::-1]
        for label, call, opt, ddp, x, y, model, rec in order:
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(call(x), y)
            loss.backward()
            opt.step()
            loss.item()
            times[label].append(time.perf_counter() - t0)
            if ddp is not None:
                stats.append(ddp.last_step_stats)
    trace = None
    if cfg["trace"]:  # every rank steps (a wrapped model communicates); rank 0 writes the file
        label, call, opt, ddp, x, y, model, rec = runs[-1]
        trace = trace_step(call, opt, x, y, lib, rec, cfg, params, tokens, device, write=rank == 0)
    w = cfg["warmup"]
    mine = {"rank": rank, "step_ms": 1e3 * median(times[strategy][w:]),
            "step_ms_all": [1e3 * t for t in times[strategy]], "peak_bytes": _peak_bytes(device)}
    if "alone" in times:
        mine["alone_ms"] = 1e3 * median(times["alone"][w:])
    if stats:
        st = stats[w:] or stats
        for k in ("comm_ms", "overlapped_ms", "exposed_ms", "overlap_fraction"):
            mine[k] = median([s[k] for s in st])
    everyone: List[Any] = [None] * world
    dist.all_gather_object(everyone, mine)
    dist.destroy_process_group()
    if rank != 0:
        return None
    return {"model": cfg["model"], "strategy": strategy, "world": world, "params": params,
            "tokens_per_rank_step": tokens, "ranks": everyone, "trace": trace, "device": device}


def _rank_batch(workloads: Any, cfg: Dict[str, Any], rank: int) -> tuple:
    """Rank r's own batch (a different seed per rank, as data parallelism has)."""
    if cfg["model"] == "W2":
        return workloads.batch("W2", seed=rank)
    B, T = cfg["batch"], cfg["seq"]
    if cfg["model"] == "W3":
        return workloads.batch("W3", seed=rank, B=B or 16, T=T or 128)
    from .model import GPT_PRESETS

    return workloads.batch("W3", seed=rank, B=B or 1, T=T or 1024, V=GPT_PRESETS[cfg["model"]].get("vocab", 50257))


def trace_step(call: Any, opt: Any, x: Any, y: Any, lib: Any, rec: Any, cfg: Dict[str, Any], params: int,
               tokens: int, device: str, write: bool = True) -> Optional[str]:
    """Profile one more step: tinytorch.profiler's spans, the phases (forward, backward, optimizer), one
    grad_ready event per parameter and the step's metadata (parameters, tokens, activation bytes), as the
    Chrome trace `simulate --profile` reads."""
    from tinytorch.profiler import TRACK_USER, profile

    act = _activation_bytes(call, x, y, lib) if device == "cpu" else None  # tracemalloc sees host memory only
    opt.zero_grad()
    prof = profile()
    rec.ready.clear()
    rec.armed = True
    prof.start()
    t0 = time.monotonic_ns()
    opt.zero_grad()
    loss = lib.nn.functional.cross_entropy(call(x), y)
    t1 = time.monotonic_ns()
    loss.backward()
    t2 = time.monotonic_ns()
    opt.step()
    loss.item()
    t3 = time.monotonic_ns()
    prof.stop()
    rec.armed = False
    for name, a, b in (("forward", t0, t1), ("backward", t1, t2), ("optimizer", t2, t3)):
        prof._add_event(name, "phase", a, b, TRACK_USER)
    for t, name, numel in rec.ready:
        prof._add_event("grad_ready", "grad_ready", t, t, TRACK_USER,
                        {"param": name, "numel": numel, "unit": _unit_name(name)})
    prof._add_event("bench_meta", "meta", t0, t0, TRACK_USER,
                    {"model": cfg["model"], "strategy": cfg["strategy"], "params": params, "tokens": tokens,
                     "activation_bytes": act})
    if not write:
        return None
    prof.export_chrome_trace(cfg["trace"])
    return cfg["trace"]


def summarize(res: Dict[str, Any]) -> Dict[str, Any]:
    """One row: rank 0's medians, the slowest rank's peak memory, tokens/s over all ranks."""
    r0 = res["ranks"][0]
    row = {"model": res["model"], "strategy": res["strategy"], "world": res["world"], "params": res["params"],
           "step_ms": r0["step_ms"], "tokens_per_s": res["tokens_per_rank_step"] * res["world"] / (r0["step_ms"] / 1e3),
           "peak_bytes_per_rank": [r["peak_bytes"] for r in res["ranks"]],
           "peak_mb_max": max(r["peak_bytes"] for r in res["ranks"]) / 2 ** 20,
           "alone_ms": r0.get("alone_ms"), "comm_ms": r0.get("comm_ms"), "step_ms_all": r0["step_ms_all"]}
    if res["strategy"] == "ddp" and "exposed_ms" in r0:  # the Reducer measured its all-reduces
        row["exposed_comm_ms"], row["hidden_comm_ms"] = r0["exposed_ms"], r0["overlapped_ms"]
    elif row["alone_ms"] is not None and res["strategy"] != "none":
        # ZeRO: step - alone; for ZeRO-1 the hidden part is DDP's gradient all-reduce behind backward (its
        # parameter broadcast after the step is exposed by construction)
        row["exposed_comm_ms"] = max(r0["step_ms"] - row["alone_ms"], 0.0)
        row["hidden_comm_ms"] = r0.get("overlapped_ms")
    else:
        row["exposed_comm_ms"] = row["hidden_comm_ms"] = None
    row["trace"] = res.get("trace")
    return row


def render(rows: List[Dict[str, Any]]) -> str:
    """The measured table."""
    body = [(r["model"], r["strategy"], r["world"], r["step_ms"], r["alone_ms"], r["tokens_per_s"], r["peak_mb_max"],
             r["comm_ms"], r["exposed_comm_ms"], r["hidden_comm_ms"]) for r in rows]
    return table(["model", "strategy", "world", "step_ms", "alone_ms", "tokens/s", "peak_MB/rank", "comm_ms",
                  "exposed_ms", "hidden_ms"], body,
                 ["{}", "{}", "{}", "{:.1f}", "{:.1f}", "{:.0f}", "{:.0f}", "{:.1f}", "{:.1f}", "{:.1f}"])


def plot(rows: List[Dict[str, Any]], path: str) -> bool:
    """Bars: compute (step - exposed) and exposed communication per configuration (matplotlib, optional)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install 'tinytorch[plot]')")
        return False
    labels = [f"{r['model']} {r['strategy']} x{r['world']}" for r in rows]
    exp = [r["exposed_comm_ms"] or 0.0 for r in rows]
    comp = [r["step_ms"] - e for r, e in zip(rows, exp)]
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(rows)), 4))
    ax.bar(labels, comp, label="compute (and hidden communication)")
    ax.bar(labels, exp, bottom=comp, label="exposed communication")
    ax.set_ylabel("ms per step (rank 0, median)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")
    return True


def run(model: str, strategy: str, nproc: Optional[int], steps: int = 10, warmup: int = 2, batch: Optional[int] = None,
        seq: Optional[int] = None, bucket_mb: float = 25.0, device: str = "cpu", threads: int = 1,
        baseline: bool = True, trace: Optional[str] = None, timeout: float = 1800.0) -> Optional[Dict[str, Any]]:
    """Measure one (model, strategy) on nproc spawned ranks (or the launched ones); rank 0's summary row."""
    cfg = {"model": model, "strategy": strategy, "steps": steps, "warmup": warmup, "batch": batch, "seq": seq,
           "bucket_mb": bucket_mb, "device": device, "threads": threads, "baseline": baseline,
           "trace": os.path.abspath(trace) if trace else None}
    res = run_ranks(worker, nproc, (cfg,), timeout=timeout)
    return summarize(res[0]) if res and res[0] is not None else None


def main(args: argparse.Namespace) -> Optional[List[Dict[str, Any]]]:
    """Measure every requested strategy, print the table, write JSON and the plot."""
    strategies = args.strategy
    if args.warmup >= args.steps:
        usage_error(args, f"argument --warmup: must be less than --steps ({args.steps}), got {args.warmup}")
    nproc = args.nproc if args.nproc or launched() else 2
    rows = []
    for s in strategies:
        trace = args.trace if s == strategies[-1] else None
        row = run(args.model, s, nproc, args.steps, args.warmup, args.batch, args.seq, args.bucket_mb, args.device,
                  args.threads, not args.no_baseline, trace, args.timeout)
        if row is None:
            return None  # a launched rank other than 0
        rows.append(row)
    print(render(rows))
    if args.json:
        write_json(args.json, {"rows": rows, "cpus": os.cpu_count(),
                               "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    if args.plot:
        plot(rows, args.plot)
    return rows
