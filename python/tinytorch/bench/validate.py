"""`tinytorch-bench validate`: calibrate the scale model on this machine, predict, then measure and compare.

    tinytorch-bench validate --json validate.json [--out-dir DIR]

1. calibrate: a 2-rank all_reduce sweep (alpha and bus bandwidth of `this-machine`) and a traced 1-rank W3
   step (per-unit and per-op compute, the order and times gradients become ready, the optimizer step), taken
   on rank 0 while a second rank trains alone beside it, so it sees the CPU contention of the 2-rank runs;
   the trace gives the step's shape, and each measured run's scale is the unwrapped W3 step (`alone_ms`)
   that `train` steps round-robin with the measured configuration on the same ranks; the pipeline run also
   times that step on rank 0 while rank 1 waits (`solo_ms`): alone / solo is how much faster a rank computes
   while its neighbour waits on these shared cores, which shortens the pipeline's bubble (layout.py);
2. predict with the same models `simulate` uses: DDP, ZeRO-2 and ZeRO-3 W3 at world 2 (the DDP/ZeRO model),
   W3 with tensor parallelism over the 2 ranks and in a 2-stage 1F1B pipeline (the 3-D model, `layout.py`,
   with the traced step's compute), and all_reduce at 3 and 4 ranks over the sweep's sizes;
3. measure those runs (`tinytorch-bench train --strategy ddp|zero2|zero3|tp|pp`) and print predicted against
   measured; error = (predicted - measured) / measured. A case whose strategy this build cannot run (ZeRO-2/3
   without tinytorch.distributed.fsdp) is printed as predicted only.
Calibration and measurement alternate over rounds: training steps compare medians over `--repeats` rounds,
collectives the fastest of `--sweep-repeats` sweeps (load from other processes only adds time).

On a CPU machine, the model shares bandwidth among ranks when there are more ranks than cores (the ring
backend's copies are CPU work). Other processes on the machine make measured figures noisy.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import time
from typing import Any, Dict, List, NamedTuple, Optional

from . import hardware as hwmod
from . import layout as L
from . import model as M
from ._cli import (byte_size, choice_list, int_at_least, list_of, nonnegative_int, positive_float, positive_int,
                   usage_error)
from ._common import format_size, table, write_json

W3 = L.Transformer.preset("W3")


class Case(NamedTuple):
    """A W3 training case at 2 ranks: the `train` strategy that measures it, and the 3-D layout that predicts it
    (None: the DDP/ZeRO model, each rank with its own batch of 16)."""

    strategy: str
    layout: Optional[L.Layout] = None


# TP: both ranks on one batch of 16; PP: 2 stages (blocks 0-1, blocks 2-3 and the head), 4 microbatches of 4;
# measured by `tinytorch-bench train --strategy tp|pp` running these layouts.
TRAINING_CASES = (Case("ddp"), Case("zero2"), Case("zero3"),
                  Case("tp", L.Layout(tp=2, micro_batch=16, global_batch=16)),
                  Case("pp", L.Layout(pp=2, schedule="1f1b", micro_batch=4, global_batch=16)))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The validate subcommand's flags."""
    p.add_argument("--out-dir", default="bench_validate", help="where the calibration files go")
    p.add_argument("--sizes", type=list_of(byte_size, "sizes such as 256K or 16M"), default="256K,1M,4M,16M",
                   help="all_reduce sizes of the sweeps")
    p.add_argument("--iters", type=positive_int, default=10)
    p.add_argument("--worlds", type=list_of(int_at_least(2), "integers >= 2"), default="3,4",
                   help="all_reduce sweeps measured beyond the 2-rank calibration")
    p.add_argument("--cases", type=choice_list([c.strategy for c in TRAINING_CASES]),
                   default=",".join(c.strategy for c in TRAINING_CASES), help="the W3 training cases to run")
    p.add_argument("--steps", type=positive_int, default=8, help="training steps per measured run")
    p.add_argument("--warmup", type=nonnegative_int, default=3, help="steps left out of the medians (< --steps)")
    p.add_argument("--repeats", type=positive_int, default=2,
                   help="rounds of W3 calibration and measurement (medians)")
    p.add_argument("--sweep-repeats", type=positive_int, default=4,
                   help="rounds of all_reduce sweeps (fastest of them)")
    p.add_argument("--tolerance", type=positive_float, default=0.15, help="the target: |error| within this")
    p.add_argument("--json", default=None, help="write {'cases': [...]} here")


def _sweep(n: int, sizes: List[int], iters: int) -> List[Dict[str, Any]]:
    """An all_reduce sweep on n spawned local ranks (rank 0's rows)."""
    from . import collectives as C
    from ._common import spawn

    cfg = {"ops": ["all_reduce"], "sizes": sizes, "dtype": "float", "iters": iters, "warmup": 3, "backend": "ring"}
    return spawn(C.sweep, n, (cfg,), timeout=900)[0]


def have_fsdp() -> bool:
    """True when this build has tinytorch.distributed.fsdp (ZeRO-2/3)."""
    return importlib.util.find_spec("tinytorch.distributed.fsdp") is not None


def measurable(case: Case) -> bool:
    """True when `tinytorch-bench train` runs the case's strategy in this build."""
    from .train import STRATEGIES

    return case.strategy in STRATEGIES and (have_fsdp() or case.strategy not in ("zero2", "zero3"))


def predict(case: Case, w: M.Workload, hw: hwmod.Hardware, solo_speedup: float = 1.0) -> float:
    """Predicted W3 step (ms) at 2 ranks from the calibrated workload and hardware (float32 throughout)."""
    return _row(case, w, hw, solo_speedup)["step_ms"]


def _row(case: Case, w: M.Workload, hw: hwmod.Hardware, solo_speedup: float = 1.0) -> Dict[str, Any]:
    if case.layout is None:
        return M.simulate_step(case.strategy, w, 2, hw, precision="fp32")
    return L.simulate_layout(W3, case.layout, hw, precision="fp32", measured=w, solo_speedup=solo_speedup)


def _best_rows(runs: List[List[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """Per size, the fastest of the repeated sweeps' rows: other processes only ever add time to a collective,
    so the minimum is the machine's own figure (used alike for calibration and measurement)."""
    out = []
    for k in range(len(runs[0])):
        best = min((r[k] for r in runs), key=lambda r: r["time_us"])
        out.append(dict(best, repeats_us=[r[k]["time_us"] for r in runs]))
    return out


def main(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """Calibrate, predict, measure, print the comparison and write JSON."""
    from . import train as T
    from ._common import median
    from .simulate import load_profile

    if args.warmup >= args.steps:
        usage_error(args, f"argument --warmup: must be less than --steps ({args.steps}), got {args.warmup}")
    os.makedirs(args.out_dir, exist_ok=True)
    sizes, worlds = args.sizes, args.worlds
    chosen = [c for c in TRAINING_CASES if c.strategy in args.cases]
    measured_cases = [c for c in chosen if measurable(c)]
    strategies = [c.strategy for c in measured_cases]
    left = [c.strategy for c in chosen if c not in measured_cases]
    if left:
        print(f"# predicted only (tinytorch-bench train does not run them in this build): {', '.join(left)}")
    t_start = time.time()
    trace = os.path.join(args.out_dir, "w3_1rank_trace.json")
    sweeps: Dict[int, List[List[Dict[str, Any]]]] = {n: [] for n in [2] + worlds}
    calib_ms: List[float] = []
    runs: Dict[str, List[Dict[str, Any]]] = {s: [] for s in strategies}
    # Calibration and measurement alternate, `repeats` rounds, and medians are compared: load from other
    # processes then falls on both alike instead of on whichever ran during a busy minute. Within a training
    # run they alternate step by step: each measured run also steps the unwrapped W3 on the same ranks
    # (train's alone_ms), and that run's prediction takes its compute scale from those steps.
    rounds = max(args.repeats, args.sweep_repeats)
    for rep in range(rounds):
        if rep < args.sweep_repeats:
            print(f"# round {rep + 1}/{rounds}: all_reduce sweeps at {', '.join(map(str, sweeps))} ranks")
            for n in sweeps:
                sweeps[n].append(_sweep(n, sizes, args.iters))
        if rep >= args.repeats:
            continue
        # The traced step is rank 0's while a second rank trains beside it without communicating, so it sees
        # the CPU contention of the 2-rank runs it predicts: it gives the step's shape (per-unit and per-op
        # shares, gradient timing); the scale comes from each measured run's own unwrapped steps.
        print(f"# round {rep + 1}/{rounds}: " + ("W3 trace (2 ranks, no communication), then " if rep == 0 else "")
              + f"{', '.join(strategies)} at 2 ranks, each beside the unwrapped W3")
        if rep == 0:
            calib_ms.append(T.run("W3", "none", 2, steps=args.steps, warmup=args.warmup, baseline=False,
                                  trace=trace)["step_ms"])
        for c in measured_cases:
            m = c.layout.microbatches if c.layout else 1
            runs[c.strategy].append(T.run("W3", c.strategy, 2, steps=args.steps, warmup=args.warmup,
                                          baseline=True, microbatches=m, solo=c.layout is not None and
                                          c.layout.pp > 1))
    cal_path = os.path.join(args.out_dir, "calibration_sweep_2ranks.json")
    write_json(cal_path, {"rows": _best_rows(sweeps[2]), "world": 2})
    hw = hwmod.from_collectives(cal_path)
    traced = load_profile(trace)

    def scaled(step_ms: float) -> M.Workload:
        """The traced step's shape at a measured W3 step's scale."""
        return traced.scaled(step_ms / 1e3 / (traced.fwd_s + traced.bwd_s + traced.opt_s))

    alone_ms = [r["alone_ms"] for rs in runs.values() for r in rs]
    w = scaled(median(alone_ms or calib_ms))
    print(f"# this-machine: alpha {hw.intra.alpha_s * 1e6:.1f} us per ring step, bus bandwidth "
          f"{hw.intra.beta_Bps / 1e9:.2f} GB/s (2 ranks), {hw.cpu_cores} cores; W3 step: forward "
          f"{w.fwd_s * 1e3:.0f} ms, backward {w.bwd_s * 1e3:.0f} ms, optimizer {w.opt_s * 1e3:.0f} ms")
    cases: List[Dict[str, Any]] = []
    for c in chosen:
        got = runs.get(c.strategy) or []
        rows = [_row(c, scaled(r["alone_ms"]), hw, r["alone_ms"] / r["solo_ms"] if r.get("solo_ms") else 1.0)
                for r in got] or [_row(c, w, hw)]
        steps = [r["step_ms"] for r in got]
        case = {"strategy": c.strategy, "world": 2, "model": "W3", "layout": c.layout.name() if c.layout else None,
                "predicted_ms": median([r["step_ms"] for r in rows]),
                "measured_ms": median(steps) if steps else None,
                "predicted_repeats_ms": [r["step_ms"] for r in rows], "measured_repeats_ms": steps,
                "alone_repeats_ms": [r["alone_ms"] for r in got]}
        if c.strategy == "pp":  # the pipeline's parts, predicted and measured (each rank's compute and idle)
            case.update(predicted_compute_ms=median([r["compute_ms"] for r in rows]),
                        solo_speedup=[r["solo_speedup"] for r in rows],
                        predicted_bubble_ms=median([r["bubble_ms"] for r in rows]),
                        compute_ms_per_rank=[r["compute_ms_per_rank"] for r in got],
                        idle_ms_per_rank=[r["idle_ms_per_rank"] for r in got])
        cases.append(case)
    for n in worlds:
        rows = _best_rows(sweeps[n])
        write_json(os.path.join(args.out_dir, f"sweep_{n}ranks.json"), {"rows": rows, "world": n})
        for r in rows:
            pred = 1e3 * M.collective_s("all_reduce", r["bytes"], n, hw)
            cases.append({"strategy": "all_reduce", "world": n, "model": format_size(r["bytes"]),
                          "predicted_ms": pred, "measured_ms": r["time_us"] / 1e3})
    for c in cases:
        c["error"] = None if c["measured_ms"] is None else (c["predicted_ms"] - c["measured_ms"]) / c["measured_ms"]
    print(table(["strategy", "world", "model", "predicted_ms", "measured_ms", "error"],
                [(c["strategy"], c["world"], c["model"], c["predicted_ms"], c["measured_ms"], c["error"])
                 for c in cases], ["{}", "{}", "{}", "{:.2f}", "{:.2f}", "{:+.1%}"]))
    compared = [c for c in cases if c["error"] is not None]
    within = sum(abs(c["error"]) <= args.tolerance for c in compared)
    print(f"# {within} of {len(compared)} measured cases within {args.tolerance:.0%} of measured "
          f"({time.time() - t_start:.0f} s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    if args.json:
        write_json(args.json, {"cases": cases, "hardware": hw.to_json(), "tolerance": args.tolerance,
                               "calibration_step_ms": calib_ms,
                               "repeats": args.repeats, "sweep_repeats": args.sweep_repeats, "load_avg": os.getloadavg(), "cpus": os.cpu_count()})
    return cases
