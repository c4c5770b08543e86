"""W2 (MLP) and W3 (GPT-mini) training steps, tinytorch beside PyTorch in one run.

Both start from identical weights (tinytorch's initial state copied into PyTorch's model) and see the
same batch; each step is zero_grad, forward, cross-entropy, backward, AdamW step, and the two libraries
take turns step by step. Prints the median step time of each, their ratio, and the losses, which must
agree (1e-4 relative on the first step, within 1% over the run). Writes JSON.

    python benchmarks/train_step.py [--steps 20] [--workloads W2 W3] [--threads N] [--floor] [--json PATH]

--threads 1 gives each library one core, as each rank has under W5's DDP on a 2-core machine. --floor also
times, between the steps, every matrix product of a step alone through tinytorch's product kernel (the GEMM
floor of gemm_floor.py), and prints step / floor: both measured in the same rounds, at the same clock.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemm_floor  # noqa: E402
import models  # noqa: E402
from harness import write_json  # noqa: E402


class Trainer:
    """One backend's model, optimizer and batch for a workload, stepped one step at a time."""

    def __init__(self, torch, workload: str, state=None, device: str = "cpu") -> None:
        torch.manual_seed(0)
        model = (models.mlp if workload == "W2" else models.gpt)(torch)
        if state is None:
            state = {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}
        else:
            model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
        self.torch, self.state = torch, state
        self.model = model.to(device)
        x_np, y_np = models.batch(workload)
        self.x, self.y = torch.from_numpy(x_np).to(device), torch.from_numpy(y_np).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.times, self.losses = [], []

    def step(self) -> None:
        t0 = time.perf_counter()
        self.opt.zero_grad()
        loss = self.torch.nn.functional.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        self.losses.append(loss.item())  # .item() also waits for a GPU to finish the step
        self.times.append(time.perf_counter() - t0)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=2, help="steps left out of the median")
    p.add_argument("--workloads", nargs="+", default=["W2", "W3"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="intra-op threads of both libraries (set_num_threads); default: one per core")
    p.add_argument("--floor", action="store_true", help="time the step's matrix products alone, between steps")
    p.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "train_step.json"))
    args = p.parse_args(argv)

    import tinytorch
    tinytorch.set_num_threads(args.threads)
    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
    from tinytorch import _threads
    results = {"device": args.device, "steps": args.steps, "threads": args.threads, "workloads": {},
               "tinytorch_blas": _threads.blas}
    print(f"tinytorch's matrix products: {_threads.blas}")
    floor_head = f" {'floor ms':>9} {'tt/floor':>9} {'torch/floor':>11}" if args.floor else ""
    print(f"{'workload':10} {'tinytorch ms':>13} {'torch ms':>10} {'ratio':>7} {'loss[0] rel diff':>17} "
          f"{'max loss rel diff':>18}{floor_head}")
    for w in args.workloads:
        mine = Trainer(tinytorch, w, device=args.device)
        theirs = Trainer(torch, w, state=mine.state, device=args.device) if torch is not None else None
        floor = []
        if args.floor:
            mm, ops = gemm_floor.product_fn("tinytorch"), gemm_floor.operands(gemm_floor.products(w), "tinytorch")
        # Alternate the two step by step, so that the machine's load changes hit both alike.
        for _ in range(args.steps):
            mine.step()
            if theirs is not None:
                theirs.step()
            if args.floor:
                t0 = time.perf_counter()
                for a, b in ops:
                    mm(a, b)
                floor.append(time.perf_counter() - t0)
        row = {"tinytorch_ms": 1e3 * statistics.median(mine.times[args.warmup:]), "tinytorch_losses": mine.losses}
        if theirs is not None:
            # Relative difference, floored at 1e-4 absolute: W2 memorises its batch and its loss falls
            # to ~1e-6, where a relative figure would measure float32 rounding, not agreement.
            rel = [abs(a - b) / max(abs(b), 1e-4) for a, b in zip(mine.losses, theirs.losses)]
            row.update(torch_ms=1e3 * statistics.median(theirs.times[args.warmup:]), torch_losses=theirs.losses,
                       first_loss_rel_diff=rel[0], max_loss_rel_diff=max(rel))
            row["ratio"] = row["tinytorch_ms"] / row["torch_ms"]
            line = (f"{w:10} {row['tinytorch_ms']:13.1f} {row['torch_ms']:10.1f} {row['ratio']:7.2f} "
                    f"{rel[0]:17.2e} {max(rel):18.2e}")
        else:
            line = f"{w:10} {row['tinytorch_ms']:13.1f} {'-':>10} {'-':>7}"
        if floor:
            row["floor_ms"] = 1e3 * statistics.median(floor[args.warmup:])
            row["tinytorch_over_floor"] = row["tinytorch_ms"] / row["floor_ms"]
            line += f" {row['floor_ms']:9.1f} {row['tinytorch_over_floor']:9.2f}"
            if theirs is not None:
                row["torch_over_floor"] = row["torch_ms"] / row["floor_ms"]
                line += f" {row['torch_over_floor']:11.2f}"
        print(line, flush=True)
        results["workloads"][w] = row
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
