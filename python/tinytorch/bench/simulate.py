"""`tinytorch-bench simulate`: predicted step time, communication and memory per GPU for DDP and ZeRO-1/2/3 at
world sizes you cannot run, from a parameter count, a GPT preset or a traced one-rank step; and for 3-D
layouts (tensor x pipeline x data parallel, sequence parallelism, activation recomputation) of a GPT preset,
with a search for the fastest layout that fits.

    tinytorch-bench simulate --params 7.5e9 --world 64 --strategy ddp,zero1,zero2,zero3
    tinytorch-bench simulate --model gpt-13b --world 8,64,512,1024 --hardware h100 --json sim.json --plot sim.png
    tinytorch-bench simulate --profile w3_trace.json --hardware this-machine --collectives sweep.json --world 2,4
    tinytorch-bench simulate --model gpt3-175b --world 1024 --tp 8 --pp 16 --sequence-parallel --recompute selective
    tinytorch-bench simulate --model gpt3-175b --world 1024 --hardware a100 --search --top 10

The DDP/ZeRO model (tinytorch/bench/model.py), the 3-D model (layout.py: the Megatron-LM papers' counts) and
the hardware profiles (hardware.py) state their formulas and sources. A `--profile` is a Chrome trace of one
rank's step from `tinytorch-bench train --trace F` (tinytorch.profiler spans plus one `grad_ready` event per
parameter and the step's phases); a plain tinytorch.profiler trace works too, with `--params` and gradients
assumed to arrive evenly through backward. With 3-D flags, `--profile` and `--model` together take the
compute times from the trace and the shapes (communication sizes) from the preset.
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Any, Dict, List, Optional

from . import hardware as hwmod
from . import layout as L
from . import model as M
from ._cli import choice_list, existing_file, list_of, positive_float, positive_int, usage_error
from ._common import table, write_json

GB = 1e9
LAYOUT_FLAGS = ("tp", "pp", "vpp", "schedule", "global_batch", "sequence_parallel", "recompute", "search")


def hardware_spec(text: str) -> str:
    """--hardware: a profile name or a hardware JSON file (checked at the command line)."""
    if text.lower() in hwmod.PROFILES or text.lower() == "this-machine" or os.path.isfile(text):
        return text
    raise argparse.ArgumentTypeError(f"expected {', '.join(hwmod.PROFILES)}, this-machine or a hardware JSON file, "
                                     f"got {text!r}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The simulate subcommand's flags."""
    p.add_argument("--params", type=positive_float,
                   help="parameter count (analytic model: 6 FLOPs per parameter-token)")
    p.add_argument("--model", choices=sorted(M.GPT_PRESETS), help="a GPT size preset (analytic, with activations)")
    p.add_argument("--profile", type=existing_file,
                   help="Chrome trace of a one-rank step (tinytorch-bench train --trace)")
    p.add_argument("--world", type=list_of(positive_int, "positive integers"), default="8,64,512,1024",
                   help="comma-separated world sizes")
    p.add_argument("--gpus-per-node", type=positive_int, default=None, help="default: the hardware profile's")
    p.add_argument("--strategy", type=choice_list(M.STRATEGIES), default=None,
                   help="comma-separated, of ddp,zero1,zero2,zero3 (default all; with 3-D flags: ddp, the "
                        "data-parallel strategy)")
    p.add_argument("--bucket-mb", type=positive_float, default=25.0)
    p.add_argument("--first-bucket-mb", type=positive_float, default=1.0)
    p.add_argument("--hardware", type=hardware_spec, default="h100", help="h100, a100, this-machine, or FILE.json")
    p.add_argument("--collectives", type=existing_file, help="collectives --json file for --hardware this-machine")
    p.add_argument("--precision", choices=sorted(M.PRECISIONS), default=None,
                   help="bytes per parameter: mixed (2/2/12, default for --params/--model) or fp32 (4/4/8, default "
                        "for --profile: tinytorch trains in float32)")
    p.add_argument("--seq", type=positive_int, default=None, help="sequence length (default: the preset's, else 2048)")
    p.add_argument("--micro-batch", type=positive_int, default=None,
                   help="sequences per GPU per step (DDP/ZeRO), or per microbatch (3-D); default 1 (--search: 1-8)")
    p.add_argument("--layers", type=positive_int, default=None,
                   help="units for ZeRO-2/3 overlap (--params; default 32)")
    g = p.add_argument_group("3-D layouts (the Megatron-LM papers' counts; any of these selects the 3-D model)")
    g.add_argument("--tp", type=positive_int, default=None, help="tensor-parallel size t (default 1)")
    g.add_argument("--pp", type=positive_int, default=None, help="pipeline-parallel size p (default 1)")
    g.add_argument("--vpp", type=positive_int, default=None,
                   help="model chunks per pipeline rank v (interleaved schedule; default 1)")
    g.add_argument("--schedule", choices=L.SCHEDULES, default=None,
                   help="pipeline schedule (default 1f1b, interleaved when --vpp > 1)")
    g.add_argument("--global-batch", type=positive_int, default=None,
                   help="sequences per iteration B (default: the preset's, else micro-batch x dp x pp)")
    g.add_argument("--sequence-parallel", action="store_true", default=None,
                   help="shard layer norms and dropout over the tensor-parallel ranks (Korthikanti et al.)")
    g.add_argument("--recompute", choices=M.RECOMPUTE, default=None, help="activation recomputation (default none)")
    g.add_argument("--search", action="store_true", default=None,
                   help="every layout that runs on each --world; the fastest that fit memory first (flags given "
                        "above are kept fixed)")
    g.add_argument("--top", type=positive_int, default=10, help="rows of the --search table per world")
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
                      source=path, notes={"model": meta.get("model"), "op_s": _op_seconds(spans)})


def _op_seconds(spans: List[Dict[str, Any]]) -> Dict[str, float]:
    """Seconds per op over the traced step, forward span and backward node together under the forward op's
    name ('NativeLayerNormBackward0' counts as 'aten::native_layer_norm'): what the 3-D model splits by op."""
    from tinytorch.profiler import _forward_name

    out: Dict[str, float] = {}
    for e in spans:
        if e.get("cat") in ("forward", "backward"):
            name = e["name"] if e["cat"] == "forward" else _forward_name(e["name"])
            out[name] = out.get(name, 0.0) + e["dur"] * 1e-6
    return out


# ------------------------------------------------------------------ running


def workload(args: argparse.Namespace, hw: hwmod.Hardware, precision: str) -> M.Workload:
    """The DDP/ZeRO model's workload the flags describe."""
    if args.profile:
        return _trace(args)
    b = args.micro_batch or 1
    if args.model:
        tr = L.Transformer.preset(args.model, args.seq)
        psi = M.GPT_PRESETS[args.model].get("params") or tr.params
        per_layer = M.activation_bytes_per_layer(tr.seq, b, tr.hidden, tr.heads)
        w = M.analytic_workload(psi, hw, tr.seq * b, args.layers or tr.layers, tr.layers * per_layer, precision)
        w.notes["activation_bytes_per_layer"] = per_layer
        return w
    return M.analytic_workload(args.params, hw, (args.seq or 2048) * b, args.layers or 32, None, precision)


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


def render_layouts(rows: List[Dict[str, Any]], title: str = "") -> str:
    """The 3-D table: layout, microbatches, step, model and hardware FLOPs utilization, bubble, memory and
    traffic per GPU (GB)."""
    body = [(r["layout"], r["strategy"], r["world"], r["microbatches"], r["micro_batch"], r["step_ms"], r["mfu"],
             r["hfu"], r["pipeline_bubble_fraction"], r["activation_bytes_per_gpu"] / GB,
             r["model_state_bytes_per_gpu"] / GB, r["memory_bytes_per_gpu"] / GB,
             r["tp_comm_bytes_per_gpu_per_step"] / GB, r["pp_comm_bytes_per_gpu_per_step"] / GB,
             r["dp_comm_bytes_per_gpu_per_step"] / GB, r["limited_by"])
            for r in rows]
    head = ["layout", "dp_strategy", "world", "m", "b", "step_ms", "mfu", "hfu", "bubble", "activ_GB", "states_GB",
            "mem_GB/gpu", "tp_GB", "pp_GB", "dp_GB", "limited by"]
    fmts = ["{}", "{}", "{}", "{}", "{}", "{:.1f}", "{:.3f}", "{:.3f}", "{:.3f}", "{:.2f}", "{:.2f}", "{:.2f}",
            "{:.2f}", "{:.3f}", "{:.2f}", "{}"]
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
    label = lambda r: r.get("layout", r["strategy"])  # noqa: E731 - one line per strategy or 3-D layout
    for s in dict.fromkeys(label(r) for r in rows):
        rs = [r for r in rows if label(r) == s]
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


def _trace(args: argparse.Namespace) -> M.Workload:
    """The --profile trace, a file that is not one reported as a bad --profile."""
    try:
        return load_profile(args.profile, args.params)
    except (ValueError, KeyError, TypeError, json.JSONDecodeError) as e:
        usage_error(args, f"argument --profile: cannot read {args.profile!r}: {e}")


def _three_d(args: argparse.Namespace) -> bool:
    """True when any 3-D flag is given: the 3-D model (layout.py) answers, not the DDP/ZeRO one."""
    return any(getattr(args, k) is not None for k in LAYOUT_FLAGS)


def _check_sources(args: argparse.Namespace) -> None:
    """--params, --model and --profile: one of them; --profile may come with --params (a plain trace's
    parameter count) or, for 3-D layouts, --model (the shapes)."""
    if not (args.params or args.model or args.profile):
        usage_error(args, "one of the arguments --params --model --profile is required")
    if args.params and args.model:
        usage_error(args, "argument --model: not allowed with argument --params")
    three_d = _three_d(args)
    if three_d and not args.model:
        usage_error(args, "3-D layouts (--tp, --pp, --vpp, --schedule, --global-batch, --sequence-parallel, "
                          "--recompute, --search) need --model: a preset's layers, hidden size and heads")
    if three_d and args.layers:
        usage_error(args, "argument --layers: the DDP/ZeRO model's units; 3-D layouts take the preset's layers")
    if args.hardware.lower() == "this-machine" and not args.collectives:
        usage_error(args, "argument --hardware: this-machine needs --collectives FILE.json (from "
                          "`tinytorch-bench collectives --json FILE.json`)")


def _layouts(args: argparse.Namespace, model: L.Transformer, hw: hwmod.Hardware, precision: str,
             title: str) -> List[Dict[str, Any]]:
    """The 3-D rows: one per (world, strategy), or the --search table per world."""
    measured = _trace(args) if args.profile else None
    strategies = args.strategy or ["ddp"]
    gpn = args.gpus_per_node or hw.gpus_per_node
    rows: List[Dict[str, Any]] = []
    if args.search:
        B = args.global_batch or model.batch
        if not B:
            usage_error(args, f"argument --search: needs --global-batch (the {args.model} preset has none)")
        fixed: Dict[str, Any] = {k: getattr(args, k) for k in ("tp", "pp", "vpp", "schedule", "micro_batch",
                                                               "sequence_parallel", "recompute")
                                 if getattr(args, k) is not None}
        fixed["strategy"] = strategies
        for world in args.world:
            found = L.search(model, world, hw, B, precision, gpn, fixed, measured)
            if not found:
                usage_error(args, f"argument --world: no layout of {args.model} runs on {world} GPUs with global "
                                  f"batch {B} and the flags given")
            fit = [r for r in found if r["fits_memory"] is not False]
            shown = (fit or sorted(found, key=lambda r: r["memory_bytes_per_gpu"]))[:args.top]
            what = f"{len(fit)} of {len(found)} layouts fit" if fit else \
                f"none of {len(found)} layouts fits in {hw.memory_bytes / GB:.0f} GB; the smallest"
            print(render_layouts(shown, f"{title}, {world} GPUs, global batch {B}: {what}, fastest first"))
            rows += shown
        return rows
    tp, pp, vpp = args.tp or 1, args.pp or 1, args.vpp or 1
    b = args.micro_batch or 1
    for world in args.world:
        if world % (tp * pp):
            usage_error(args, f"argument --world: {world} is not a multiple of --tp x --pp = {tp} x {pp}")
        dp = world // (tp * pp)
        for s in strategies:
            lay = L.Layout(tp, pp, dp, vpp, args.schedule or ("interleaved" if vpp > 1 else "1f1b"), b,
                           args.global_batch or model.batch or b * dp * pp, bool(args.sequence_parallel),
                           args.recompute or "none", s)
            try:
                rows.append(L.simulate_layout(model, lay, hw, precision, gpn, measured))
            except ValueError as e:
                usage_error(args, str(e))
    print(render_layouts(rows, title))
    return rows


def main(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """Predict, print, and write JSON and the plot when asked."""
    _check_sources(args)
    try:
        hw = hwmod.load(args.hardware, args.collectives)
    except (ValueError, KeyError, TypeError, json.JSONDecodeError) as e:
        flag, path = ("--collectives", args.collectives) if args.collectives else ("--hardware", args.hardware)
        usage_error(args, f"argument {flag}: cannot read {path!r}: {e}")
    precision = args.precision or ("fp32" if args.profile else "mixed")
    what = args.model or (f"{args.params:.3g} parameters" if args.params else f"profile {args.profile}")
    if _three_d(args):
        model = L.Transformer.preset(args.model, args.seq)
        title = f"{what} ({model.params / 1e9:.4g}B params), hardware {hw.name}, precision {precision}"
        rows = _layouts(args, model, hw, precision, title)
        extra: Dict[str, Any] = {"model": L.to_json(model)}
    else:
        w = workload(args, hw, precision)
        rows = predict(w, hw, args.world, args.strategy or list(M.STRATEGIES), args.gpus_per_node, args.bucket_mb,
                       args.first_bucket_mb, precision)
        title = (f"{what} ({w.params / 1e9:.3g}B params), hardware {hw.name}, precision {precision}, "
                 f"{w.tokens or '?'} tokens per GPU per step")
        print(render(rows, title))
        extra = {"params": w.params, "tokens_per_gpu": w.tokens}
    if args.json:
        write_json(args.json, dict({"rows": rows, "hardware": hw.to_json(), "precision": precision,
                                    "workload": what}, **extra))
    if args.plot:
        plot(rows, args.plot, title)
    return rows
