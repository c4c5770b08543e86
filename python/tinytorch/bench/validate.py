"""`tinytorch-bench validate`: calibrate the scale model on this machine, predict, then measure and compare.

    tinytorch-bench validate --json validate.json [--out-dir DIR]

1. calibrate: a 2-rank all_reduce sweep (alpha and bus bandwidth of `this-machine`) and a traced 1-rank W3
   step (per-unit compute, the order and times gradients become ready, the optimizer step), taken on rank 0
   while a second rank trains alone beside it, so it sees the CPU contention of the 2-rank runs;
2. predict with the same model `simulate` uses: DDP W3 at world 2 (ZeRO-2 and ZeRO-3 too when
   tinytorch.distributed.fsdp exists), and all_reduce at 3 and 4 ranks over the sweep's sizes;
3. measure those runs and print predicted against measured; error = (predicted - measured) / measured.
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
from typing import Any, Dict, List

from . import hardware as hwmod
from . import model as M
from ._common import format_size, parse_list, parse_size, table, write_json


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The validate subcommand's flags."""
    p.add_argument("--out-dir", default="bench_validate", help="where the calibration files go")
    p.add_argument("--sizes", default="256K,1M,4M,16M", help="all_reduce sizes of the sweeps")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--worlds", default="3,4", help="all_reduce sweeps measured beyond the 2-rank calibration")
    p.add_argument("--steps", type=int, default=8, help="training steps per measured run")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=2, help="rounds of W3 calibration and measurement (medians)")
    p.add_argument("--sweep-repeats", type=int, default=4, help="rounds of all_reduce sweeps (fastest of them)")
    p.add_argument("--tolerance", type=float, default=0.15, help="the target: |error| within this")
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

    os.makedirs(args.out_dir, exist_ok=True)
    sizes = [parse_size(s) for s in parse_list(args.sizes)]
    worlds = parse_list(args.worlds, int)
    strategies = ["ddp"] + (["zero2", "zero3"] if have_fsdp() else [])
    if not have_fsdp():
        print("# tinytorch.distributed.fsdp is absent: ZeRO-2/3 cases skipped")
    t_start = time.time()
    trace = os.path.join(args.out_dir, "w3_1rank_trace.json")
    sweeps: Dict[int, List[List[Dict[str, Any]]]] = {n: [] for n in [2] + worlds}
    calib_ms: List[float] = []
    measured: Dict[str, List[float]] = {s: [] for s in strategies}
    # Calibration and measurement alternate, `repeats` rounds, and medians are compared: load from other
    # processes then falls on both alike instead of on whichever ran during a busy minute.
    rounds = max(args.repeats, args.sweep_repeats)
    for rep in range(rounds):
        if rep < args.sweep_repeats:
            print(f"# round {rep + 1}/{rounds}: all_reduce sweeps at {', '.join(map(str, sweeps))} ranks")
            for n in sweeps:
                sweeps[n].append(_sweep(n, sizes, args.iters))
        if rep >= args.repeats:
            continue
        # The traced step is rank 0's while a second rank trains beside it without communicating, so it sees
        # the CPU contention of the 2-rank runs it predicts; the median of its run's steps gives the scale.
        print(f"# round {rep + 1}/{rounds}: W3 calibration (2 ranks, no communication), then "
              f"{', '.join(strategies)} at 2 ranks")
        one = T.run("W3", "none", 2, steps=args.steps, warmup=args.warmup, baseline=False,
                    trace=trace if rep == 0 else None)
        calib_ms.append(one["step_ms"])
        for s in strategies:
            measured[s].append(T.run("W3", s, 2, steps=args.steps, warmup=args.warmup, baseline=False)["step_ms"])
    cal_path = os.path.join(args.out_dir, "calibration_sweep_2ranks.json")
    write_json(cal_path, {"rows": _best_rows(sweeps[2]), "world": 2})
    hw = hwmod.from_collectives(cal_path)
    traced = load_profile(trace)
    w = traced.scaled(median(calib_ms) / 1e3 / (traced.fwd_s + traced.bwd_s + traced.opt_s))
    print(f"# this-machine: alpha {hw.intra.alpha_s * 1e6:.1f} us per ring step, bus bandwidth "
          f"{hw.intra.beta_Bps / 1e9:.2f} GB/s (2 ranks), {hw.cpu_cores} cores; W3 step: forward "
          f"{w.fwd_s * 1e3:.0f} ms, backward {w.bwd_s * 1e3:.0f} ms, optimizer {w.opt_s * 1e3:.0f} ms")
    cases: List[Dict[str, Any]] = []
    for s in strategies:
        pred = M.simulate_step(s, w, 2, hw, precision="fp32")["step_ms"]
        cases.append({"strategy": s, "world": 2, "model": "W3", "predicted_ms": pred,
                      "measured_ms": median(measured[s]), "measured_repeats_ms": measured[s]})
    for n in worlds:
        rows = _best_rows(sweeps[n])
        write_json(os.path.join(args.out_dir, f"sweep_{n}ranks.json"), {"rows": rows, "world": n})
        for r in rows:
            pred = 1e3 * M.collective_s("all_reduce", r["bytes"], n, hw)
            cases.append({"strategy": "all_reduce", "world": n, "model": format_size(r["bytes"]),
                          "predicted_ms": pred, "measured_ms": r["time_us"] / 1e3})
    for c in cases:
        c["error"] = (c["predicted_ms"] - c["measured_ms"]) / c["measured_ms"]
    print(table(["strategy", "world", "model", "predicted_ms", "measured_ms", "error"],
                [(c["strategy"], c["world"], c["model"], c["predicted_ms"], c["measured_ms"], c["error"])
                 for c in cases], ["{}", "{}", "{}", "{:.2f}", "{:.2f}", "{:+.1%}"]))
    within = sum(abs(c["error"]) <= args.tolerance for c in cases)
    print(f"# {within} of {len(cases)} cases within {args.tolerance:.0%} of measured "
          f"({time.time() - t_start:.0f} s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    if args.json:
        write_json(args.json, {"cases": cases, "hardware": hw.to_json(), "tolerance": args.tolerance,
                               "repeats": args.repeats, "sweep_repeats": args.sweep_repeats, "load_avg": os.getloadavg(), "cpus": os.cpu_count()})
    return cases
