"""`tinytorch-bench validate`: calibrate the scale model on this machine, predict, then measure and compare.

    tinytorch-bench validate --json validate.json [--out-dir DIR]

1. calibrate: a 2-rank all_reduce sweep (alpha and bus bandwidth of `this-machine`) and a traced 1-rank W3
   step (per-unit compute, the order and times gradients become ready, the optimizer step);
2. predict with the same model `simulate` uses: DDP W3 at world 2 (ZeRO-2 and ZeRO-3 too when
   tinytorch.distributed.fsdp exists), and all_reduce at 3 and 4 ranks over the sweep's sizes;
3. measure those runs and print predicted against measured; error = (predicted - measured) / measured.

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
    p.add_argument("--tolerance", type=float, default=0.15, help="the target: |error| within this")
    p.add_argument("--json", default=None, help="write {'cases': [...]} here")


def _sweep(n: int, sizes: List[int], iters: int, path: str) -> List[Dict[str, Any]]:
    from . import collectives as C
    from ._common import spawn, write_json as wj

    cfg = {"ops": ["all_reduce"], "sizes": sizes, "dtype": "float", "iters": iters, "warmup": 3, "backend": "ring"}
    rows = spawn(C.sweep, n, (cfg,), timeout=900)[0]
    wj(path, {"rows": rows, "world": n})
    return rows


def have_fsdp() -> bool:
    """True when this build has tinytorch.distributed.fsdp (ZeRO-2/3)."""
    return importlib.util.find_spec("tinytorch.distributed.fsdp") is not None


def main(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """Calibrate, predict, measure, print the comparison and write JSON."""
    from . import train as T

    os.makedirs(args.out_dir, exist_ok=True)
    sizes = [parse_size(s) for s in parse_list(args.sizes)]
    t_start = time.time()
    print("# calibrating: 2-rank all_reduce sweep")
    cal_path = os.path.join(args.out_dir, "calibration_sweep_2ranks.json")
    _sweep(2, sizes, args.iters, cal_path)
    print("# calibrating: traced 1-rank W3 step")
    trace = os.path.join(args.out_dir, "w3_1rank_trace.json")
    one = T.run("W3", "none", 1, steps=args.steps, warmup=args.warmup, baseline=False, trace=trace)
    hw = hwmod.from_collectives(cal_path)
    from .simulate import load_profile

    traced = load_profile(trace)
    # The trace's one step gives per-unit shares and gradient timing; the median of the run's steps the scale.
    w = traced.scaled(one["step_ms"] / 1e3 / (traced.fwd_s + traced.bwd_s + traced.opt_s))
    print(f"# this-machine: alpha {hw.intra.alpha_s * 1e6:.1f} us per ring step, bus bandwidth "
          f"{hw.intra.beta_Bps / 1e9:.2f} GB/s (2 ranks), {hw.cpu_cores} cores; W3 step traced: forward "
          f"{w.fwd_s * 1e3:.0f} ms, backward {w.bwd_s * 1e3:.0f} ms, optimizer {w.opt_s * 1e3:.0f} ms")
    strategies = ["ddp"] + (["zero2", "zero3"] if have_fsdp() else [])
    if not have_fsdp():
        print("# tinytorch.distributed.fsdp is absent: ZeRO-2/3 cases skipped")
    cases: List[Dict[str, Any]] = []
    for s in strategies:
        pred = M.simulate_step(s, w, 2, hw, precision="fp32")["step_ms"]
        row = T.run("W3", s, 2, steps=args.steps, warmup=args.warmup, baseline=False)
        cases.append({"strategy": s, "world": 2, "model": "W3", "predicted_ms": pred, "measured_ms": row["step_ms"]})
    for n in parse_list(args.worlds, int):
        rows = _sweep(n, sizes, args.iters, os.path.join(args.out_dir, f"sweep_{n}ranks.json"))
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
                               "load_avg": os.getloadavg(), "cpus": os.cpu_count()})
    return cases
