"""Everyday elementwise ops, reductions, norms, casts, scans and gathers on a million float32 elements, tinytorch beside PyTorch,
at each --threads count: the ops real programs call between their matrix products (activations and their
backward, normalisation layers, masked fills, clamps, means, casts for mixed precision, optimizer updates). The
two libraries take turns in blocks of --reps calls, twice each, so both see the same machine (not call by call:
each library's threads poll for work a while after a call, and would hold the second core the other one's call
needs); the regions column counts the parallel regions tinytorch split one call into (0: the op ran on one
thread). Prints a table, writes JSON.

    python benchmarks/ops.py [--threads 1 2] [--reps 40] [--numel 1048576] [--json PATH]
"""
import argparse
import os
import statistics
import time
from typing import Callable, Dict

import numpy as np

from harness import libraries, write_json


def cases(torch, numel: int) -> Dict[str, Callable[[], object]]:
    """name -> one call of the op on (32, 128, numel / 4096)-shaped inputs (images: (16, 64, 32, numel / 32768))."""
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    shape = (32, 128, max(1, numel // 4096))
    a = rng.standard_normal(shape, dtype=np.float32)
    x, g, p, q = (torch.from_numpy(v.copy()) for v in (a, a * 0.5, a, a * 0.25))
    xg = torch.from_numpy(a.copy()).requires_grad_()
    img_shape = (16, 64, 32, max(1, numel // 32768))
    img = torch.from_numpy(rng.standard_normal(img_shape, dtype=np.float32)).requires_grad_()
    gi = torch.ones_like(img)
    mask = torch.triu(torch.ones(shape[1], shape[2], dtype=torch.bool), 1)
    gn, ln = torch.nn.GroupNorm(8, 64), torch.nn.LayerNorm(shape[2])
    parts = [torch.from_numpy(a[..., i::3].copy()) for i in range(3)]
    heads = torch.from_numpy(a.reshape(32, 128, -1, 16).copy()).transpose(1, 2)
    picks = torch.from_numpy(rng.integers(0, shape[2], shape))
    return {
        "add": lambda: x + g,
        "mul by scalar": lambda: g * 0.5,
        "add_ (in place)": lambda: p.add_(q),
        "lerp_ (EMA)": lambda: p.lerp_(q, 0.1),
        "addcmul_": lambda: p.addcmul_(q, q, value=0.01),
        "silu fwd+bwd": lambda: F.silu(xg).backward(g),
        "sigmoid fwd+bwd": lambda: xg.sigmoid().backward(g),
        "tanh fwd+bwd": lambda: xg.tanh().backward(g),
        "gelu fwd+bwd": lambda: F.gelu(xg).backward(g),
        "layer_norm fwd+bwd": lambda: ln(xg).backward(g),
        "group_norm fwd+bwd": lambda: gn(img).backward(gi),
        "masked_fill (T, T) mask": lambda: x.masked_fill(mask, float("-inf")),
        "clamp": lambda: x.clamp(-1, 1),
        "sum": lambda: x.sum(),
        "mean": lambda: x.mean(),
        "mean(-1)": lambda: x.mean(-1),
        "amax(-1)": lambda: x.amax(-1),
        "norm": lambda: x.norm(),
        "cat(dim=-1)": lambda: torch.cat(parts, dim=-1),
        "reshape of heads (copy)": lambda: heads.reshape(32, -1, 128),
        "to(bfloat16)": lambda: x.to(torch.bfloat16),
        "to(float16)": lambda: x.to(torch.float16),
        "cumsum(-1) fwd+bwd": lambda: xg.cumsum(-1).backward(g),
        "gather(-1) fwd+bwd": lambda: xg.gather(-1, picks).backward(g),
    }


def run(threads: int, reps: int, size: int, make=None) -> dict:
    """Median ms per op of each library at `threads` threads (two blocks of reps each, alternating), and
    tinytorch's regions; `make(torch, size)` gives the ops (default: cases)."""
    libs = libraries(threads)
    ops = {name: (make or cases)(lib, size) for name, lib in libs.items()}
    counter = getattr(libs["tinytorch"]._C._cpu, "parallel_regions", lambda: -1)  # -1: a build without it
    rows = {}
    for op in ops["tinytorch"]:
        for fns in ops.values():
            fns[op]()  # warm-up
        before = counter()
        ops["tinytorch"][op]()
        regions = counter() - before
        times = {name: [] for name in ops}
        for _ in range(2):
            for name, fns in ops.items():
                until = time.perf_counter() + 0.01  # 10 ms of calls first: the other library's threads sleep by then
                while time.perf_counter() < until:
                    fns[op]()
                for _ in range(reps):
                    t0 = time.perf_counter()
                    fns[op]()
                    times[name].append(time.perf_counter() - t0)
        rows[op] = {"regions": regions, **{f"{name}_ms": 1e3 * statistics.median(t) for name, t in times.items()}}
    return rows


def table(threads: list, reps: int, size: int, json_path: str, make=None, width: int = 26) -> dict:
    """run() at each thread count: prints the table, writes JSON, returns it."""
    results = {"size": size, "reps": reps, "threads": {}}
    print(f"{'op':{width}} {'threads':>7} {'tinytorch ms':>13} {'torch ms':>9} {'ratio':>6} {'regions':>8}")
    for n in threads:
        rows = run(n, reps, size, make)
        results["threads"][str(n)] = rows
        for op, r in rows.items():
            theirs = r.get("torch_ms")
            cells = f"{theirs:9.3f} {r['tinytorch_ms'] / theirs:6.2f}" if theirs else f"{'-':>9} {'-':>6}"
            print(f"{op:{width}} {n:7d} {r['tinytorch_ms']:13.3f} {cells} {r['regions']:8d}")
    write_json(json_path, results)
    return results


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--reps", type=int, default=40)
    p.add_argument("--numel", type=int, default=1 << 20, help="elements of each operand (a multiple of 32768)")
    p.add_argument("--json", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "ops.json"))
    args = p.parse_args(argv)
    return table(args.threads, args.reps, args.numel, args.json)

if __name__ == "__main__":
    main()
