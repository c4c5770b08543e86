"""W8, pipeline half: how long each rank of a pipeline sits idle, beside the bubble the schedule predicts.

    python benchmarks/pipeline.py [--schedule 1F1B] [--microbatches 2 4 8] [--steps 8] [--warmup 2]
                                  [--picture docs/img/pipeline_1f1b_2ranks.png] [--no-torch]

Two ranks, one thread each, hold the two halves of an MLP stack (8 blocks of Linear(256, 1024), GELU,
Linear(1024, 256), residual; the last stage adds a 16-class head and cross-entropy), microbatches of 32 rows.
tinytorch's and PyTorch's pipelining (gloo, when torch is importable) are built in the same two processes and
stepped alternately, each step after a barrier. On every rank a step's compute is the time spent inside the
stage's forward_one_chunk and backward_one_chunk (the same wrapper times both libraries); idle = step time -
compute. For uniform stages the schedules predict idle / compute = (p - 1) / m (1F1B, GPipe) or (p - 1) / (v m)
(interleaved, v stages per rank). `--picture` profiles one more tinytorch step at the largest m and draws its
schedule from the Chrome trace (tinytorch.utils.plot.pipeline_schedule). Writes benchmarks/results/pipeline.json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

HIDDEN, BLOCKS, ROWS, CLASSES = 256, 8, 32, 16


def _pieces(lib: Any, n_stages: int) -> List[Any]:
    """The model cut into n_stages pieces of BLOCKS / n_stages blocks (the last with the head), same weights
    in both libraries."""
    import numpy as np
    nn = lib.nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up, self.down = nn.Linear(HIDDEN, 4 * HIDDEN), nn.Linear(4 * HIDDEN, HIDDEN)

        def forward(self, x: Any) -> Any:
            return x + self.down(nn.functional.gelu(self.up(x)))

    per = BLOCKS // n_stages
    pieces = [nn.Sequential(*[Block() for _ in range(per)]) for _ in range(n_stages)]
    pieces[-1].append(nn.Linear(HIDDEN, CLASSES))
    rng = np.random.default_rng(0)
    with lib.no_grad():
        for piece in pieces:
            for p in piece.parameters():
                p.copy_(lib.from_numpy((rng.standard_normal(tuple(p.shape)) * 0.02).astype(np.float32)))
    return pieces


class _Runner:
    """One library's pipeline on this rank, with the stage methods wrapped to time the compute."""

    def __init__(self, lib: Any, pp: Any, rank: int, world: int, schedule: str, m: int) -> None:
        import numpy as np
        self.lib, self.rank = lib, rank
        per_rank = 1 if schedule in ("GPipe", "1F1B") else 2
        n_stages = world * per_rank
        pieces = _pieces(lib, n_stages)
        mine = list(range(rank, n_stages, world))
        self.stages = [pp.PipelineStage(pieces[s], s, n_stages, lib.device("cpu")) for s in mine]
        cls = pp.schedules.get_schedule_class(schedule)
        self.schedule = cls(self.stages[0] if per_rank == 1 else self.stages, n_microbatches=m,
                            loss_fn=lib.nn.functional.cross_entropy)
        self.first, self.last = 0 in mine, n_stages - 1 in mine
        self.params = [p for piece in (pieces[s] for s in mine) for p in piece.parameters()]
        rng = np.random.default_rng(1)
        self.x = lib.from_numpy(rng.standard_normal((m * ROWS, HIDDEN)).astype(np.float32))
        self.y = lib.from_numpy(rng.integers(0, CLASSES, m * ROWS))
        self.compute = 0.0
        for stage in self.stages:
            for name in ("forward_one_chunk", "backward_one_chunk"):
                setattr(stage, name, self._timed(getattr(stage, name)))

    def _timed(self, fn: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.compute += time.perf_counter() - t0
        return run

    def step(self) -> Dict[str, float]:
        """One synchronized training step: (step ms, compute ms)."""
        self.lib.distributed.barrier()
        self.compute = 0.0
        t0 = time.perf_counter()
        args = (self.x,) if self.first else ()
        kwargs = {"target": self.y} if self.last else {}
        self.schedule.step(*args, **kwargs)
        wall = time.perf_counter() - t0
        for p in self.params:
            p.grad = None
        return {"step_ms": 1e3 * wall, "compute_ms": 1e3 * self.compute}


def _rank(rank: int, world: int, port: int, cfg: Dict[str, Any]) -> Dict[str, Any]:
    import tinytorch
    import tinytorch.distributed as tdist
    from tinytorch.distributed import pipelining as tpp
    tinytorch.set_num_threads(1)
    tdist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    libs = [("tinytorch", tinytorch, tpp)]
    if cfg["torch"]:
        import torch
        import torch.distributed as pdist
        from torch.distributed import pipelining as ppp
        torch.set_num_threads(1)
        pdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{cfg['torch_port']}", rank=rank,
                                 world_size=world)
        libs.append(("torch", torch, ppp))
    out: Dict[str, Any] = {}
    for m in cfg["microbatches"]:
        runners = [(name, _Runner(lib, pp, rank, world, cfg["schedule"], m)) for name, lib, pp in libs]
        times: Dict[str, List[Dict[str, float]]] = {name: [] for name, _ in runners}
        for step in range(cfg["warmup"] + cfg["steps"]):
            k = step % len(runners)
            for name, runner in runners[k:] + runners[:k]:
                t = runner.step()
                if step >= cfg["warmup"]:
                    times[name].append(t)
        out[str(m)] = times
    if cfg["picture"]:
        from tinytorch import profiler
        runner = _Runner(tinytorch, tpp, rank, world, cfg["schedule"], max(cfg["microbatches"]))
        runner.step()
        with profiler.profile(record_forward=False, record_backward=False) as prof:
            runner.step()
        out["trace"] = profiler.chrome_trace(prof.events())
    tdist.destroy_process_group()
    if cfg["torch"]:
        pdist.destroy_process_group()
    return out


def _rank_main(cfg: Dict[str, Any]) -> Dict[str, Any]:
    return _rank(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["MASTER_PORT"]), cfg)


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    from tinytorch.bench._common import free_port, spawn, table
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--schedule", default="1F1B", choices=["1F1B", "GPipe", "Interleaved1F1B", "LoopedBFS"])
    p.add_argument("--microbatches", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--picture", default=None, help="PNG of one tinytorch step's schedule (largest m)")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch even when it is importable")
    p.add_argument("--out", default=os.path.join(HERE, "results", "pipeline.json"))
    args = p.parse_args(argv)
    try:
        import torch  # noqa: F401
        have_torch = not args.no_torch
    except ImportError:
        have_torch = False
    world, v = 2, (1 if args.schedule in ("GPipe", "1F1B") else 2)
    cfg = {"schedule": args.schedule, "microbatches": args.microbatches, "steps": args.steps,
           "warmup": args.warmup, "torch": have_torch, "picture": bool(args.picture), "torch_port": free_port()}
    results: Dict[str, Any] = {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg(), "torch": have_torch,
                               "schedule": args.schedule, "ranks": world, "stages_per_rank": v,
                               "hidden": HIDDEN, "blocks": BLOCKS, "rows_per_microbatch": ROWS}
    res = spawn(_rank_main, world, (cfg,), timeout=1800.0)
    rows, per_m = [], {}
    for m in args.microbatches:
        theory = (world - 1) / (v * m) if args.schedule != "LoopedBFS" else None
        entry: Dict[str, Any] = {"predicted_idle_over_compute": theory}
        for rank, r in enumerate(res):
            for lib, steps in r[str(m)].items():
                step = statistics.median(s["step_ms"] for s in steps)
                comp = statistics.median(s["compute_ms"] for s in steps)
                idle = statistics.median(s["step_ms"] - s["compute_ms"] for s in steps)
                entry[f"{lib} rank {rank}"] = {"step_ms": step, "compute_ms": comp, "idle_ms": idle,
                                               "idle_over_compute": idle / comp}
                rows.append([m, rank, lib, step, comp, idle, idle / comp, theory])
        for rank in range(world):
            if f"torch rank {rank}" in entry:
                entry[f"step ratio rank {rank}"] = (entry[f"tinytorch rank {rank}"]["step_ms"] /
                                                    entry[f"torch rank {rank}"]["step_ms"])
        per_m[str(m)] = entry
    results["microbatches"] = per_m
    print(f"\nW8 pipeline: {args.schedule}, {world} ranks x {v} stage(s), {BLOCKS} blocks of width {HIDDEN}, "
          f"{ROWS} rows per microbatch, 1 thread per rank (medians of {args.steps} steps)")
    print(table(["m", "rank", "library", "step ms", "compute ms", "idle ms", "idle/compute", "(p-1)/(v m)"], rows,
                ["{}", "{}", "{}", "{:.1f}", "{:.1f}", "{:.1f}", "{:.3f}", "{:.3f}"]))
    if args.picture:
        from tinytorch.utils.plot import pipeline_schedule
        # The ranks' traces share one clock (CLOCK_MONOTONIC on one host): their events merge as they are.
        trace = {"traceEvents": [e for r in res for e in r["trace"]["traceEvents"]]}
        m = max(args.microbatches)
        pipeline_schedule(args.picture, trace, title=f"tinytorch {args.schedule}, {world} ranks x {v} stage(s), "
                                                      f"{m} microbatches (one step, from the profiler's trace)")
        print(f"wrote {args.picture}")
    results["load_avg_end"] = os.getloadavg()
    from harness import write_json
    write_json(args.out, results)
    return results


if __name__ == "__main__":
    main()
