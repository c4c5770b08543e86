"""Tensor and sequence parallelism through parallelize_module on real processes (ring backend): three AdamW steps
of a small transformer match one process trained on the same global batch, parameter for parameter; plus the
plan/mesh/layout errors PyTorch gives."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from dist_helpers import run_ranks

V, D, H, S, B, LAYERS, STEPS = 16, 8, 2, 6, 4, 2, 3


def _init(rank, world, port, timeout=60):
    import tinytorch.distributed as dist
    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timeout)


def _model(torch):
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.head_dim = D // H
            self.wq, self.wk, self.wv, self.wo = (nn.Linear(D, D) for _ in range(4))

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = (w(x).view(b, s, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(o.transpose(1, 2).reshape(b, s, -1))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1, self.w2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

        def forward(self, x):
            return self.w2(F.gelu(self.w1(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.attn, self.norm2, self.mlp = nn.LayerNorm(D), Attention(), nn.RMSNorm(D), MLP()

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, D)
            self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
            self.norm = nn.LayerNorm(D)
            self.out = nn.Linear(D, V, bias=False)

        def forward(self, ids):
            h = self.tok(ids)
            for layer in self.layers:
                h = layer(h)
            return self.out(self.norm(h))

    torch.manual_seed(0)
    m = Model().double()
    for p in m.parameters():  # non-trivial norm weights, so that their (sequence-parallel) gradients matter
        if p.ndim == 1:
            p.data.add_(torch.randn(p.shape, dtype=torch.float64) * 0.1)
    return m


def _batches():
    g = np.random.default_rng(0)
    return [(g.integers(0, V, (B, S)), g.integers(0, V, (B, S))) for _ in range(STEPS)]


def _plan(torch, sp: bool) -> dict:
    from tinytorch.distributed.tensor import Replicate, Shard
    from tinytorch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                       SequenceParallel)
    if not sp:
        return {"tok": RowwiseParallel(input_layouts=Replicate()),
                "layers.*.attn.w[qkv]": ColwiseParallel(), "layers.*.attn.wo": RowwiseParallel(),
                "layers.*.mlp.w1": ColwiseParallel(), "layers.*.mlp.w2": RowwiseParallel(),
                "out": ColwiseParallel(output_layouts=Replicate())}
    return {"tok": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
            "layers.*.norm1": SequenceParallel(), "layers.*.norm2": SequenceParallel(),
            "layers.*.attn": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "layers.*.mlp": PrepareModuleInput(input_layouts=Shard(1), desired_input_layouts=Replicate()),
            "layers.*.attn.w[qkv]": ColwiseParallel(), "layers.*.attn.wo": RowwiseParallel(output_layouts=Shard(1)),
            "layers.*.mlp.w1": ColwiseParallel(), "layers.*.mlp.w2": RowwiseParallel(output_layouts=Shard(1)),
            "norm": SequenceParallel(),
            "out": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False)}


def _reference():
    import tinytorch as torch
    m = _model(torch)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    losses = []
    for ids, tgt in _batches():
        logits = m(torch.tensor(ids))
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), torch.tensor(tgt).flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return {n: p.detach().numpy() for n, p in m.named_parameters()}, losses


def _tp_worker(rank, world, port, sp, mesh_shape):
    import tinytorch as torch
    import tinytorch.distributed as dist
    import tinytorch.nn.functional as F
    from tinytorch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    from tinytorch.distributed.tensor.parallel import loss_parallel, parallelize_module
    _init(rank, world, port)
    names = ("dp", "tp") if len(mesh_shape) == 2 else ("tp",)
    mesh = dist.init_device_mesh("cpu", mesh_shape, mesh_dim_names=names)
    tp_mesh = mesh["tp"]
    m = parallelize_module(_model(torch), tp_mesh, _plan(torch, sp))
    layouts = {n: tuple(p.placements) for n, p in m.named_parameters() if isinstance(p, DTensor)}
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    losses = []
    for ids, tgt in _batches():
        ids, tgt = torch.tensor(ids), torch.tensor(tgt)
        if len(mesh_shape) == 2:
            # data parallel over "dp": each dp rank takes its half of the batch (an n-d layout of the batch)
            ids = distribute_tensor(ids, mesh["dp", "tp"], [Shard(0), Replicate()]).to_local()
            tgt = distribute_tensor(tgt, mesh, [Shard(0), Replicate()]).to_local()
        logits = m(ids)
        if sp:
            with loss_parallel():
                assert isinstance(logits, DTensor) and logits.placements == (Shard(2),)
                loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten())
                loss.backward()
        else:
            loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten())
            loss.backward()
        if len(mesh_shape) == 2:
            for p in m.parameters():  # average the dp halves' gradients: Partial(avg) -> Replicate on "dp"
                if not isinstance(p, DTensor):
                    dist.all_reduce(p.grad, op=dist.ReduceOp.AVG, group=mesh.get_group("dp"))
                    continue
                g2d = DTensor.from_local(p.grad.to_local(), mesh, [Partial("avg"), p.grad.placements[0]])
                p.grad.to_local().copy_(g2d.redistribute(mesh, [Replicate(), p.grad.placements[0]]).to_local())
            loss = DTensor.from_local(loss.to_local() if isinstance(loss, DTensor) else loss, mesh["dp"],
                                      [Partial("avg")]).full_tensor()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    params = {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().numpy() for n, p in m.named_parameters()}
    dist.destroy_process_group()
    return params, losses, layouts


@pytest.mark.parametrize("sp,mesh_shape", [(False, (2,)), (True, (2,)), (True, (2, 2))],
                         ids=["tp_2ranks", "sp_loss_parallel_2ranks", "dp2_x_tp2_4ranks"])
def test_parallel_training_matches_one_process(sp, mesh_shape):
    world = int(np.prod(mesh_shape))
    res = run_ranks(_tp_worker, world, sp, mesh_shape, timeout=300)
    ref, ref_losses = _reference()
    from tinytorch.distributed.tensor import Replicate, Shard
    for params, losses, layouts in res:
        np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
        assert params.keys() == ref.keys()
        for name, value in ref.items():
            np.testing.assert_allclose(params[name], value, rtol=1e-5, atol=1e-8, err_msg=name)
        assert layouts["layers.0.attn.wq.weight"] == (Shard(0),) and layouts["layers.1.mlp.w2.weight"] == (Shard(1),)
        assert layouts["layers.0.mlp.w2.bias"] == (Replicate(),) and layouts["tok.weight"] == (Shard(0),)
        assert ("layers.1.norm2.weight" in layouts) == sp  # replicated by SequenceParallel, plain without it
        if sp:
            assert layouts["layers.1.norm2.weight"] == (Replicate(),)


def _errors_worker(rank, world, port):
    import tinytorch as torch
    import tinytorch.distributed as dist
    from tinytorch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
    from tinytorch.distributed.tensor.parallel import ColwiseParallel, SequenceParallel, parallelize_module
    _init(rank, world, port)
    mesh = dist.init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    out = {}

    def catch(label, fn):
        try:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                fn()
            out[label] = ("warned", str(w[0].message)) if w else ("ok", None)
        except Exception as e:  # noqa: BLE001 - the message is what the test checks
            out[label] = (type(e).__name__, str(e))

    m = _model(torch)
    catch("missing_module", lambda: parallelize_module(m, mesh, {"layers.*.attention": ColwiseParallel()}))
    out["untouched"] = not any(isinstance(p, DTensor) for p in m.parameters())
    catch("not_linear", lambda: parallelize_module(m, mesh, {"norm": ColwiseParallel()}))
    catch("2d_mesh", lambda: parallelize_module(m, dist.init_device_mesh("cpu", (1, world)), SequenceParallel()))
    x = distribute_tensor(torch.randn(5, 6, dtype=torch.float64), mesh, [Shard(0)])
    catch("view_uneven", lambda: x.view(30))
    out["reshape_uneven"] = (tuple(map(str, x.reshape(30).placements)), tuple(x.reshape(30).shape))
    y = distribute_tensor(torch.randn(4, 6, dtype=torch.float64), mesh, [Shard(1)])
    catch("no_rule", lambda: y.diagonal())
    catch("no_rule_function", lambda: torch.trace(y))
    other = dist.init_device_mesh("cpu", (world,), mesh_dim_names=("other",))
    z = distribute_tensor(torch.randn(4, 6, dtype=torch.float64), other, [Shard(1)])
    catch("two_meshes", lambda: y + z)
    catch("mixed", lambda: y + torch.ones(4, 6, dtype=torch.float64))
    catch("to_partial", lambda: y.redistribute(mesh, [torch.distributed.tensor.Partial()]))
    catch("shape_no_stride", lambda: DTensor.from_local(torch.ones(2, 6), mesh, [Shard(0)], shape=(4, 6)))
    catch("placements_length", lambda: distribute_tensor(torch.ones(4, 6), mesh, [Shard(0), Replicate()]))
    dist.destroy_process_group()
    return out


def test_plan_mesh_and_layout_errors():
    res = run_ranks(_errors_worker, 2, timeout=120)
    for o in res:
        kind, msg = o["missing_module"]
        assert kind == "warned" and "layers.*.attention" in msg and "'attention'" in msg and "skipping" in msg
        assert o["untouched"]
        assert o["not_linear"][0] == "NotImplementedError" and "nn.Linear and nn.Embedding" in o["not_linear"][1]
        assert o["2d_mesh"][0] == "ValueError" and "1-D DeviceMesh" in o["2d_mesh"][1]
        kind, msg = o["view_uneven"]
        assert kind == "RuntimeError" and "dim 0 of size 5 is sharded over 2 ranks" in msg and "redistribute" in msg
        assert o["reshape_uneven"] == (("R",), (30,))  # reshape gathers where view refuses
        for label in ("no_rule", "no_rule_function"):
            kind, msg = o[label]
            assert kind == "NotImplementedError" and "does not have a sharding strategy" in msg, o[label]
            assert "(Shard(dim=1),) (4, 6)" in msg
        assert "aten.diagonal" in o["no_rule"][1] and "aten.trace" in o["no_rule_function"][1]
        assert o["two_meshes"][0] == "RuntimeError" and "cross-mesh" in o["two_meshes"][1]
        assert "mixed torch.Tensor and DTensor" in o["mixed"][1]
        assert "redistributing to Partial is for internal use only" in o["to_partial"][1]
        assert "Please pass both shape and stride" in o["shape_no_stride"][1]
        assert o["placements_length"][0] == "ValueError" and "device_mesh.ndim" in o["placements_length"][1]


def _styles_worker(rank, world, port):
    import tinytorch as torch
    import tinytorch.distributed as dist
    from tinytorch.distributed.tensor import DTensor, Replicate, Shard
    from tinytorch.distributed.tensor.experimental import implicit_replication, local_map
    from tinytorch.distributed.tensor.parallel import PrepareModuleInput, PrepareModuleOutput, parallelize_module
    _init(rank, world, port)
    mesh = dist.init_device_mesh("cpu", (world,))
    seen = {}

    class Masked(torch.nn.Module):
        def forward(self, x, *, mask=None):
            seen["x"], seen["mask"] = (type(x).__name__, tuple(x.shape)), (type(mask).__name__, mask.placements)
            return (x * mask).to_local() * 1.0, x.to_local()

    m = parallelize_module(Masked(), mesh, {
        "": PrepareModuleInput(input_layouts=(Shard(0),), desired_input_layouts=(Replicate(),),
                               input_kwarg_layouts={"mask": Shard(0)}, desired_input_kwarg_layouts={"mask": Replicate()},
                               use_local_output=False)})
    parallelize_module(m, mesh, PrepareModuleOutput(output_layouts=(Replicate(), None),
                                                    desired_output_layouts=(Shard(1), None)))
    local = torch.full((2, 4), float(rank))
    out, passthrough = m(local, mask=torch.ones(2, 4) * (rank + 1))
    # local_map runs a function on local pieces; implicit_replication lets plain tensors meet DTensors
    d = DTensor.from_local(torch.full((2, 3), float(rank)), mesh, [Shard(0)])
    doubled = local_map(lambda t: t * 2, out_placements=[Shard(0)], in_placements=([Shard(0)],))(d)
    with implicit_replication():
        shifted = d + torch.ones(4, 3)
    res = {"seen": seen, "out": out.numpy().tolist(), "passthrough": tuple(passthrough.shape),
           "local_map": (tuple(map(str, doubled.placements)), doubled.full_tensor().numpy().tolist()),
           "implicit": shifted.full_tensor().numpy().tolist()}
    dist.destroy_process_group()
    return res


def test_prepare_module_input_output_kwargs_local_map_and_implicit_replication():
    from tinytorch.distributed.tensor import Replicate
    res = run_ranks(_styles_worker, 2, timeout=120)
    rows = [[0.0] * 4] * 2 + [[2.0] * 4] * 2  # x (rank r's rows r) times mask (rank + 1), gathered
    for rank, o in enumerate(res):
        assert o["seen"]["x"] == ("DTensor", (4, 4)) and o["seen"]["mask"] == ("DTensor", (Replicate(),))
        assert o["out"] == [r[2 * rank:2 * rank + 2] for r in rows]  # Replicate -> Shard(1): this rank's columns
        assert o["passthrough"] == (4, 4)  # a None output layout leaves that output alone
        assert o["local_map"] == (("S(0)",), [[0.0] * 3] * 2 + [[2.0] * 3] * 2)
        assert o["implicit"] == [[1.0] * 3] * 2 + [[2.0] * 3] * 2


def _loss_traffic_worker(rank, world, port):
    import tinytorch as torch
    import tinytorch.distributed as dist
    import tinytorch.nn.functional as F
    from tinytorch.distributed.distributed_c10d import _resolve
    from tinytorch.distributed.tensor import Shard, distribute_tensor
    from tinytorch.distributed.tensor.parallel import loss_parallel
    _init(rank, world, port)
    mesh = dist.init_device_mesh("cpu", (world,))
    rows, vocab = 8, 4096
    logits = distribute_tensor(torch.randn(rows, vocab), mesh, [Shard(1)])
    logits.requires_grad_(True)
    target = torch.randint(0, vocab, (rows,))
    pg = _resolve(None)
    before = pg._bytes_sent()
    with loss_parallel():
        loss = F.cross_entropy(logits, target)
        loss.backward()
    sent = pg._bytes_sent() - before
    dist.destroy_process_group()
    return sent, tuple(logits.grad.placements) == (Shard(1),)


def test_loss_parallel_never_gathers_the_logits():
    """Three all-reduces of one value per row in forward, nothing in backward: far below one logits shard."""
    for sent, grad_sharded in run_ranks(_loss_traffic_worker, 2, timeout=120):
        assert grad_sharded
        assert 0 < sent <= 3 * 8 * 4 * 2, sent  # 3 all-reduces of 8 float32 rows (with headroom), vs 64 KiB a gather
