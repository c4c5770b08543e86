"""A PyTorch program in the shape of PyTorch's pipelining tutorial, run unchanged by torchrun and by
`tinytorch-run --compat`: a ModuleDict transformer split by hand (each rank deletes the layers it does not own),
PipelineStage, ScheduleGPipe, step(x) on rank 0 and step(target=, losses=) on rank 1. Rank 1 prints the mean
microbatch loss of each training step on a line starting with "losses:".
"""
import os
import zlib
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe, SplitPoint, pipeline  # noqa: F401


@dataclass
class ModelArgs:
    dim: int = 32
    n_layers: int = 4
    n_heads: int = 4
    vocab_size: int = 50


class Transformer(nn.Module):
    def __init__(self, model_args: ModelArgs):
        super().__init__()
        self.tok_embeddings = nn.Embedding(model_args.vocab_size, model_args.dim)
        # A ModuleDict keeps the names of the remaining layers when a stage deletes the others.
        self.layers = torch.nn.ModuleDict()
        for layer_id in range(model_args.n_layers):
            self.layers[str(layer_id)] = nn.TransformerDecoderLayer(model_args.dim, model_args.n_heads, dropout=0.0)
        self.norm = nn.LayerNorm(model_args.dim)
        self.output = nn.Linear(model_args.dim, model_args.vocab_size)

    def forward(self, tokens: torch.Tensor):
        # Parts set to None are skipped, which is what lets each stage keep only its share.
        h = self.tok_embeddings(tokens) if self.tok_embeddings else tokens
        for layer in self.layers.values():
            h = layer(h, h)
        h = self.norm(h) if self.norm else h
        output = self.output(h).clone() if self.output else h
        return output


def init_distributed():
    global rank, device, pp_group, stage_index, num_stages
    rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    device = torch.device(f"cuda:{rank}") if torch.cuda.is_available() else torch.device("cpu")
    dist.init_process_group()
    pp_group = dist.new_group()
    stage_index = rank
    num_stages = world_size


def manual_model_split(model) -> PipelineStage:
    half = len(model.layers) // 2
    if stage_index == 0:
        for i in range(half, len(model.layers)):
            del model.layers[str(i)]
        model.norm = None
        model.output = None
    elif stage_index == 1:
        for i in range(half):
            del model.layers[str(i)]
        model.tok_embeddings = None
    return PipelineStage(model, stage_index, num_stages, device, group=pp_group)


def deterministic_init(model):
    """The same weights under any framework: each parameter drawn from a generator seeded by its name."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            rng = np.random.default_rng(zlib.crc32(name.encode()))
            values = rng.standard_normal(tuple(p.shape)) * 0.1 + (1.0 if name.endswith("norm.weight") or
                                                                  ".norm" in name and name.endswith("weight") else 0.0)
            p.copy_(torch.tensor(values, dtype=torch.float32))


if __name__ == "__main__":
    init_distributed()
    num_microbatches = 4
    model_args = ModelArgs()
    model = Transformer(model_args)
    deterministic_init(model)
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.integers(0, model_args.vocab_size, (8, 6)), dtype=torch.long)
    y = torch.tensor(rng.integers(0, model_args.vocab_size, (8, 6)), dtype=torch.long)

    stage = manual_model_split(model)
    model.to(device)
    x = x.to(device)
    y = y.to(device)

    def tokenwise_loss_fn(outputs, targets):
        loss_fn = nn.CrossEntropyLoss()
        outputs = outputs.reshape(-1, model_args.vocab_size)
        targets = targets.reshape(-1)
        return loss_fn(outputs, targets)

    schedule = ScheduleGPipe(stage, n_microbatches=num_microbatches, loss_fn=tokenwise_loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    history = []
    for _ in range(3):
        if rank == 0:
            schedule.step(x)
        elif rank == 1:
            losses = []
            output = schedule.step(target=y, losses=losses)
            assert tuple(output.shape) == (8, 6, model_args.vocab_size)
            history.append(float(sum(losses)) / len(losses))
        optimizer.step()
        optimizer.zero_grad()
    if rank == 1:
        print("losses: " + " ".join(f"{v:.9g}" for v in history), flush=True)
    dist.destroy_process_group()
