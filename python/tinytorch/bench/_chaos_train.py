"""The job `tinytorch-bench chaos` (and the elastic scale-up test) runs under tinytorch-run: a small fully_shard
MLP in float64 trained on a fixed global batch per step that is split over however many ranks there are, with
a distributed checkpoint every k steps. Each attempt resumes from the newest checkpoint that loads, so a
restart at any world size continues the same run.

    tinytorch-run ... -m tinytorch.bench._chaos_train --run-dir DIR [--steps 30] [--ckpt-every 5] [--step-time 0.05]

Under DIR: ckpt/step_<n>/ (a DCP checkpoint taken after n steps), losses.jsonl (rank 0: one line per step
with its global loss, world size and rendezvous round) and progress/rank<r>.log (every rank: one line per
event, written straight through: what the fault injector watches).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, List, Optional

import numpy as np

DIMS = (32, 64, 64, 64, 8)  # input, hidden..., classes
GLOBAL_BATCH = 16  # divisible by every world size the trials use (1, 2, 4)
LR = 1e-2


def build_model(torch: Any) -> Any:
    """The MLP with deterministic float64 weights (the same on every rank, at every world size)."""
    nn = torch.nn
    layers = []
    for a, b in zip(DIMS[:-1], DIMS[1:]):
        layers += [nn.Linear(a, b), nn.Tanh()]
    model = nn.Sequential(*layers[:-1]).double()
    rng = np.random.default_rng(7)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.3))
    return model


def batch(step: int) -> tuple[np.ndarray, np.ndarray]:
    """Step ``step``'s global batch: its inputs and class labels."""
    rng = np.random.default_rng(1000 + step)
    return rng.standard_normal((GLOBAL_BATCH, DIMS[0])), rng.integers(0, DIMS[-1], GLOBAL_BATCH)


def reference_losses(steps: int) -> List[float]:
    """Every step's loss of the same run in one process on the whole batch (no sharding, no launcher)."""
    import tinytorch as torch

    model = build_model(torch)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    out = []
    for step in range(steps):
        x, y = batch(step)
        loss = torch.nn.functional.cross_entropy(model(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        opt.step()
        opt.zero_grad()
        out.append(float(loss.item()))
    return out


class _Progress:
    """Appends one line per event to progress/rank<r>.log with a single write, so a reader never sees half."""

    def __init__(self, run_dir: str, rank: int, round_: str) -> None:
        os.makedirs(os.path.join(run_dir, "progress"), exist_ok=True)
        self.fd = os.open(os.path.join(run_dir, "progress", f"rank{rank}.log"),
                          os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.round = round_

    def __call__(self, event: str) -> None:
        os.write(self.fd, f"{time.time():.6f} round {self.round} {event}\n".encode())


def _append_line(path: str, obj: dict) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(obj) + "\n").encode())
    finally:
        os.close(fd)


def checkpoints(run_dir: str) -> List[int]:
    """Steps of the checkpoints whose metadata was written (complete saves), newest first."""
    root = os.path.join(run_dir, "ckpt")
    if not os.path.isdir(root):
        return []
    steps = [int(d[5:]) for d in os.listdir(root)
             if d.startswith("step_") and d[5:].isdigit() and os.path.exists(os.path.join(root, d, ".metadata"))]
    return sorted(steps, reverse=True)


def _resume(model: Any, opt: Any, run_dir: str, note: _Progress, rank: int) -> int:
    """Load the newest checkpoint that loads; return the step to continue from (0 when none does)."""
    import tinytorch.distributed.checkpoint as dcp
    from tinytorch.distributed.checkpoint.state_dict import (get_model_state_dict, get_optimizer_state_dict,
                                                              set_model_state_dict, set_optimizer_state_dict)

    for step in checkpoints(run_dir):
        path = os.path.join(run_dir, "ckpt", f"step_{step}")
        sd = {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt), "step": -1}
        try:
            dcp.load(sd, checkpoint_id=path)  # raises on every rank if any rank finds a problem
        except dcp.CheckpointException as e:
            note(f"unusable {step} {json.dumps(str(e))}")
            if rank == 0:
                print(f"checkpoint {path} is unusable, trying the previous one: {e}", file=sys.stderr, flush=True)
            continue
        set_model_state_dict(model, sd["model"])
        set_optimizer_state_dict(model, opt, sd["optim"])
        if sd["step"] != step:
            raise RuntimeError(f"{path} says it was taken after step {sd['step']}, its name says {step}")
        return step
    return 0


def train(run_dir: str, steps: int, ckpt_every: int, timeout: float, step_time: float = 0.0) -> None:
    """One attempt: join the group, resume, train to the end with checkpoints, record every step's loss."""
    import tinytorch as torch
    import tinytorch.distributed as dist
    import tinytorch.distributed.checkpoint as dcp
    from tinytorch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict
    from tinytorch.distributed.fsdp import fully_shard

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    round_ = os.environ.get("TINYTORCH_RDZV_ROUND", os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    note = _Progress(run_dir, rank, round_)
    note(f"start world {world} pid {os.getpid()} restarts {os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}")
    if GLOBAL_BATCH % world:
        raise ValueError(f"the global batch of {GLOBAL_BATCH} rows does not split over {world} ranks")
    dist.init_process_group("ring", init_method="env://", timeout=timeout)
    model = build_model(torch)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    first = _resume(model, opt, run_dir, note, rank)
    note(f"resumed {first}")
    per = GLOBAL_BATCH // world
    for step in range(first, steps):
        began = time.monotonic()
        x, y = batch(step)
        rows = slice(rank * per, (rank + 1) * per)
        loss = torch.nn.functional.cross_entropy(model(torch.tensor(x[rows])), torch.tensor(y[rows]))
        loss.backward()
        opt.step()
        opt.zero_grad()
        total = loss.detach().clone()
        dist.all_reduce(total)  # the global batch's mean loss: every rank's rows count alike
        if rank == 0:
            _append_line(os.path.join(run_dir, "losses.jsonl"),
                         {"step": step, "loss": float(total.item()) / world, "world": world, "round": int(round_)})
        time.sleep(max(0.0, step_time - (time.monotonic() - began)))  # stands for a bigger model's compute
        note(f"step {step}")
        done = step + 1
        if done % ckpt_every == 0 and done < steps:
            note(f"saving {done}")
            sd = {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt), "step": done}
            dcp.save(sd, checkpoint_id=os.path.join(run_dir, "ckpt", f"step_{done}"))
            note(f"saved {done}")
    note("done")
    dist.destroy_process_group()


def main(argv: Optional[List[str]] = None) -> None:
    """Command line of the job (see the module docstring)."""
    p = argparse.ArgumentParser(prog="python -m tinytorch.bench._chaos_train")
    p.add_argument("--run-dir", required=True, help="checkpoints, losses and progress go here")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--ckpt-every", type=int, default=5, help="steps between distributed checkpoints")
    p.add_argument("--timeout", type=float, default=30.0, help="process group timeout (seconds)")
    p.add_argument("--step-time", type=float, default=0.0, help="make each step last at least this long (seconds)")
    a = p.parse_args(argv)
    train(a.run_dir, a.steps, a.ckpt_every, a.timeout, a.step_time)


if __name__ == "__main__":
    from tinytorch.distributed.elastic.multiprocessing.errors import record

    record(main)()
