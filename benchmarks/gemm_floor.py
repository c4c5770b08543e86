"""The matrix-product floor of a W2/W3 training step: every matrix product one step makes (forward and
backward, with the operand layouts the step uses), each timed alone, summed. No implementation that
calls the same BLAS can take a step in less time; set beside a measured step it says how much of that
step is overhead and how much is arithmetic this machine cannot do faster.

    python benchmarks/gemm_floor.py [--threads 1] [--workloads W2 W3] [--reps 7] [--json PATH]

Times tinytorch's matrix-product kernel (the OpenBLAS NumPy loaded, on the intra-op pool: _ops/linalg.py's
_matmul) and, when importable, PyTorch's (torch.matmul on the same shapes), each with --threads threads.
Prints a table (GFLOP per step, floor ms, GFLOP/s) and writes JSON. train_step.py --floor times the same
products between its steps.
"""
import argparse
import os
from typing import List, Tuple

import numpy as np

from harness import median_ms, write_json

# (label, A shape, B shape, transpose A, transpose B): batched shapes have a leading batch dim.
Product = Tuple[str, Tuple[int, ...], Tuple[int, ...], bool, bool]


def _linear(name: str, n: int, i: int, o: int, input_grad: bool) -> List[Product]:
    """y = x W^T; dx = dy W; dW = dy^T x."""
    out = [(f"{name} fwd", (n, i), (o, i), False, True), (f"{name} dW", (n, o), (n, i), True, False)]
    if input_grad:
        out.append((f"{name} dx", (n, o), (o, i), False, False))
    return out


def products(workload: str) -> List[Product]:
    """The matrix products of one training step of W2 (MLP, batch 128) or W3 (GPT-mini, batch 16 x 128)."""
    if workload == "W2":
        n = 128
        return (_linear("fc1", n, 784, 2048, False) + _linear("fc2", n, 2048, 2048, True)
                + _linear("fc3", n, 2048, 10, True))
    B, T, d, h, L, V = 16, 128, 256, 4, 4, 256
    n, bh, hd = B * T, B * h, d // h
    out: List[Product] = []
    for layer in range(L):
        for name, i, o in (("qkv", d, 3 * d), ("proj", d, d), ("fc", d, 4 * d), ("out", 4 * d, d)):
            out += _linear(f"{name}{layer}", n, i, o, True)
        out += [(f"q@k^T {layer}", (bh, T, hd), (bh, T, hd), False, True),
                (f"att@v {layer}", (bh, T, T), (bh, T, hd), False, False),
                (f"d att {layer}", (bh, T, hd), (bh, T, hd), False, True),   # dO @ v^T
                (f"d v {layer}", (bh, T, T), (bh, T, hd), True, False),      # att^T @ dO
                (f"d q {layer}", (bh, T, T), (bh, T, hd), False, False),     # dS @ k
                (f"d k {layer}", (bh, T, T), (bh, T, hd), True, False)]      # dS^T @ q
    return out + _linear("head", n, d, V, True)


def flops(p: Product) -> float:
    _, a, b, ta, tb = p
    m, k = (a[-1], a[-2]) if ta else (a[-2], a[-1])
    ncol = b[-2] if tb else b[-1]
    batch = a[0] if len(a) == 3 else 1
    return 2.0 * batch * m * k * ncol


def operands(ps: List[Product], lib: str) -> list:
    """(a, b) of each product as the step lays them out (transposes are views), as `lib`'s arrays."""
    rng = np.random.default_rng(0)
    out = []
    for _, a_shape, b_shape, ta, tb in ps:
        a = rng.standard_normal(a_shape, dtype=np.float32)
        b = rng.standard_normal(b_shape, dtype=np.float32)
        if lib == "torch":
            import torch
            a, b = torch.from_numpy(a), torch.from_numpy(b)
        out.append((a.swapaxes(-1, -2) if ta else a, b.swapaxes(-1, -2) if tb else b))
    return out


def product_fn(lib: str):
    """a @ b as the library computes it: tinytorch's kernel on NumPy arrays, or torch.matmul."""
    if lib == "torch":
        import torch
        return torch.matmul
    from tinytorch._ops.linalg import _matmul
    return _matmul


def time_products(ps: List[Product], lib: str, reps: int) -> List[float]:
    mm = product_fn(lib)
    return [median_ms(lambda: mm(a, b), reps) for a, b in operands(ps, lib)]


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--workloads", nargs="+", default=["W2", "W3"])
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "gemm_floor.json"))
    args = p.parse_args(argv)
    import tinytorch
    tinytorch.set_num_threads(args.threads)  # NumPy's OpenBLAS threads
    libs = ["tinytorch"]
    try:
        import torch
        torch.set_num_threads(args.threads)
        libs.append("torch")
    except ImportError:
        pass
    from tinytorch import _threads
    results = {"threads": args.threads, "workloads": {}, "tinytorch_blas": _threads.blas}
    print(f"tinytorch's matrix products: {_threads.blas}")
    print(f"{'workload':9} {'GFLOP':>7} " + " ".join(f"{lib + ' floor ms':>17} {'GFLOP/s':>8}" for lib in libs))
    for w in args.workloads:
        ps = products(w)
        gflop = sum(flops(q) for q in ps) / 1e9
        row = {"gflop": gflop, "products": [{"name": q[0], "gflop": flops(q) / 1e9} for q in ps]}
        cells = []
        for lib in libs:
            ms = time_products(ps, lib, args.reps)
            for entry, t in zip(row["products"], ms):
                entry[f"{lib}_ms"] = t
            row[f"{lib}_floor_ms"] = sum(ms)
            cells.append(f"{sum(ms):17.1f} {gflop / sum(ms) * 1e3:8.1f}")
        results["workloads"][w] = row
        print(f"{w:9} {gflop:7.2f} " + " ".join(cells))
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
