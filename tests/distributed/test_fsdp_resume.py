"""Resuming fully_shard models the ways PyTorch's FSDP2 users write it (pytorch/examples distributed/FSDP2): the
model is built on the meta device and sharded per block and at the root; a fresh run initializes it
(to_empty + reset_parameters) and saves full model and optimizer state dicts; a resume loads them with
DTensors + load_state_dict(assign=True) (plain, with explicit prefetching and unshard(), with bf16 mixed
precision) or with set_model_state_dict / set_optimizer_state_dict (full_state_dict + broadcast_from_rank0),
twice in a row, and the losses after every resume equal the uninterrupted run's.

Real processes over the ring backend; every program is run as a user writes it, several per spawn to keep the
file quick on two cores."""
import os
import sys
import traceback

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_helpers import run_ranks  # noqa: E402

VOCAB, DIM, SEQ, BATCH = 11, 8, 5, 3  # 11 rows: uneven shards (6 + 5) with padding in the collectives
SAVE_AT, STEPS = 2, 6                   # the fresh run saves after step 2 and goes on to step 6
VARIANTS = ("assign", "prefetch", "bf16", "dcp")


def _model_class(torch):
    nn = torch.nn
    F = nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(DIM)
            self.fc1 = nn.Linear(DIM, 2 * DIM)
            self.fc2 = nn.Linear(2 * DIM, DIM)

        def forward(self, x):
            return x + self.fc2(F.gelu(self.fc1(self.norm(x))))

        def reset_parameters(self):
            self.norm.reset_parameters()
            self.fc1.reset_parameters()
            self.fc2.reset_parameters()

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(VOCAB, DIM)
            self.layers = nn.ModuleList([Block() for _ in range(3)])
            self.norm = nn.LayerNorm(DIM)
            self.output = nn.Linear(DIM, VOCAB, bias=False)

        def forward(self, tokens):
            h = self.tok_embeddings(tokens)
            for layer in self.layers:
                h = layer(h)
            return self.output(self.norm(h)).float()

        def reset_parameters(self):
            self.tok_embeddings.reset_parameters()
            for layer in self.layers:
                layer.reset_parameters()
            self.norm.reset_parameters()
            self.output.reset_parameters()

    return Transformer


def _batch(torch, step, rank):
    rng = np.random.default_rng(1000 * step + rank)
    tokens = rng.integers(0, VOCAB, (BATCH, SEQ + 1))
    return torch.tensor(tokens[:, :-1]), torch.tensor(tokens[:, 1:])


def _program(rank, variant, load_from, save_to, first, steps, materialized=False):
    """One training run as pytorch/examples' FSDP2 example writes it: build on meta, shard, initialize or load a
    checkpoint, build the optimizer (and load its state), train with clip_grad_norm_, save full state dicts."""
    import tinytorch as torch
    import tinytorch.distributed as dist
    from tinytorch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                              get_optimizer_state_dict, set_model_state_dict,
                                                              set_optimizer_state_dict)
    from tinytorch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from tinytorch.distributed.tensor import distribute_tensor
    nn = torch.nn
    with torch.device("meta"):
        model = _model_class(torch)()
    kw = {"mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)} \
        if variant == "bf16" else {}
    for layer in model.layers:
        fully_shard(layer, **kw)
    fully_shard(model, **kw)
    if variant == "prefetch":
        layers = list(model.layers)
        for i, layer in enumerate(layers):
            layer.set_modules_to_forward_prefetch(layers[i + 1:i + 3])
            layer.set_modules_to_backward_prefetch(layers[max(0, i - 2):i][::-1])
    if load_from is None or materialized:
        torch.manual_seed(0)
        model.to_empty(device="cpu")
        model.reset_parameters()
    if load_from is not None:
        full_sd = torch.load(load_from + ".model", mmap=True, weights_only=True, map_location="cpu")
        if variant == "dcp":
            options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True, cpu_offload=materialized)
            set_model_state_dict(model, full_sd if rank == 0 else {}, options=options)
        else:
            meta_sharded_sd = model.state_dict()
            sharded_sd = {}
            for name, full_tensor in full_sd.items():
                meta = meta_sharded_sd.get(name)
                sharded_sd[name] = nn.Parameter(distribute_tensor(full_tensor, meta.device_mesh, meta.placements))
            # assign=True: a meta tensor cannot be copied into
            model.load_state_dict(sharded_sd, strict=False, assign=True)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    if load_from is not None:
        full_osd = torch.load(load_from + ".optim", mmap=True, weights_only=True, map_location="cpu") \
            if rank == 0 else {}
        set_optimizer_state_dict(model, optim, full_osd,
                                 options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    losses = []
    for step in range(first, first + steps):
        if variant == "prefetch":
            model.unshard()
        tokens, targets = _batch(torch, step, rank)
        loss = torch.nn.functional.cross_entropy(model(tokens).view(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optim.step()
        optim.zero_grad()
        losses.append(loss.item())
        if save_to is not None and step + 1 == first + (SAVE_AT if load_from is None else steps):
            options = StateDictOptions(full_state_dict=True, cpu_offload=True)
            msd = get_model_state_dict(model, options=options)
            osd = get_optimizer_state_dict(model, optim, options=options)
            if rank == 0:
                torch.save(msd, save_to + ".model")
                torch.save(osd, save_to + ".optim")
            else:
                assert msd == {} and osd == {}, "cpu_offload: only rank 0 keeps the full state dicts"
            dist.barrier()
    live = [p for p in model.parameters()]
    checks = {"params_are_the_optimizers": [id(p) for p in live] == [id(p) for p in optim.param_groups[0]["params"]],
              "dtypes": sorted({str(p.dtype) for p in live}),
              "sharded": all(type(p).__name__ == "DTensor" for p in live)}
    return losses, checks


def _init(rank, world, port):
    import tinytorch.distributed as dist
    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=60)


def _round_worker(rank, world, port, folder, phase):
    """fresh: the uninterrupted runs (fp32 and bf16), saving after step SAVE_AT; resume1/resume2: every variant
    loads the previous round's checkpoint, runs two steps (resume1 then saves)."""
    import tinytorch.distributed as dist
    _init(rank, world, port)
    out = {}
    if phase == "fresh":
        for name, variant in (("fp32", "assign"), ("bf16", "bf16")):
            out[name] = _program(rank, variant, None, os.path.join(folder, f"{name}-0"), 0, STEPS)
    else:
        first = SAVE_AT if phase == "resume1" else SAVE_AT + 2
        for variant in VARIANTS:
            src = "bf16" if variant == "bf16" else "fp32"
            load_from = os.path.join(folder, f"{src}-0") if phase == "resume1" else os.path.join(folder, f"{variant}-1")
            save_to = os.path.join(folder, f"{variant}-1") if phase == "resume1" else None
            try:
                # The DCP API resumes the second time into a materialized model (copy instead of assign).
                out[variant] = _program(rank, variant, load_from, save_to, first, 2,
                                        materialized=variant == "dcp" and phase == "resume2")
            except Exception:  # noqa: BLE001 - one variant's failure is reported by its own test
                out[variant] = traceback.format_exc()
    dist.destroy_process_group()
    return out


@pytest.fixture(scope="module")
def rounds(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("fsdp_resume"))
    return {phase: run_ranks(_round_worker, 2, folder, phase, timeout=300)
            for phase in ("fresh", "resume1", "resume2")}


@pytest.mark.parametrize("variant", VARIANTS)
def test_resumed_twice_the_losses_equal_the_uninterrupted_run(rounds, variant):
    ref = "bf16" if variant == "bf16" else "fp32"
    for rank in range(2):
        fresh_losses, fresh_checks = rounds["fresh"][rank][ref]
        assert fresh_checks["sharded"] and fresh_checks["params_are_the_optimizers"]
        for phase, first in (("resume1", SAVE_AT), ("resume2", SAVE_AT + 2)):
            got = rounds[phase][rank][variant]
            assert not isinstance(got, str), f"{variant} {phase} rank {rank} failed:\n{got}"
            losses, checks = got
            # Every step is computed as in the uninterrupted run: the same values, up to float summation order.
            np.testing.assert_allclose(losses, fresh_losses[first:first + 2], rtol=1e-5,
                                       err_msg=f"{variant} {phase} rank {rank}")
            assert checks == {"params_are_the_optimizers": True, "dtypes": ["tinytorch.float32"], "sharded": True}
    if variant == "bf16":  # bf16 compute stays within its precision of the fp32 run
        np.testing.assert_allclose(rounds["fresh"][0]["bf16"][0], rounds["fresh"][0]["fp32"][0], rtol=1e-2)
