"""`tinytorch-bench simulate`: predicted step time, communication and memory per GPU for DDP and ZeRO-1/2/3 at
world sizes you cannot run, from a parameter count, a GPT preset or a traced one-rank step.

    tinytorch-bench simulate --params 7.5e9 --world 64 --strategy ddp,zero1,zero2,zero3
    tinytorch-bench simulate --model gpt-13b --world 8,64,512,1024 --hardware h100 --json sim.json --plot sim.png
    tinytorch-bench simulate --profile w3_trace.json --hardware this-machine --collectives sweep.json --world 2,4

The model (tinytorch/bench/model.py) and the hardware profiles (hardware.py) state their formulas and sources.
A `--profile` is a Chrome trace of one rank's step from `tinytorch-bench train --trace F` (tinytorch.profiler
spans plus one `grad_ready` event per parameter and the step's phases); a plain tinytorch.profiler trace works
too, with `--params` and gradients assumed to arrive evenly through backward.
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Dict, List, Optional

from . import hardware as hwmod
from . import model as M
from ._common import parse_list, table, write_json

GB = 1e9


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The simulate subcommand's flags."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--params", type=float, help="parameter count (analytic model: 6 FLOPs per parameter-token)")
    src.add_argument("--model", choices=sorted(M.GPT_PRESETS), help="a GPT size preset (analytic, with activations)")
    src.add_argument("--profile", help="Chrome trace of a one-rank step (tinytorch-bench train --trace)")
    p.add_argument("--world", default="8,64,512,1024", help="comma-separated world sizes")
    p.add_argument("--gpus-per-node", type=int, default=None, help="default: the hardware profile's")
    p.add_argument("--strategy", default="ddp,zero1,zero2,zero3")
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--first-bucket-mb", type=float, default=1.0)
    p.add_argument("--hardware", default="h100", help="h100, a100, this-machine, or FILE.json")
    p.add_argument("--collectives", help="collectives --json file for --hardware this-machine")
    p.add_argument("--precision", choices=sorted(M.PRECISIONS), default=None,
                   help="bytes per parameter: mixed (2/2/12, default for --params/--model) or fp32 (4/4/8, default "
                        "for --profile: tinytorch trains in float32)")
    p.add_argument("--seq", type=int, default=2048, help="sequence length (analytic)")
    p.add_argument("--micro-batch", type=int, default=1, help="sequences per GPU per step (analytic)")
    p.add_argument("--layers", type=int, default=None, help="units for ZeRO-2/3 overlap (analytic; default 32)")
    p.add_argument("--json", default=None, help="write {'rows': [...]} here")
    p.add_argument("--plot", default=None, help="write a PNG (matplotlib) of step time and memory against world")


# ------------------------------------------------------------------ traced steps


def _unit_of(name: str) -> str:
    """'blocks.0.qkv.weight' -> 'blocks.0', 'tok.weight' -> 'tok', '0.weight' -> '0' (an FSDP-style unit)."""
    parts = name.split(".")
    if len(parts) > 2 and parts[1].isdigit():
        return ".".join(parts[:2])
    return parts[0]


def load_profile(path: str, params: Optional[float] = None) -> M.Workload:
    """A Workload from a traced step: phase spans give forward, backward and optimizer time; grad_ready events
    give each gradient's time after backward starts and its size; units are parameter-name prefixes whose
    backward time is the gap between their last gradients."""
    with open(path) as f:
        trace = json.load(f)
    spans = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    if not spans:
        raise ValueError(f"{path}: no spans (is it a tinytorch.profiler Chrome trace?)")
    phases = {e["name"]: e for e in spans if e.get("cat") == "phase"}
    meta = next((e["args"] for e in spans if e.get("cat") == "meta"), {})

    def extent(cat: str) -> tuple:
        es = [e for e in spans if e.get("cat") == cat]
        if not es:
            return 0.0, 0.0
        a = min(e["ts"] for e in es)
        return a, max(e["ts"] + e["dur"] for e in es) - a

    if "backward" in phases:
        F = phases["forward"]["dur"] * 1e-6
        bwd_start, B = phases["backward"]["ts"], phases["backward"]["dur"] * 1e-6
        O = phases["optimizer"]["dur"] * 1e-6 if "optimizer" in phases else 0.0
    else:
        F = extent("forward")[1] * 1e-6
        bwd_start, bdur = extent("backward")
        B, O = bdur * 1e-6, 0.0
    ready = sorted((e for e in spans if e.get("cat") == "grad_ready"), key=lambda e: e["ts"])
    if ready:
        grads = [((e["ts"] - bwd_start) * 1e-6, float(e["args"]["numel"])) for e in ready]
        done: Dict[str, float] = {}
        size: Dict[str, float] = {}
        for e in ready:
            u = e["args"].get("unit") or _unit_of(e["args"].get("param", "?"))
            done[u] = (e["ts"] - bwd_start) * 1e-6
            size[u] = size.get(u, 0.0) + float(e["args"]["numel"])
        order = sorted(done, key=lambda u: done[u])  # backward order
        prev, bwd = 0.0, {}
        for k, u in enumerate(order):
            end = B if k == len(order) - 1 else min(done[u], B)
            bwd[u] = max(end - prev, 0.0)
            prev = end
        units = [M.Unit(u, size[u], F * bwd[u] / B if B > 0 else 0.0, bwd[u]) for u in reversed(order)]
        if any(u.name.split(".")[-1].isdigit() for u in units):
            # fully_shard wraps each block and then the root, which takes every parameter outside the blocks
            # (embeddings, final norm, head): one unit gathered first in forward and reduced last in backward.
            rest = [u for u in units if not u.name.split(".")[-1].isdigit()]
            if len(rest) > 1:
                root = M.Unit("root", sum(u.params for u in rest), sum(u.fwd_s for u in rest),
                              sum(u.bwd_s for u in rest))
                units = [root] + [u for u in units if u.name.split(".")[-1].isdigit()]
    else:
        psi = params or meta.get("params")
        if not psi:
            raise ValueError(f"{path} has no grad_ready events: pass --params (the model's parameter count)")
        k = 8
        units = [M.Unit(f"unit{j}", psi / k, F / k, B / k) for j in range(k)]
        grads = [((j + 1) * B / k, psi / k) for j in range(k)]
    return M.Workload(units, grads, O, activation_bytes=meta.get("activation_bytes"), tokens=meta.get("tokens"),
                      source=path, notes={"model": meta.get("model")})


# ------------------------------------------------------------------ running


def workload(args: argparse.Namespace, hw: hwmod.Hardware, precision: str) -> M.Workload:
    """The workload the flags describe."""
    if args.profile:
        return load_profile(args.profile, args.params)
    tokens = args.seq * args.micro_batch
    if args.model:
        pre = M.GPT_PRESETS[args.model]
        psi = pre.get("params") or M.gpt_params(pre["layers"], pre["d"], seq=args.seq)
        act = M.gpt_activation_bytes(pre["layers"], pre["d"], pre["heads"], args.seq, args.micro_batch)
        return M.analytic_workload(psi, hw, tokens, args.layers or pre["layers"], act, precision)
    return M.analytic_workload(args.params, hw, tokens, args.layers or 32, None, precision)


def predict(w: M.Workload, hw: hwmod.Hardware, worlds: List[int], strategies: List[str],
            gpus_per_node: Optional[int] = None, bucket_mb: float = 25.0, first_bucket_mb: float = 1.0,
            precision: str = "mixed") -> List[Dict[str, Any]]:
    """One row per (strategy, world)."""
    return [M.simulate_step(s, w, n, hw, gpus_per_node, bucket_mb, first_bucket_mb, precision)
            for s in strategies for n in worlds]


def render(rows: List[Dict[str, Any]], title: str = "") -> str:
    """The predicted table (times in ms, sizes in GB per GPU)."""
    body = [(r["strategy"], r["world"], r["step_ms"], r["compute_ms"], r["exposed_comm_ms"],
             r["comm_bytes_per_gpu_per_step"] / GB, r["model_state_bytes_per_gpu"] / GB,
             None if r["activation_bytes_per_gpu"] is None else r["activation_bytes_per_gpu"] / GB,
             r["scaling_efficiency"], r["limited_by"]) for r in rows]
    head = ["strategy", "world", "step_ms", "compute_ms", "exposed_ms", "comm_GB/gpu", "states_GB/gpu",
            "activ_GB/gpu", "scaling_eff", "limited by"]
    fmts = ["{}", "{}", "{:.1f}", "{:.1f}", "{:.1f}", "{:.3f}", "{:.2f}", "{:.2f}", "{:.2f}", "{}"]
    return (f"# {title}\n" if title else "") + table(head, body, fmts)


def plot(rows: List[Dict[str, Any]], path: str, title: str) -> bool:
    """Step time and model-state memory against world size, one line per strategy (matplotlib; False when it
    is not installed)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install 'tinytorch[plot]')")
        return False
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for s in dict.fromkeys(r["strategy"] for r in rows):
        rs = [r for r in rows if r["strategy"] == s]
        a.plot([r["world"] for r in rs], [r["step_ms"] for r in rs], marker="o", label=s)
        b.plot([r["world"] for r in rs], [r["model_state_bytes_per_gpu"] / GB for r in rs], marker="o", label=s)
    for ax, yl in ((a, "predicted step (ms)"), (b, "model states per GPU (GB)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs")
        ax.set_ylabel(yl)
        ax.grid(True, alpha=0.3)
        ax.legend()
    b.set_yscale("log")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")
    return True


def main(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """Predict, print, and write JSON and the plot when asked."""
    hw = hwmod.load(args.hardware, args.collectives)
    precision = args.precision or ("fp32" if args.profile else "mixed")
    w = workload(args, hw, precision)
    worlds = parse_list(args.world, int)
    strategies = parse_list(args.strategy)
    bad = [s for s in strategies if s not in M.STRATEGIES]
    if bad:
        raise SystemExit(f"tinytorch-bench simulate: unknown --strategy {', '.join(bad)}; choose from "
                         f"{', '.join(M.STRATEGIES)}")
    rows = predict(w, hw, worlds, strategies, args.gpus_per_node, args.bucket_mb, args.first_bucket_mb, precision)
    what = args.model or (f"{args.params:.3g} parameters" if args.params else f"profile {args.profile}")
    title = (f"{what} ({w.params / 1e9:.3g}B params), hardware {hw.name}, precision {precision}, "
             f"{w.tokens or '?'} tokens per GPU per step")
    print(render(rows, title))
    if args.json:
        write_json(args.json, {"rows": rows, "hardware": hw.to_json(), "params": w.params, "precision": precision,
                               "workload": what, "tokens_per_gpu": w.tokens})
    if args.plot:
        plot(rows, args.plot, title)
    return rows
