"""LSTM forward + backward, tinytorch beside PyTorch: 2 layers, hidden 256, input 256, 64 steps, batch 32,
float32, both libraries with --threads threads. The two libraries' calls alternate (one of each per round)
so that load from other processes on a shared CPU hits both alike; the ratio quoted is the median of the
per-round ratios. Prints a table, writes JSON.

    python benchmarks/lstm.py [--threads 1] [--reps 15] [--json PATH]
"""
import argparse
import os
import statistics
import time

import numpy as np

from harness import libraries, write_json

LAYERS, HIDDEN, INPUT, STEPS, BATCH = 2, 256, 256, 64, 32


def make_step(torch, state: dict):
    """A call that runs one forward + backward of the LSTM on fixed inputs (weights copied from state)."""
    torch.manual_seed(0)
    m = torch.nn.LSTM(INPUT, HIDDEN, num_layers=LAYERS)
    m.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    x = torch.tensor(np.random.default_rng(0).standard_normal((STEPS, BATCH, INPUT), dtype=np.float32))
    x.requires_grad_(True)

    def step():
        for p in m.parameters():
            p.grad = None
        y, (h, c) = m(x)
        (y.sum() + h.sum() + c.sum()).backward()
    return step


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "lstm.json"))
    args = p.parse_args(argv)
    libs = libraries(args.threads)
    tinytorch = libs["tinytorch"]
    ref = tinytorch.nn.LSTM(INPUT, HIDDEN, num_layers=LAYERS)
    state = {k: v.detach().numpy().copy() for k, v in ref.state_dict().items()}
    steps = {name: make_step(lib, state) for name, lib in libs.items()}
    for fn in steps.values():  # warm-up
        fn()
    times = {name: [] for name in steps}
    for _ in range(args.reps):
        for name, fn in steps.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(1e3 * (time.perf_counter() - t0))
    med = {name: statistics.median(t) for name, t in times.items()}
    result = {"shape": dict(layers=LAYERS, hidden=HIDDEN, input=INPUT, steps=STEPS, batch=BATCH, dtype="float32"),
              "threads": args.threads, "reps": args.reps, "median_ms": med}
    print(f"LSTM {LAYERS} layers, hidden {HIDDEN}, input {INPUT}, {STEPS} steps, batch {BATCH}, "
          f"{args.threads} thread(s), median of {args.reps} alternating rounds")
    print(f"{'library':<12}{'fwd+bwd ms':>12}")
    for name, ms in med.items():
        print(f"{name:<12}{ms:>12.2f}")
    if "torch" in times:
        ratios = [a / b for a, b in zip(times["tinytorch"], times["torch"])]
        result["median_ratio_tinytorch_over_torch"] = statistics.median(ratios)
        print(f"median per-round ratio tinytorch / torch: {result['median_ratio_tinytorch_over_torch']:.2f}x")
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
