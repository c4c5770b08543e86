"""fully_shard on n-d meshes, on 4 real processes (ring backend), with test_tensor_parallel's small transformer:
HSDP on a 2x2 (replicate, shard) mesh and FSDP over tensor- and sequence-parallel parameters (Llama-style, with
loss_parallel) on a 2x2 (dp, tp) mesh each match one process trained on the same global batch (every full
parameter after 3 AdamW steps, rtol 1e-5), with clip_grad_norm_, gradient accumulation (set_requires_gradient_sync,
set_requires_all_reduce), set_reduce_scatter_divide_factor, mixed precision and reshard_after_forward. A
distributed checkpoint saved at dp2 x tp2 resumes at dp4 FSDP, HSDP 2x2, HSDP x TP (1x2x2) and dp2 x tp2 (full
state dicts from rank 0 too) with the losses of the uninterrupted run. And the errors for meshes FSDP cannot use."""
from __future__ import annotations

import contextlib
import copy
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_helpers import run_ranks  # noqa: E402
from test_tensor_parallel import D, V, _init, _model, _plan  # noqa: E402  (a small transformer, its TP plan)

S, B, STEPS, CLIP = 4, 2, 3, 0.5  # B rows per rank; the global batch has 4 * B rows


def _batches(steps=STEPS):
    g = np.random.default_rng(1)
    return [(g.integers(0, V, (4 * B, S)), g.integers(0, V, (4 * B, S))) for _ in range(steps)]


def _forward_backward(torch, model, ids, tgt):
    """Mean cross entropy and its backward; vocabulary-sharded logits (sequence parallelism) under loss_parallel.
    Returns the loss."""
    from tinytorch.distributed.tensor import DTensor
    from tinytorch.distributed.tensor.parallel import loss_parallel
    logits = model(torch.tensor(ids))
    with loss_parallel() if isinstance(logits, DTensor) else contextlib.nullcontext():
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), torch.tensor(tgt).flatten())
        loss.backward()
    return loss.item()


def _train(torch, model, opt, batches, rows, micro):
    """Steps on this rank's rows of each global batch, in `micro` microbatches (all but the last without
    gradient sync, or, micro == "no_all_reduce", without HSDP's all-reduce); returns losses and clipped norms."""
    losses, norms = [], []
    for ids, tgt in batches:
        ids, tgt = ids[rows], tgt[rows]
        halves = [(ids, tgt)] if micro == 1 else [(ids[:len(ids) // 2], tgt[:len(tgt) // 2]),
                                                  (ids[len(ids) // 2:], tgt[len(tgt) // 2:])]
        for k, (i, t) in enumerate(halves):
            last = k == len(halves) - 1
            if micro == "no_sync":
                model.set_requires_gradient_sync(last)
            elif micro == "no_all_reduce":
                model.set_requires_all_reduce(last)
            losses.append(_forward_backward(torch, model, i, t))
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)))
        opt.step()
        opt.zero_grad()
    return losses, norms


def _global(torch, losses):
    """The global batch's losses: every rank's loss is its rows' mean; the mean over all ranks (TP ranks hold the
    same rows and the same loss) is the global mean at every layout."""
    t = torch.tensor(losses, dtype=torch.float64)
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.AVG)
    return t.tolist()


def _full(model):
    from tinytorch.distributed.tensor import DTensor
    return {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().numpy().copy()
            for n, p in model.named_parameters()}


def _micro_order(micro):
    """Rows of the global batch in the order the one-process run takes them: with two microbatches, every
    rank's first half, then every rank's second half."""
    if micro == 1:
        return slice(None)
    return np.concatenate([np.arange(r * B, r * B + B // 2) for r in range(4)] +
                          [np.arange(r * B + B // 2, (r + 1) * B) for r in range(4)])


def _reference(micro):
    import tinytorch as torch
    m = _model(torch)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    # a global microbatch is every rank's half of its rows: the same rows as a half of the global batch
    losses, norms = _train(torch, m, opt, _batches(), _micro_order(micro), 1 if micro == 1 else 2)
    state = {n: {k: v.numpy().copy() for k, v in opt.state[p].items() if k != "step"}
             for n, p in m.named_parameters()}
    return _full(m), norms, state, losses


# ---------------------------------------------------------------------------------------------- HSDP


def _hsdp_worker(rank, world, port):
    _init(rank, world, port)
    import tinytorch as torch
    from tinytorch.distributed.device_mesh import init_device_mesh
    from tinytorch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from tinytorch.distributed.tensor import Replicate, Shard
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))
    out = {}
    for variant, micro, reshard, mp in (("plain", 1, True, None), ("no_sync", "no_sync", False, None),
                                         ("no_all_reduce", "no_all_reduce", True, None), ("divide", 1, True, None),
                                         ("mp", 1, True, MixedPrecisionPolicy(param_dtype=torch.float32,
                                                                             reduce_dtype=torch.float64))):
        m = _model(torch)
        kw = {"mesh": mesh, "reshard_after_forward": reshard}
        if mp is not None:
            kw["mp_policy"] = mp
        for layer in m.layers:
            fully_shard(layer, **kw)
        fully_shard(m, **kw)
        if variant == "divide":  # sums over shard group and replicas, then divides: the mean again
            m.set_reduce_scatter_divide_factor(4.0)
        placements = {tuple(p.placements) for p in m.parameters()}
        assert placements == {(Replicate(), Shard(0))}, placements
        seen = []  # the dtype the block computes in, and the sharded gradients' dtype
        m.layers[0].mlp.w1.register_forward_pre_hook(lambda mod, args: seen.append(str(mod.weight.dtype)))
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        rows = slice(rank * B, (rank + 1) * B)
        losses, norms = _train(torch, m, opt, _batches()[:1], rows, micro)
        sharded_dtype = str(m.layers[0].mlp.w1.weight.dtype)
        more, norms2 = _train(torch, m, opt, _batches()[1:], rows, micro)
        out[variant] = (_full(m), norms + norms2, _global(torch, losses + more), seen[0], sharded_dtype)
    return out


def test_hsdp_2x2_matches_one_process():
    results = run_ranks(_hsdp_worker, 4, timeout=200)
    for variant in ("plain", "no_sync", "no_all_reduce", "divide", "mp"):
        ref_params, ref_norms, _, ref_losses = _reference(2 if variant.startswith("no_") else 1)
        for rank, res in enumerate(results):
            params, norms, losses, compute_dtype, param_dtype = res[variant]
            assert param_dtype == "torch.float64"
            if variant == "mp":  # float32 compute: near-zero gradients (wk's bias) are noise that Adam amplifies,
                assert compute_dtype == "torch.float32"  # so the check is on the losses and norms
                np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, err_msg=f"mp rank {rank}")
                np.testing.assert_allclose(norms, ref_norms, rtol=1e-4, err_msg=f"mp rank {rank}")
                continue
            assert compute_dtype == "torch.float64"
            np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, err_msg=f"{variant} rank {rank}")
            np.testing.assert_allclose(norms, ref_norms, rtol=1e-5, err_msg=f"{variant} rank {rank}")
            assert params.keys() == ref_params.keys()
            for name, want in ref_params.items():
                np.testing.assert_allclose(params[name], want, rtol=1e-5, atol=1e-8,
                                           err_msg=f"{variant} rank {rank}: {name}")


# ---------------------------------------------------------------------------------------------- FSDP x TP


def _sharded(torch, layout, mesh):
    """The test model laid out as `layout` on the 4 ranks; returns (model, rows of the global batch per step)."""
    from tinytorch.distributed.fsdp import fully_shard
    from tinytorch.distributed.tensor.parallel import parallelize_module
    m = _model(torch)
    rank = torch.distributed.get_rank()
    if layout == "dp2xtp2":
        parallelize_module(m, mesh["tp"], _plan(torch, sp=True))
        dp, d = mesh["dp"], mesh["dp"].get_local_rank()
        rows = slice(d * 2 * B, (d + 1) * 2 * B)
    elif layout == "hsdp1x2xtp2":  # HSDP x TP on a 3-d mesh (a replicate dim of 1 rank: 4 processes), no SP:
        parallelize_module(m, mesh["tp"], _plan(torch, sp=False))  # the norms stay plain FSDP parameters
        dp, d = mesh["rep", "shard"], mesh["shard"].get_local_rank()
        rows = slice(d * 2 * B, (d + 1) * 2 * B)
    else:  # "dp4" (a 1-d mesh) or "hsdp2x2"
        dp, rows = mesh, slice(rank * B, (rank + 1) * B)
    for layer in m.layers:
        fully_shard(layer, mesh=dp)
    fully_shard(m, mesh=dp)
    return m, rows


def _fsdp_tp_worker(rank, world, port, ckpt):
    _init(rank, world, port)
    import tinytorch as torch
    import tinytorch.distributed.checkpoint as dcp
    from tinytorch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                             get_optimizer_state_dict, set_model_state_dict,
                                                             set_optimizer_state_dict)
    from tinytorch.distributed.device_mesh import init_device_mesh
    from tinytorch.distributed.tensor import Replicate, Shard
    from tinytorch.distributed.tensor.placement_types import _StridedShard
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    m, rows = _sharded(torch, "dp2xtp2", mesh)
    layout = {n: (p.device_mesh.mesh_dim_names, tuple(p.placements)) for n, p in m.named_parameters()}
    assert layout["layers.0.mlp.w1.weight"] == (("dp", "tp"), (_StridedShard(0, split_factor=2), Shard(0)))
    assert layout["layers.0.mlp.w2.weight"] == (("dp", "tp"), (Shard(0), Shard(1)))
    assert layout["layers.0.mlp.w2.bias"] == (("dp", "tp"), (Shard(0), Replicate()))
    assert layout["layers.0.norm1.weight"] == (("dp", "tp"), (Shard(0), Replicate()))  # SequenceParallel's
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    batches = _batches(STEPS + 2)
    _, norms = _train(torch, m, opt, batches[:STEPS], rows, 1)
    full = _full(m)
    full_osd = get_optimizer_state_dict(m, opt, options=StateDictOptions(full_state_dict=True))
    full_osd = {n: {k: v.numpy().copy() for k, v in st.items() if k != "step"} for n, st in full_osd["state"].items()}
    # a distributed checkpoint after STEPS steps, then two more steps: the losses every layout must continue with
    dcp.save({"model": get_model_state_dict(m), "optim": get_optimizer_state_dict(m, opt)}, checkpoint_id=ckpt)
    full_opts = StateDictOptions(full_state_dict=True)
    # a copy: the optimizer's live step counters are in it, and training goes on below
    full_sd = copy.deepcopy((get_model_state_dict(m, options=full_opts),
                             get_optimizer_state_dict(m, opt, options=full_opts)))
    want = _global(torch, _train(torch, m, opt, batches[STEPS:], rows, 1)[0])
    resumed = {}
    mesh3 = init_device_mesh("cpu", (1, 2, 2), mesh_dim_names=("rep", "shard", "tp"))
    for layout_name, new_mesh in (("dp4", init_device_mesh("cpu", (4,))),
                                  ("hsdp2x2", init_device_mesh("cpu", (2, 2), mesh_dim_names=("rep", "shard"))),
                                  ("hsdp1x2xtp2", mesh3), ("dp2xtp2", mesh), ("full", mesh)):
        m2, rows2 = _sharded(torch, "dp2xtp2" if layout_name == "full" else layout_name, new_mesh)
        opt2 = torch.optim.AdamW(m2.parameters(), lr=1e-2)
        if layout_name == "full":  # full state dicts, from rank 0 only
            set_model_state_dict(m2, full_sd[0] if rank == 0 else {}, options=StateDictOptions(
                full_state_dict=True, broadcast_from_rank0=True))
            set_optimizer_state_dict(m2, opt2, full_sd[1] if rank == 0 else {}, options=StateDictOptions(
                full_state_dict=True, broadcast_from_rank0=True))
        else:
            sd = {"model": get_model_state_dict(m2), "optim": get_optimizer_state_dict(m2, opt2)}
            dcp.load(sd, checkpoint_id=ckpt)
            set_model_state_dict(m2, sd["model"])
            set_optimizer_state_dict(m2, opt2, sd["optim"])
        if layout_name == "hsdp1x2xtp2":
            w1 = m2.layers[0].mlp.w1.weight
            assert w1.device_mesh.mesh_dim_names == ("rep", "shard", "tp")
            assert tuple(w1.placements) == (Replicate(), _StridedShard(0, split_factor=2), Shard(0))
            norm = m2.layers[0].norm1.weight
            assert (norm.device_mesh.mesh_dim_names, tuple(norm.placements)) == (("rep", "shard"),
                                                                                (Replicate(), Shard(0)))
        resumed[layout_name] = _global(torch, _train(torch, m2, opt2, batches[STEPS:], rows2, 1)[0])
    return full, norms, full_osd, want, resumed


def test_fsdp_tp_2x2_matches_one_process_and_resumes_at_other_layouts(tmp_path):
    results = run_ranks(_fsdp_tp_worker, 4, str(tmp_path / "ckpt"), timeout=200)
    ref_params, ref_norms, ref_state, _ = _reference(1)
    for rank, (full, norms, full_osd, want, resumed) in enumerate(results):
        np.testing.assert_allclose(norms, ref_norms, rtol=1e-5, err_msg=f"rank {rank}")
        assert full.keys() == ref_params.keys()
        for name, value in ref_params.items():
            np.testing.assert_allclose(full[name], value, rtol=1e-5, atol=1e-8, err_msg=f"rank {rank}: {name}")
            for k in ("exp_avg", "exp_avg_sq"):
                np.testing.assert_allclose(full_osd[name][k], ref_state[name][k], rtol=1e-5, atol=1e-12,
                                           err_msg=f"rank {rank}: optimizer {k} of {name}")
        for layout, losses in resumed.items():
            np.testing.assert_allclose(losses, want, rtol=1e-7, err_msg=f"rank {rank}: resumed at {layout}")


# ---------------------------------------------------------------------------------------------- errors


def _errors_worker(rank, world, port):
    _init(rank, world, port)
    import tinytorch as torch
    from tinytorch.distributed.device_mesh import init_device_mesh
    from tinytorch.distributed.fsdp import fully_shard
    from tinytorch.distributed.tensor import Shard, distribute_tensor
    from tinytorch.distributed.tensor.parallel import ColwiseParallel, parallelize_module
    errors = {}
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    other = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp2", "tp2"))
    m = _model(torch)
    parallelize_module(m, mesh["tp"], _plan(torch, sp=True))
    for key, fn in (("other_root", lambda: fully_shard(m.layers[0], mesh=other["dp2"])),
                    ("root_dp_mesh", lambda: fully_shard(m.layers[0], mesh=init_device_mesh("cpu", (4,)))),
                    ("3d", lambda: fully_shard(m.layers[1], mesh=init_device_mesh("cpu", (1, 2, 2)))),
                    ("unnamed", lambda: fully_shard(m.layers[1], mesh=init_device_mesh("cpu", (2, 2))))):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - the message is what is tested
            errors[key] = f"{type(e).__name__}: {e}"
    uneven = torch.nn.Linear(D, 6).double()  # TP cuts 6 rows in 2 x 3: FSDP cannot cut 3 rows evenly in 2
    parallelize_module(uneven, mesh["tp"], ColwiseParallel())
    try:
        fully_shard(uneven, mesh=mesh["dp"])
    except Exception as e:  # noqa: BLE001
        errors["uneven"] = f"{type(e).__name__}: {e}"
    # loading a value laid out otherwise than the FSDP x TP shard: a full tensor, or the TP-only DTensor
    sharded, _ = _sharded(torch, "dp2xtp2", mesh)
    key = "layers.0.mlp.w1.weight"
    tp_only = distribute_tensor(torch.zeros(4 * D, D, dtype=torch.float64), mesh["tp"], [Shard(0)])
    for what, value in (("load_full", torch.zeros(4 * D, D, dtype=torch.float64)), ("load_tp_only", tp_only)):
        sd = sharded.state_dict()
        sd[key] = value
        try:
            sharded.load_state_dict(sd)
        except Exception as e:  # noqa: BLE001
            errors[what] = f"{type(e).__name__}: {e}"
    return errors


def test_nd_mesh_errors():
    for errors in run_ranks(_errors_worker, 4, timeout=100):
        assert errors["other_root"].startswith("AssertionError")
        assert "norm1.weight" in errors["other_root"] and "same parent mesh" in errors["other_root"]
        assert "dp2" in errors["other_root"]
        assert "norm1.weight" in errors["root_dp_mesh"] and "same parent mesh" in errors["root_dp_mesh"]
        assert errors["3d"].startswith("ValueError: fully_shard expects a 1D or 2D DeviceMesh")
        assert errors["unnamed"] == "AssertionError: Please init the 2D mesh for HSDP with mesh_dim_names specified"
        assert errors["uneven"].startswith("ValueError") and "weight" in errors["uneven"]
        assert "divisible by 4" in errors["uneven"]
        for what in ("load_full", "load_tp_only"):
            assert errors[what].startswith("RuntimeError: Error loading layers.0.mlp.w1.weight"), errors[what]
            assert "_StridedShard(dim=0, sf=2), Shard(dim=0)" in errors[what], errors[what]
