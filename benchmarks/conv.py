"""Conv2d forward + backward on ResNet-18's layer1/layer2 convolutions (batch 32, 56x56), beside PyTorch's CPU
time with the same thread count when torch is importable; then the stem max-pool, a BatchNorm2d, the global
average pool, two MobileNet-style depthwise convs and two grouped (ResNeXt-style) convs.

Runs are interleaved (ours, PyTorch, ours, ...) so that load from other processes hits both alike; the table
quotes per-layer medians and the median of the per-round ratios.

    PYTHONPATH=python python benchmarks/conv.py [--batch 32] [--rounds 5] [--threads 2]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import write_json  # noqa: E402

# (name, in, out, kernel, stride, padding, input size): the 3x3 64->64 convs of layer1, layer2's first
# (strided) 3x3 conv, its 1x1 downsample, and layer2's 128->128 3x3 conv.
LAYERS = [
    ("layer1.conv3x3 64->64", 64, 64, 3, 1, 1, 56),
    ("layer2.conv3x3 64->128 s2", 64, 128, 3, 2, 1, 56),
    ("layer2.downsample 1x1 s2", 64, 128, 1, 2, 0, 56),
    ("layer2.conv3x3 128->128", 128, 128, 3, 1, 1, 28),
]


# Other ResNet-18 layers, forward + backward: (name, module expression in lib.nn, input shape).
EXTRAS = [
    ("stem MaxPool2d(3, 2, 1)", "MaxPool2d(3, 2, 1)", (32, 64, 112, 112)),
    ("BatchNorm2d(64) train", "BatchNorm2d(64)", (32, 64, 56, 56)),
    ("AdaptiveAvgPool2d(1)", "AdaptiveAvgPool2d(1)", (32, 512, 7, 7)),
    ("depthwise 3x3 96ch 56x56", "Conv2d(96, 96, 3, 1, 1, groups=96)", (32, 96, 56, 56)),
    ("depthwise 3x3 s2 144ch", "Conv2d(144, 144, 3, 2, 1, groups=144)", (32, 144, 56, 56)),
    ("grouped 3x3 2x32ch 56x56", "Conv2d(64, 64, 3, 1, 1, groups=2)", (32, 64, 56, 56)),
    ("grouped 3x3 32x8ch 14x14", "Conv2d(256, 256, 3, 1, 1, groups=32)", (32, 256, 14, 14)),
]


def _step(lib, conv, x):
    """One forward + backward (gradients for the input, weight and bias)."""
    x.grad = None
    conv.weight.grad = None
    conv.bias.grad = None
    conv(x).sum().backward()


def _extra_step(m, x):
    x.grad = None
    m(x).sum().backward()


def _make(lib, spec, batch, seed=0):
    _, cin, cout, k, s, p, hw = spec
    lib.manual_seed(seed)
    conv = lib.nn.Conv2d(cin, cout, k, stride=s, padding=p)
    x = lib.tensor(np.random.default_rng(seed).standard_normal((batch, cin, hw, hw)).astype(np.float32),
                   requires_grad=True)
    return conv, x


def _time(fn) -> float:
    # Let the other library's idle worker threads stop spinning (OpenMP/OpenBLAS busy-wait after a parallel
    # region) so that neither run pays for the other's threads.
    time.sleep(0.3)
    t0 = time.perf_counter()
    fn()
    return 1e3 * (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "conv.json"))
    args = ap.parse_args()
    import tinytorch
    tinytorch.set_num_threads(args.threads)
    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
    rows = []
    for spec in LAYERS:
        ours = _make(tinytorch, spec, args.batch)
        theirs = _make(torch, spec, args.batch) if torch else None
        _step(tinytorch, *ours)  # warm-up
        if theirs:
            _step(torch, *theirs)
        t_ours, t_torch, ratios = [], [], []
        for _ in range(args.rounds):
            a = _time(lambda: _step(tinytorch, *ours))
            t_ours.append(a)
            if theirs:
                b = _time(lambda: _step(torch, *theirs))
                t_torch.append(b)
                ratios.append(a / b)
        row = {"layer": spec[0], "batch": args.batch, "tinytorch_ms": statistics.median(t_ours)}
        if theirs:
            row["torch_ms"] = statistics.median(t_torch)
            row["ratio_median"] = statistics.median(ratios)
        rows.append(row)
        print(f"{spec[0]:28s} tinytorch {row['tinytorch_ms']:8.1f} ms" +
              (f"   torch {row['torch_ms']:8.1f} ms   ratio {row['ratio_median']:.2f}x" if theirs else ""), flush=True)
    extras = []
    for name, expr, shape in EXTRAS:
        arr = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        libs = [tinytorch] + ([torch] if torch else [])
        made = [(eval("lib.nn." + expr, {"lib": lib}), lib.tensor(arr, requires_grad=True))  # noqa: S307
                for lib in libs]
        for m, x in made:
            _extra_step(m, x)
        times = [[] for _ in made]
        for _ in range(args.rounds):
            for t, (m, x) in zip(times, made):
                t.append(_time(lambda: _extra_step(m, x)))
        row = {"layer": name, "tinytorch_ms": statistics.median(times[0])}
        if torch:
            row["torch_ms"] = statistics.median(times[1])
            row["ratio_median"] = statistics.median(a / b for a, b in zip(*times))
        extras.append(row)
        print(f"{name:28s} tinytorch {row['tinytorch_ms']:8.1f} ms" +
              (f"   torch {row['torch_ms']:8.1f} ms   ratio {row['ratio_median']:.2f}x" if torch else ""), flush=True)
    total = {"tinytorch_ms": sum(r["tinytorch_ms"] for r in rows)}
    if torch:
        total["torch_ms"] = sum(r["torch_ms"] for r in rows)
        total["ratio"] = total["tinytorch_ms"] / total["torch_ms"]
        print(f"{'conv total (sum of medians)':28s} tinytorch {total['tinytorch_ms']:8.1f} ms   torch "
              f"{total['torch_ms']:8.1f} ms   ratio {total['ratio']:.2f}x")
    write_json(args.out, {"threads": args.threads, "rounds": args.rounds, "layers": rows, "total": total,
                          "other_layers": extras,
                          "torch": getattr(torch, "__version__", None)})


if __name__ == "__main__":
    main()
