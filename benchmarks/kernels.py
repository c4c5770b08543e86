"""The fused CPU ops of W3's step, one at a time, tinytorch beside PyTorch: forward and forward+backward of
masked attention softmax, LayerNorm, GELU, embedding and the cross-entropy loss, at W3's shapes (batch 16,
context 128, width 256, 4 heads). Median of --reps calls each, both libraries with --threads threads. Prints a
table, writes JSON.

    python benchmarks/kernels.py [--threads 1] [--reps 30] [--json PATH]
"""
import argparse
import os
from typing import Callable, Dict

import numpy as np

from harness import libraries, median_ms, write_json

B, T, D, H, V = 16, 128, 256, 4, 256


def cases(torch) -> Dict[str, Callable[[], object]]:
    """name -> a call that runs the op (forward, or forward + backward) once on W3-shaped inputs."""
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    scores = torch.from_numpy(rng.standard_normal((B, H, T, T), dtype=np.float32)).requires_grad_()
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    hidden = torch.from_numpy(rng.standard_normal((B, T, D), dtype=np.float32)).requires_grad_()
    wide = torch.from_numpy(rng.standard_normal((B, T, 4 * D), dtype=np.float32)).requires_grad_()
    ln = torch.nn.LayerNorm(D)
    emb = torch.nn.Embedding(V, D)
    idx = torch.from_numpy(rng.integers(0, V, (B, T)))
    logits = torch.from_numpy(rng.standard_normal((B * T, V), dtype=np.float32)).requires_grad_()
    targets = torch.from_numpy(rng.integers(0, V, B * T))
    g_scores, g_hidden, g_wide = torch.ones_like(scores), torch.ones_like(hidden), torch.ones_like(wide)

    def masked_softmax():
        return scores.masked_fill(mask, float("-inf")).softmax(-1)

    return {
        "masked softmax fwd": masked_softmax,
        "masked softmax fwd+bwd": lambda: masked_softmax().backward(g_scores),
        "layer_norm fwd": lambda: ln(hidden),
        "layer_norm fwd+bwd": lambda: ln(hidden).backward(g_hidden),
        "gelu fwd": lambda: F.gelu(wide),
        "gelu fwd+bwd": lambda: F.gelu(wide).backward(g_wide),
        "embedding fwd+bwd": lambda: emb(idx).backward(g_hidden),
        "cross_entropy fwd": lambda: F.cross_entropy(logits, targets),
        "cross_entropy fwd+bwd": lambda: F.cross_entropy(logits, targets).backward(),
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "kernels.json"))
    args = p.parse_args(argv)
    libs = libraries(args.threads)
    times = {name: {k: median_ms(fn, args.reps) for k, fn in cases(lib).items()} for name, lib in libs.items()}
    results = {"threads": args.threads, "reps": args.reps, "ms": times}
    print(f"{'op (W3 shapes)':26} {'tinytorch ms':>13} {'torch ms':>9} {'ratio':>6}")
    for k, mine in times["tinytorch"].items():
        theirs = times.get("torch", {}).get(k)
        cells = f"{theirs:9.3f} {mine / theirs:6.2f}" if theirs else f"{'-':>9} {'-':>6}"
        print(f"{k:26} {mine:13.3f} {cells}")
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
