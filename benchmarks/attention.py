"""scaled_dot_product_attention forward and forward+backward per call, tinytorch beside PyTorch, at nanoGPT's
shape (q, k, v strided head views of c_attn's output, causal, float32) and W3's (batch 16, 4 heads, T 128, head
dim 64: causal, non-causal, a bool mask, float64). The libraries' calls alternate (one of each per round) so
that load from other processes hits both alike. Wall time and the process's CPU time (time.process_time, the
fairer figure on a shared machine at 1 thread) per call, medians; ratios are medians of the per-round ratios.
With --alone each library instead runs all its calls in a row, so that its inputs stay in the cache between
calls, as they are in a model whose q, k, v were just computed (alternating, each call finds them evicted by the
other library's); ratios are then of the medians. Prints a table, writes JSON.

    python benchmarks/attention.py [--threads 1] [--reps 200] [--alone] [--shapes nanoGPT W3] [--json PATH]
"""
import argparse
import os
import statistics
import time
from typing import Callable, Dict, Tuple

import numpy as np

from harness import libraries, write_json


def nanogpt_inputs(torch, rng: np.random.Generator):
    """q, k, v as nanoGPT's CausalSelfAttention makes them: c_attn(x).split(C, dim=2), each
    .view(B, T, H, C // H).transpose(1, 2) (strided views, row stride 3C), and the output's gradient laid out as
    y.transpose(1, 2).contiguous() sends it back."""
    B, T, C, H = 12, 64, 128, 4
    qkv = torch.from_numpy(rng.standard_normal((B, T, 3 * C), dtype=np.float32)).requires_grad_()
    q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in qkv.split(C, dim=2))
    g = torch.from_numpy(rng.standard_normal((B, T, H, C // H), dtype=np.float32)).transpose(1, 2)
    return q, k, v, g, {"is_causal": True}


def w3_inputs(torch, rng: np.random.Generator, dtype=np.float32, mask: str = "causal"):
    """Contiguous (16, 4, 128, 64) q, k, v: causal, no mask, or a bool (T, T) mask broadcast over batch and heads."""
    B, H, T, D = 16, 4, 128, 64
    q, k, v = (torch.from_numpy(rng.standard_normal((B, H, T, D)).astype(dtype)).requires_grad_() for _ in range(3))
    g = torch.from_numpy(rng.standard_normal((B, H, T, D)).astype(dtype))
    if mask == "causal":
        kw = {"is_causal": True}
    elif mask == "bool":
        kw = {"attn_mask": torch.from_numpy(rng.random((T, T)) < 0.8)}
    else:
        kw = {}
    return q, k, v, g, kw


SHAPES = {
    "nanoGPT (12,4,64,32) causal f32": nanogpt_inputs,
    "W3 (16,4,128,64) causal f32": w3_inputs,
    "W3 non-causal f32": lambda torch, rng: w3_inputs(torch, rng, mask="none"),
    "W3 bool mask f32": lambda torch, rng: w3_inputs(torch, rng, mask="bool"),
    "W3 causal f64": lambda torch, rng: w3_inputs(torch, rng, dtype=np.float64),
}


def calls(torch, make) -> Dict[str, Callable[[], object]]:
    """'fwd' and 'fwd+bwd' for one shape; the backward stops at q, k, v (autograd.grad), so that only attention
    is timed."""
    q, k, v, g, kw = make(torch, np.random.default_rng(0))
    F = torch.nn.functional

    def fwd():
        with torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v, **kw)

    def fwd_bwd():
        return torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, **kw), (q, k, v), g)
    return {"fwd": fwd, "fwd+bwd": fwd_bwd}


def timed(fn: Callable[[], object]) -> Tuple[float, float]:
    """(wall ms, process CPU ms) of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return 1e3 * (time.perf_counter() - t0), 1e3 * (time.process_time() - c0)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--alone", action="store_true", help="each library's calls in a row instead of alternating")
    p.add_argument("--shapes", nargs="*", default=list(SHAPES), help="a subset of the shapes, by name prefix")
    p.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "attention.json"))
    args = p.parse_args(argv)
    libs = libraries(args.threads)
    rows = []
    how = "each library's calls in a row" if args.alone else "alternating rounds"
    print(f"scaled_dot_product_attention, {args.threads} thread(s), median of {args.reps} {how}; "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'shape':34} {'pass':8} {'tinytorch ms':>12} {'torch ms':>9} {'ratio':>6} {'cpu ratio':>9}")
    for shape, make in SHAPES.items():
        if not any(shape.startswith(s) for s in args.shapes):
            continue
        fns = {name: calls(lib, make) for name, lib in libs.items()}
        for pass_ in ("fwd", "fwd+bwd"):
            wall = {name: [] for name in fns}
            cpu = {name: [] for name in fns}
            for _ in range(3):  # warm-up
                for f in fns.values():
                    f[pass_]()
            rounds = [[(name, f)] * args.reps for name, f in fns.items()] if args.alone else \
                [list(fns.items())] * args.reps
            for round_ in rounds:
                for name, f in round_:
                    w, c = timed(f[pass_])
                    wall[name].append(w)
                    cpu[name].append(c)
            row = {"shape": shape, "pass": pass_, "median_ms": {n: statistics.median(t) for n, t in wall.items()},
                   "median_cpu_ms": {n: statistics.median(t) for n, t in cpu.items()}}
            cells = f"{'-':>9} {'-':>6} {'-':>9}"
            if "torch" in fns and args.alone:
                row["ratio"] = row["median_ms"]["tinytorch"] / row["median_ms"]["torch"]
                row["cpu_ratio"] = row["median_cpu_ms"]["tinytorch"] / row["median_cpu_ms"]["torch"]
            elif "torch" in fns:
                row["ratio"] = statistics.median(a / b for a, b in zip(wall["tinytorch"], wall["torch"]))
                row["cpu_ratio"] = statistics.median(a / b for a, b in zip(cpu["tinytorch"], cpu["torch"]) if b > 0)
            if "torch" in fns:
                cells = f"{row['median_ms']['torch']:9.3f} {row['ratio']:6.2f} {row['cpu_ratio']:9.2f}"
            print(f"{shape:34} {pass_:8} {row['median_ms']['tinytorch']:12.3f} {cells}")
            rows.append(row)
    result = {"threads": args.threads, "reps": args.reps, "alone": args.alone, "loadavg": os.getloadavg(),
              "rows": rows}
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
