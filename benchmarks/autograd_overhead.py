"""W1: autograd engine overhead per op (forward recording) and per node (backward), one thread.

x = ones(4, requires_grad=True); 20,000 ops alternating y * 1.0001 and y + 0.5; y.sum().backward().
Runs tinytorch and, when importable, PyTorch (one intra-op thread) in the same process; reports the
minimum over runs (these machines are noisy), prints a table and writes JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any

N_OPS = 20_000


def run_once(lib: Any, n_ops: int) -> tuple[float, float]:
    """One W1 run: (seconds of forward, seconds of backward)."""
    x = lib.ones(4, requires_grad=True)
    t0 = time.perf_counter()
    y = x
    for i in range(n_ops):
        y = y * 1.0001 if i % 2 == 0 else y + 0.5
    loss = y.sum()
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    assert x.grad is not None
    del y, loss
    return t1 - t0, t2 - t1


def measure(lib: Any, n_ops: int, runs: int) -> dict:
    """Min-of-runs microseconds per forward op and per backward node (n_ops + the sum node)."""
    run_once(lib, min(n_ops, 1000))  # warm up imports and allocators
    fwd, bwd = [], []
    for _ in range(runs):
        f, b = run_once(lib, n_ops)
        fwd.append(f)
        bwd.append(b)
    nodes = n_ops + 1
    return {
        "fwd_us_per_op": min(fwd) / n_ops * 1e6,
        "bwd_us_per_node": min(bwd) / nodes * 1e6,
        "fwd_us_per_op_median": sorted(fwd)[len(fwd) // 2] / n_ops * 1e6,
        "bwd_us_per_node_median": sorted(bwd)[len(bwd) // 2] / nodes * 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    """Run W1 for tinytorch (and PyTorch when present), print the table, write JSON."""
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=N_OPS)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--json", default=os.path.join(here, "results", "autograd_overhead.json"))
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch comparison")
    args = p.parse_args(argv)

    import tinytorch
    results: dict[str, dict] = {"tinytorch": measure(tinytorch, args.ops, args.runs)}
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            torch.set_num_threads(1)
            results["torch"] = measure(torch, args.ops, args.runs)

    print(f"W1 autograd overhead: {args.ops} ops, min of {args.runs} runs, one thread")
    print(f"{'library':<10} {'fwd us/op':>10} {'bwd us/node':>12} {'total us':>10}")
    for name, r in results.items():
        print(f"{name:<10} {r['fwd_us_per_op']:>10.2f} {r['bwd_us_per_node']:>12.2f} "
              f"{r['fwd_us_per_op'] + r['bwd_us_per_node']:>10.2f}")
    if "torch" in results:
        t, ref = results["tinytorch"], results["torch"]
        results["ratio_tinytorch_over_torch"] = {
            "fwd": t["fwd_us_per_op"] / ref["fwd_us_per_op"],
            "bwd": t["bwd_us_per_node"] / ref["bwd_us_per_node"],
        }
        r = results["ratio_tinytorch_over_torch"]
        print(f"{'ratio':<10} {r['fwd']:>10.2f} {r['bwd']:>12.2f}   (tinytorch / torch; < 1 is faster)")

    payload = {"workload": "W1", "ops": args.ops, "runs": args.runs, "python": sys.version.split()[0],
               "machine": platform.machine(), "results": results}
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(payload, f, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
