"""The reference workloads' models (W2 MLP, W3 GPT-mini, GPT size presets), written once against PyTorch's API
and built with whichever module is passed in: tinytorch, or PyTorch for side-by-side runs. W2/W3 follow
../shared/bench/torch_train_step.py (explicit attention with masked_fill + softmax); a block takes its head
count from the width its qkv projection hands it (chunk(3), view(..., -1, head_dim)), the same ops on one rank,
so that the tensor-parallel strategy runs it with half the heads per rank (Megatron-LM's split)."""
import math


def mlp(torch):
    """W2: 784-2048-2048-10 with ReLU."""
    nn = torch.nn
    return nn.Sequential(nn.Linear(784, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))


def gpt(torch, V=256, T=128, d=256, h=4, L=4):
    """W3: GPT-mini, byte vocabulary, context 128, width 256, 4 heads, 4 pre-LayerNorm blocks."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.h = h
            s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            s.qkv, s.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            s.fc, s.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(s, x):
            B, T_, C = x.shape
            hd = C // s.h
            q, k, v = s.qkv(s.ln1(x)).chunk(3, -1)  # each rank's heads under tensor parallelism
            q, k, v = (t.view(B, T_, -1, hd).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
            mask = torch.triu(torch.ones(T_, T_, dtype=torch.bool, device=x.device), 1)
            att = att.masked_fill(mask, float("-inf")).softmax(-1)
            x = x + s.proj((att @ v).transpose(1, 2).reshape(B, T_, -1))
            return x + s.out(F.gelu(s.fc(s.ln2(x))))

    class GPT(nn.Module):
        def __init__(s):
            super().__init__()
            s.tok, s.pos = nn.Embedding(V, d), nn.Embedding(T, d)
            s.blocks = nn.Sequential(*[Block() for _ in range(L)])
            s.ln, s.head = nn.LayerNorm(d), nn.Linear(d, V)

        def forward(s, idx):
            x = s.tok(idx) + s.pos(torch.arange(idx.shape[1], device=idx.device))
            return s.head(s.ln(s.blocks(x))).flatten(0, 1)

    return GPT()


def batch(workload: str, seed: int = 0, B: int = 16, T: int = 128, V: int = 256):
    """NumPy inputs and targets for a workload (identical for every backend); B, T, V for GPT-shaped ones."""
    import numpy as np
    rng = np.random.default_rng(seed)
    if workload == "W2":
        return rng.standard_normal((128, 784), dtype=np.float32), rng.integers(0, 10, 128)
    return rng.integers(0, V, (B, T)), rng.integers(0, V, B * T)


def build(torch, name: str, batch_size=None, seq=None):
    """(model, inputs, targets, tokens per step) of W2, W3 or a GPT preset (gpt-125m ... from
    tinytorch.bench.model.GPT_PRESETS, byte vocabulary unless the preset says otherwise) for one rank."""
    if name == "W2":
        x, y = batch("W2")
        return mlp(torch), x, y, x.shape[0]
    if name == "W3":
        B, T = batch_size or 16, seq or 128
        x, y = batch("W3", B=B, T=T)
        return gpt(torch, T=max(T, 128)), x, y, B * T
    from .model import GPT_PRESETS

    if name not in GPT_PRESETS:
        raise ValueError(f"unknown model {name!r}: use W2, W3 or one of {', '.join(GPT_PRESETS)}")
    pre = GPT_PRESETS[name]
    B, T = batch_size or 1, seq or 1024
    V = pre.get("vocab", 50257)
    x, y = batch("W3", B=B, T=T, V=V)
    return gpt(torch, V=V, T=T, d=pre["d"], h=pre["heads"], L=pre["layers"]), x, y, B * T


def gpt_stage(torch, model, stage: int, num_stages: int):
    """Pipeline stage `stage` of `num_stages` of a gpt() model, split by hand as PyTorch's pipelining tutorial
    splits one: L/num_stages consecutive blocks; the first stage also embeds the tokens, the last also applies the
    final norm and head (flattened logits, as the whole model returns). Shares the model's modules."""
    nn = torch.nn
    per = len(model.blocks) // num_stages

    class Stage(nn.Module):
        def __init__(s):
            super().__init__()
            s.first, s.last = stage == 0, stage == num_stages - 1
            if s.first:
                s.tok, s.pos = model.tok, model.pos
            s.blocks = nn.Sequential(*list(model.blocks)[stage * per:(stage + 1) * per])
            if s.last:
                s.ln, s.head = model.ln, model.head

        def forward(s, x):
            if s.first:
                x = s.tok(x) + s.pos(torch.arange(x.shape[1], device=x.device))
            x = s.blocks(x)
            return s.head(s.ln(x)).flatten(0, 1) if s.last else x

    return Stage()
