"""A ResNet basic block (torchvision's BasicBlock: conv3x3-BN-ReLU-conv3x3-BN, identity shortcut, ReLU) forward +
backward, float32, batch 32, 64 channels, 56x56 (ResNet-18's layer1), tinytorch beside PyTorch.

    python benchmarks/basic_block.py [--rounds 7] [--threads 1 2] [--batch 32] [--json PATH]

Both libraries hold the same weights and input. Each round times one step of every configuration in turn:
tinytorch with each convolution instruction set this CPU has (AVX-512, and the AVX2 build forced through
_C._cpu.set_cpu_capability), then PyTorch, so that the machine's load hits all alike; the table gives medians
over the rounds after the first and the ratios of medians. A step is zero grads, forward, sum, backward
(gradients for the input and every parameter).
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import write_json  # noqa: E402


def basic_block(torch, channels: int):
    """torchvision.models.resnet.BasicBlock(channels, channels), written against `torch`'s API."""
    nn = torch.nn

    class BasicBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(channels)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(channels)

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + x)

    return BasicBlock()


class Runner:
    """One library's block, input and step."""

    def __init__(self, torch, x: np.ndarray, state=None) -> None:
        torch.manual_seed(0)
        self.block = basic_block(torch, x.shape[1])
        if state is None:
            state = {k: v.detach().numpy().copy() for k, v in self.block.state_dict().items()}
        else:
            self.block.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
        self.state = state
        self.x = torch.tensor(x, requires_grad=True)

    def step(self) -> float:
        t0 = time.perf_counter()
        self.x.grad = None
        self.block.zero_grad(set_to_none=True)
        self.block(self.x).sum().backward()
        return time.perf_counter() - t0


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "basic_block.json"))
    args = p.parse_args(argv)
    import tinytorch
    from tinytorch._C import _cpu
    try:
        import torch
    except ImportError:
        torch = None
    x = np.random.default_rng(0).standard_normal((args.batch, 64, 56, 56)).astype(np.float32)
    isas = _cpu.cpu_capabilities() or ["default"]
    results = {"batch": args.batch, "rounds": args.rounds, "capabilities": isas, "threads": {}}
    head = " ".join(f"{'tinytorch ' + isa + ' ms':>20}" for isa in isas)
    print(f"{'threads':>7} {head} {'torch ms':>9} " + " ".join(f"{isa + '/torch':>12}" for isa in isas)
          + (f" {'avx2/avx512':>11}" if len(isas) > 1 else ""))
    for threads in args.threads:
        tinytorch.set_num_threads(threads)
        mine = Runner(tinytorch, x)
        theirs = None
        if torch is not None:
            torch.set_num_threads(threads)
            theirs = Runner(torch, x, mine.state)
        times = {isa: [] for isa in isas}
        times["torch"] = []
        before = _cpu.get_cpu_capability()
        for _ in range(args.rounds):
            for isa in isas:
                if isa != "default":
                    _cpu.set_cpu_capability(isa)
                times[isa].append(mine.step())
            _cpu.set_cpu_capability(before)
            if theirs is not None:
                times["torch"].append(theirs.step())
        row = {f"{k}_ms": 1e3 * statistics.median(v[1:]) for k, v in times.items() if v}
        cells = " ".join(f"{row[isa + '_ms']:20.1f}" for isa in isas)
        line = f"{threads:7d} {cells}"
        if theirs is not None:
            for isa in isas:
                row[f"{isa}_over_torch"] = row[f"{isa}_ms"] / row["torch_ms"]
            line += f" {row['torch_ms']:9.1f} " + " ".join(f"{row[isa + '_over_torch']:12.2f}" for isa in isas)
        if len(isas) > 1:
            row["avx2_over_avx512"] = row["avx2_ms"] / row["avx512_ms"]
            line += f" {row['avx2_over_avx512']:11.2f}"
        print(line, flush=True)
        results["threads"][str(threads)] = row
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
