"""Everyday ops that were pure NumPy chains (found 2-110x PyTorch's time at a million elements): a batched einsum,
interpolate, topk, repeat, logsumexp, softmax along a middle dim, nonzero, the parameterised activations (relu6 too)
and the elementwise losses, pow, edge padding, cumsum, gather, row-indexed reads and embedding's backward: tinytorch
beside PyTorch at each --threads count, timed as benchmarks/ops.py times its table (the libraries take turns in blocks of
--reps calls after 10 ms of warm-up; regions: the pool regions one tinytorch call split into). Prints a table,
writes JSON.

    python benchmarks/everyday_ops.py [--threads 1 2] [--reps 20] [--batch 64] [--json PATH]
"""
import argparse
import os
from typing import Callable, Dict

import numpy as np

from ops import table


def cases(torch, batch: int) -> Dict[str, Callable[[], object]]:
    """name -> one call of the op on (batch, 256, 64)-shaped inputs (images: (batch / 4, 32, 32, 32))."""
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    a = rng.standard_normal((batch, 256, 64), dtype=np.float32)
    x = torch.from_numpy(a)
    y = torch.from_numpy(rng.standard_normal((batch, 64, 256), dtype=np.float32))
    xg = torch.from_numpy(a.copy()).requires_grad_()
    g = torch.from_numpy(a * 0.5)
    img = torch.from_numpy(rng.standard_normal((max(1, batch // 4), 32, 32, 32), dtype=np.float32)).requires_grad_()
    up = torch.ones(img.shape[:2] + (64, 64))
    mask = torch.from_numpy(a > 0.5)
    t01 = torch.from_numpy(rng.random((batch, 256, 64), dtype=np.float32))
    picks = torch.from_numpy(rng.integers(0, 64, (batch, 256, 64)))
    rows = torch.from_numpy(rng.integers(0, batch * 256, batch * 64))
    flat = torch.from_numpy(a.reshape(-1, 64).copy()).requires_grad_()
    emb = torch.nn.Embedding(65, 128)
    tokens = torch.from_numpy(rng.integers(0, 65, (12, 64)))
    return {
        "einsum bij,bjk->bik": lambda: torch.einsum("bij,bjk->bik", x, y),
        "interpolate bilinear x2 fwd+bwd": lambda: F.interpolate(img, scale_factor=2, mode="bilinear").backward(up),
        "interpolate nearest x2 fwd+bwd": lambda: F.interpolate(img, scale_factor=2, mode="nearest").backward(up),
        "topk(10, -1)": lambda: x.topk(10, -1),
        "x[:8].repeat(2, 2, 2)": lambda: x[:8].repeat(2, 2, 2),
        "logsumexp(-1)": lambda: x.logsumexp(-1),
        "softmax(1) fwd+bwd": lambda: xg.softmax(1).backward(g),
        "nonzero (bool mask)": lambda: mask.nonzero(),
        "leaky_relu fwd+bwd": lambda: F.leaky_relu(xg, 0.1).backward(g),
        "elu fwd+bwd": lambda: F.elu(xg).backward(g),
        "softplus fwd+bwd": lambda: F.softplus(xg).backward(g),
        "logsigmoid fwd+bwd": lambda: F.logsigmoid(xg).backward(g),
        "relu6 fwd+bwd": lambda: F.relu6(xg).backward(g),
        "bce_with_logits fwd+bwd": lambda: F.binary_cross_entropy_with_logits(xg, t01).backward(),
        "smooth_l1_loss fwd+bwd": lambda: F.smooth_l1_loss(xg, t01).backward(),
        "mse_loss fwd+bwd": lambda: F.mse_loss(xg, t01).backward(),
        "pow(3)": lambda: x.pow(3),
        "pad reflect fwd+bwd": lambda: F.pad(img, (1, 1, 1, 1), mode="reflect").sum().backward(),
        "cumsum(-1) fwd+bwd": lambda: xg.cumsum(-1).backward(g),
        "gather(-1) fwd+bwd": lambda: xg.gather(-1, picks).backward(g),
        "x[rows] fwd+bwd": lambda: flat[rows].sum().backward(),
        "embedding sum().backward()": lambda: emb(tokens).sum().backward(),
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--batch", type=int, default=64, help="leading dim of the (batch, 256, 64) operands")
    p.add_argument("--json", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                  "everyday_ops.json"))
    args = p.parse_args(argv)
    return table(args.threads, args.reps, args.batch, args.json, cases, width=34)


if __name__ == "__main__":
    main()
