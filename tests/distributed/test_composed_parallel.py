"""Parallelisms composed as torchtitan composes them, on real processes over the ring backend: a pipeline whose
stages are each tensor-parallel over their own two ranks (pp2 x tp2, with and without activation checkpointing),
a pipeline whose stages are each sharded by fully_shard over two ranks (pp2 x dp_shard2), and checkpoint_wrapper
on tensor-parallel blocks (AC x TP). Every full parameter after three AdamW steps equals
one process trained on the same global batch (rtol 1e-5), the model and batches of test_tensor_parallel."""
from __future__ import annotations

import numpy as np

from dist_helpers import run_ranks
from test_tensor_parallel import LAYERS, STEPS, _batches, _init, _model, _plan, _reference


def _piece(torch, model, stage: int, num_stages: int):
    """Stage `stage` of `model`: its share of the layers, the embedding on the first stage and the norm and
    output head on the last, under the full model's parameter names (as torchtitan's manual split keeps them)."""
    nn = torch.nn
    ids = [list(c) for c in np.array_split(np.arange(LAYERS), num_stages)][stage]
    first, last = stage == 0, stage == num_stages - 1

    class Piece(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = model.tok if first else None
            self.layers = nn.ModuleDict({str(i): model.layers[i] for i in ids})
            self.norm = model.norm if last else None
            self.out = model.out if last else None

        def forward(self, h):
            h = self.tok(h) if self.tok is not None else h
            for layer in self.layers.values():
                h = layer(h)
            return self.out(self.norm(h)) if self.out is not None else h

    return Piece()


def _tp_plan(torch, piece) -> dict:
    """test_tensor_parallel's plan (no sequence parallelism), restricted to the modules this piece has."""
    return {k: v for k, v in _plan(torch, sp=False).items() if getattr(piece, k.split(".")[0]) is not None}


def _full(module) -> dict:
    """Every full parameter by its name in the unwrapped model."""
    from tinytorch.distributed.tensor import DTensor
    return {n.replace("_checkpoint_wrapped_module.", ""): (p.full_tensor() if isinstance(p, DTensor) else p)
            .detach().numpy().copy() for n, p in module.named_parameters()}


def _checkpoint_blocks(torch, module) -> list:
    """Wrap every transformer block in checkpoint_wrapper; returns a list that grows by one per block forward."""
    from tinytorch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing
    apply_activation_checkpointing(module, check_fn=lambda m: type(m).__name__ == "Block")
    calls = []
    for m in module.modules():
        if type(m).__name__ == "Block":
            m.register_forward_pre_hook(lambda *a: calls.append(1))
    return calls


def _pp_tp(torch, mesh, schedule_name: str, ac: bool):
    """Stage mesh["pp"] rank of the model, tensor-parallel over mesh["tp"] (or, on a ("pp", "dp") mesh, sharded
    by fully_shard over mesh["dp"], each dp rank taking half the batch), trained STEPS AdamW steps."""
    from tinytorch.distributed import pipelining as pp
    from tinytorch.distributed.fsdp import fully_shard
    from tinytorch.distributed.tensor.parallel import parallelize_module
    F = torch.nn.functional
    stage_index = mesh.get_local_rank("pp")
    piece = _piece(torch, _model(torch), stage_index, 2)
    fsdp = "dp" in mesh.mesh_dim_names
    if not fsdp:
        parallelize_module(piece, mesh["tp"], _tp_plan(torch, piece))
    calls = _checkpoint_blocks(torch, piece) if ac else []
    if fsdp:
        for layer in piece.layers.values():
            fully_shard(layer, mesh=mesh["dp"])
        fully_shard(piece, mesh=mesh["dp"])
    stage = pp.PipelineStage(piece, stage_index, 2, "cpu", group=mesh.get_group("pp"))

    def loss_fn(logits, target):
        return F.cross_entropy(logits.flatten(0, 1), target.flatten())

    sched = pp.schedules.get_schedule_class(schedule_name)(stage, n_microbatches=2, loss_fn=loss_fn)
    opt = torch.optim.AdamW(piece.parameters(), lr=1e-2)
    step_losses = []
    for ids, tgt in _batches():
        if fsdp:  # this dp rank's half of the global batch
            half = len(ids) // 2
            ids, tgt = (a[mesh.get_local_rank("dp") * half:][:half] for a in (ids, tgt))
        if stage_index == 0:
            sched.step(torch.tensor(ids))
        else:
            losses = []
            sched.step(target=torch.tensor(tgt), losses=losses)
            step_losses.append(sum(float(l_) for l_ in losses) / len(losses))
        opt.step()
        opt.zero_grad()
    return _full(piece), step_losses, len(calls)


def _tp_ac(torch, mesh):
    """The whole model tensor-parallel over mesh["tp"], its blocks then wrapped by checkpoint_wrapper."""
    from tinytorch.distributed.tensor.parallel import parallelize_module
    F = torch.nn.functional
    model = parallelize_module(_model(torch), mesh["tp"], _plan(torch, sp=False))
    calls = _checkpoint_blocks(torch, model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for ids, tgt in _batches():
        loss = F.cross_entropy(model(torch.tensor(ids)).flatten(0, 1), torch.tensor(tgt).flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    state_keys = sorted(model.state_dict())
    return _full(model), losses, len(calls), state_keys


def _worker(rank, world, port):
    import tinytorch as torch
    import tinytorch.distributed as dist
    _init(rank, world, port, timeout=120)
    mesh = dist.init_device_mesh("cpu", (2, 2), mesh_dim_names=("pp", "tp"))  # stage 0: ranks 0, 1; stage 1: 2, 3
    out = {"pp_tp_1f1b": _pp_tp(torch, mesh, "1F1B", ac=False),
           "pp_tp_ac_gpipe": _pp_tp(torch, mesh, "GPipe", ac=True),
           "tp_ac": _tp_ac(torch, mesh),  # each tp pair trains the whole model on its own
           "pp_fsdp_1f1b": _pp_tp(torch, dist.init_device_mesh("cpu", (2, 2), mesh_dim_names=("pp", "dp")), "1F1B",
                                  ac=False)}
    dist.destroy_process_group()
    return out


def test_pp2_x_tp2_pp2_x_fsdp2_and_ac_x_tp_match_one_process():
    ref, ref_losses = _reference()
    res = run_ranks(_worker, 4, timeout=400)
    for case in ("pp_tp_1f1b", "pp_tp_ac_gpipe", "pp_fsdp_1f1b"):
        merged = {}
        for r in res:
            merged.update(r[case][0])
        assert merged.keys() == ref.keys(), sorted(merged.keys() ^ ref.keys())
        for rank, (params, losses, calls) in enumerate(r[case] for r in res):
            for name, value in params.items():  # both tp ranks of a stage hold the same full parameters
                np.testing.assert_allclose(value, ref[name], rtol=1e-5, atol=1e-8, err_msg=f"{case} rank {rank} {name}")
            if rank >= 2 and case != "pp_fsdp_1f1b":  # the last stage's ranks: the mean over the microbatches
                np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, err_msg=case)
            # one block per stage; with AC each block's forward runs again in backward (2 microbatches a step)
            assert calls == (2 * 2 * STEPS if case == "pp_tp_ac_gpipe" else 0), (case, calls)
    for params, losses, calls, keys in (r["tp_ac"] for r in res):
        assert params.keys() == ref.keys()
        for name, value in ref.items():
            np.testing.assert_allclose(params[name], value, rtol=1e-5, atol=1e-8, err_msg=f"tp_ac {name}")
        np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
        assert calls == 2 * LAYERS * STEPS
        assert not any("_checkpoint_wrapped_module" in k for k in keys)  # PyTorch's state-dict keys


def _adamw_after_a_step(torch):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    opt = torch.optim.AdamW(m.parameters(), lr=0.1)
    m(torch.ones(4, 2)).sum().backward()
    opt.step()
    return m, opt


def test_flattened_optimizer_state_dict_names_every_key_by_parameter_and_loads_back():
    """flatten_optimizer_state_dict=True (what the composed example checkpoints): PyTorch's keys, and
    set_optimizer_state_dict takes the flat form back into a fresh optimizer."""
    import tinytorch as torch
    from tinytorch.distributed.checkpoint.state_dict import (StateDictOptions, get_optimizer_state_dict,
                                                             set_optimizer_state_dict)
    flat = StateDictOptions(flatten_optimizer_state_dict=True)
    m, opt = _adamw_after_a_step(torch)
    sd = get_optimizer_state_dict(m, opt, options=flat)
    assert {k for k in sd if k.startswith("state.")} == {f"state.{n}.{s}" for n in ("0.weight", "0.bias", "1.weight",
                                                                                   "1.bias")
                                                         for s in ("step", "exp_avg", "exp_avg_sq")}
    assert sd["param_groups.1.bias.lr"] == 0.1 and sd["param_groups.0.weight.betas"] == (0.9, 0.999)
    fresh = torch.optim.AdamW(m.parameters(), lr=0.5)
    set_optimizer_state_dict(m, fresh, {k: v.clone() if hasattr(v, "clone") else v for k, v in sd.items()})
    assert fresh.param_groups[0]["lr"] == 0.1
    for p in m.parameters():
        for name, value in opt.state[p].items():
            np.testing.assert_array_equal(fresh.state[p][name].numpy(), value.numpy())
    try:
        import torch as pt
        from torch.distributed.checkpoint.state_dict import StateDictOptions as PtOptions
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict as pt_get
    except ImportError:
        return
    pm, popt = _adamw_after_a_step(pt)
    theirs = pt_get(pm, popt, options=PtOptions(flatten_optimizer_state_dict=True))
    assert {k for k in theirs if k.startswith("state.")} == {k for k in sd if k.startswith("state.")}
    shared = {k for k in sd if k.startswith("param_groups.")} & set(theirs)
    assert {k.rsplit(".", 1)[1] for k in shared} >= {"lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"}
