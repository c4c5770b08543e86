"""A PyTorch program in the shape of PyTorch's FSDP + TP (Llama) example, run unchanged by `tinytorch-run --compat`.

A small Llama-style decoder (RMSNorm, SwiGLU, causal attention, rotary embeddings computed in complex64: polar,
view_as_complex, complex multiply, view_as_real, type_as) on a ("dp", "tp") mesh with tp = 2: the example's
tensor/sequence-parallel plan (RowwiseParallel embedding, ColwiseParallel output gathered to Replicate,
SequenceParallel norms, PrepareModuleInput before the first block, the attention and the feed-forward, local head
counts), then FullyShardedDataParallel over the "dp" dim and AdamW(foreach=True). Without a launcher (no RANK in the
environment) it trains the same model in one process on the whole batch: the reference. Rank 0 prints the mean loss
of each step over the whole batch on a line starting with "losses:".
"""
import os
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    hidden: int = 96
    vocab: int = 80
    seq: int = 16
    eps: float = 1e-5


STEPS = 4
ROWS_PER_DP_RANK = 2
TP = 2


def rotary_table(head_dim: int, length: int, base: float = 10000.0) -> torch.Tensor:
    """e^{i t w_k} for positions t and frequencies w_k = base^(-2k / head_dim), complex64 (length, head_dim / 2)."""
    freqs = base ** (-torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(length).float(), freqs)
    return torch.polar(torch.ones_like(angles), angles)


def rotate(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Turn each pair of features of x (batch, seq, heads, head_dim) by its position's angle."""
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    turned = pairs * table.view(1, pairs.shape[1], 1, pairs.shape[-1])
    return torch.view_as_real(turned).flatten(3).type_as(x)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        y = x.float()
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)
        return y.type_as(x) * self.weight


class Attention(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.n_heads = cfg.n_heads  # the TP plan divides it by the tp size: each rank holds its heads
        self.head_dim = cfg.dim // cfg.n_heads
        self.wq = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wo = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x, table):
        b, s, _ = x.shape
        q, k, v = (w(x).view(b, s, self.n_heads, self.head_dim) for w in (self.wq, self.wk, self.wv))
        q, k = rotate(q, table), rotate(k, table)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.wo(out.transpose(1, 2).contiguous().view(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.hidden, bias=False)
        self.w2 = nn.Linear(cfg.hidden, cfg.dim, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.eps)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x, table):
        h = x + self.attention(self.attention_norm(x), table)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.tok_embeddings = nn.Embedding(cfg.vocab, cfg.dim)
        self.layers = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layers)])
        self.norm = RMSNorm(cfg.dim, cfg.eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        self.register_buffer("rotary", rotary_table(cfg.dim // cfg.n_heads, 2 * cfg.seq))

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        table = self.rotary[: tokens.shape[1]]
        for layer in self.layers:
            h = layer(h, table)
        return self.output(self.norm(h)).float()


def parallelize(model: Llama, mesh):
    """The FSDP + TP example's plan: TP (and SP for the norms) on mesh["tp"], then FSDP1 on mesh["dp"]."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)
    tp_mesh, dp_mesh = mesh["tp"], mesh["dp"]
    parallelize_module(model, tp_mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate()),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
        "norm": SequenceParallel(),
        "layers.0": PrepareModuleInput(input_layouts=(Replicate(), None), desired_input_layouts=(Shard(1), None),
                                       use_local_output=True),
    })
    for block in model.layers:
        block.attention.n_heads //= tp_mesh.size()
        parallelize_module(block, tp_mesh, {
            "attention": PrepareModuleInput(input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)),
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "attention_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
            "feed_forward.w3": ColwiseParallel(),
            "ffn_norm": SequenceParallel(),
        })
    return FSDP(model, device_mesh=dp_mesh, use_orig_params=True)


def main():
    cfg = Config()
    distributed = "RANK" in os.environ
    if distributed:
        from torch.distributed.device_mesh import init_device_mesh
        world = int(os.environ["WORLD_SIZE"])
        mesh = init_device_mesh("cpu", (world // TP, TP), mesh_dim_names=("dp", "tp"))
        dp_rank, dp_size = mesh["dp"].get_local_rank(), mesh["dp"].size()
    else:
        dp_rank, dp_size = 0, int(os.environ.get("DP_SIZE", "2"))
    torch.manual_seed(0)  # every rank builds the same full model; TP and FSDP cut their pieces from it
    model = Llama(cfg)
    assert model.rotary.dtype == torch.complex64 and model.rotary.is_complex()
    if distributed:
        model = parallelize(model, mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
    rows = ROWS_PER_DP_RANK if distributed else ROWS_PER_DP_RANK * dp_size
    losses = []
    for _ in range(STEPS):  # one batch, seen every step: the losses must fall
        batch = np.random.default_rng(0).integers(0, cfg.vocab, (ROWS_PER_DP_RANK * dp_size, cfg.seq + 1))
        mine = torch.tensor(batch[dp_rank * rows:(dp_rank + 1) * rows])
        logits = model(mine[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab), mine[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total = loss.detach().clone()
        if distributed:  # the whole batch's mean: average the dp ranks' means (equal row counts)
            dist.all_reduce(total, group=mesh["dp"].get_group())
            total /= dp_size
        losses.append(total.item())
    if not distributed or dist.get_rank() == 0:
        print("losses:", " ".join(f"{v:.7f}" for v in losses), flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
