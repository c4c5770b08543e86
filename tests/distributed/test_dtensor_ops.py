"""DTensor sharding rules against one process: every op below runs on DTensors laid out in several ways on real
processes (ring backend), and its output (full_tensor) and input gradients must equal the single-process op's
on the whole tensors, in float64."""
from __future__ import annotations

import numpy as np
import pytest

from dist_helpers import run_ranks


def _init(rank, world, port, timeout=60):
    import tinytorch.distributed as dist
    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timeout)


def _cases(torch):
    """name -> (fn, [(input shape or ('int', high, shape)), ...], [placements per input on a 1-d mesh])."""
    import tinytorch.nn.functional as F
    from tinytorch.distributed.tensor import Replicate as R, Shard as S
    ids = ("int", 10, (3, 4))
    return {
        "add_broadcast": (lambda x, b: x * 2 + b, [(4, 6), (6,)], [[S(0), R()], [S(1), R()], [R(), S(0)]]),
        "mul_div_unary": (lambda x, y: (x * y / (y.abs() + 1)).tanh().exp(), [(4, 6), (4, 6)],
                          [[S(0), S(0)], [S(1), R()], [R(), S(1)]]),
        "linear_colwise": (lambda x, w, b: F.linear(x, w, b), [(3, 4, 6), (8, 6), (8,)],
                           [[R(), S(0), S(0)], [S(0), R(), R()], [S(1), R(), R()]]),
        "linear_rowwise": (lambda x, w, b: F.linear(x, w, b), [(3, 4, 6), (5, 6), (5,)],
                           [[S(2), S(1), R()], [S(-1), R(), R()]]),
        "matmul_batched": (lambda a, b: a @ b, [(2, 3, 4, 6), (2, 3, 6, 5)],
                           [[S(1), S(1)], [S(2), R()], [R(), S(3)], [S(3), S(2)], [S(0), R()]]),
        "bmm_mm": (lambda a, b: torch.bmm(a, b).sum(0) + torch.mm(a[0], b[1]), [(4, 3, 6), (4, 6, 5)],
                   [[S(0), S(0)], [S(2), S(1)]]),
        "embedding": (lambda i, w: F.embedding(i, w) * 3, [ids, (10, 6)], [[R(), S(0)], [R(), S(1)], [S(0), R()]]),
        "layer_norm": (lambda x, w, b: F.layer_norm(x, (6,), w, b), [(3, 4, 6), (6,), (6,)],
                       [[S(1), R(), R()], [S(0), R(), R()], [S(2), R(), R()]]),
        "rms_norm": (lambda x, w: F.rms_norm(x, (6,), w, 1e-5), [(3, 4, 6), (6,)], [[S(1), R()], [S(2), R()]]),
        "softmax": (lambda x: F.softmax(x, -1) + F.log_softmax(x, 1), [(3, 4, 6)], [[S(0)], [S(1)], [S(2)]]),
        "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), [(2, 4, 5, 3)] * 3,
                 [[S(1), S(1), S(1)], [S(0), S(0), S(0)], [S(2), R(), R()]]),
        "sdpa_rows": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), [(2, 4, 5, 3)] * 3,
                      [[S(2), R(), R()]]),
        "views": (lambda x: x.view(3, 4, 2, 3).transpose(1, 2).reshape(3, 2, 12).permute(2, 0, 1).flatten(1),
                  [(3, 4, 6)], [[S(0)], [S(1)], [S(2)]]),
        "unsqueeze_expand": (lambda x: x.unsqueeze(0).expand(2, 4, 6).squeeze(0) * x, [(4, 6)], [[S(0)], [S(1)]]),
        "cat_stack_split": (lambda x, y: torch.cat([x, y], 1).split(6, 1)[1] + torch.stack([x, y], 0).sum(0),
                            [(4, 6), (4, 6)], [[S(0), S(0)], [S(1), S(1)], [R(), S(0)]]),
        "getitem": (lambda x: x[1:, None, ..., 2:5] * x[0, 2:5], [(4, 6)], [[S(0)], [S(1)]]),
        "reductions": (lambda x: x.sum(1) + x.mean(0, keepdim=True).sum() + x.amax(1) + x.norm() + x.var(0).sum(),
                       [(4, 6)], [[S(0)], [S(1)]]),
        "mean_uneven": (lambda x: x.mean() + x.mean(1).sum(), [(5, 3)], [[S(0)], [S(1)]]),
        "gelu_silu_dropout0": (lambda x: F.dropout(F.gelu(x) * F.silu(x), 0.0), [(4, 6)], [[S(1)]]),
        "rotary_complex": (_rotary_complex(torch), [(2, 4, 3, 4), (4, 2)],
                           [[S(2), R()], [S(1), S(0)], [S(3), R()], [S(0), S(1)]]),
        "cross_entropy_replicated": (lambda x, t: F.cross_entropy(x, t), [(6, 5), ("int", 5, (6,))],
                                     [[S(0), S(0)], [S(1), R()]]),
    }


def _rotary_complex(torch):
    """Rotary embeddings in complex numbers (view_as_complex, polar, complex multiply, view_as_real) and the
    complex parts (conj, real, imag, angle, abs) on sharded inputs."""
    def fn(x, f):
        w = torch.view_as_complex(x.reshape(2, 4, 3, 2, 2)) * torch.polar(f.abs() + 0.5, f).view(1, 4, 1, 2)
        parts = w.conj().imag + w.real * w.angle() + w.abs()
        return torch.view_as_real(w).flatten(3) + parts.sum(-1, keepdim=True)
    return fn


def _loss_parallel_cases(torch):
    import tinytorch.nn.functional as F
    from tinytorch.distributed.tensor import Replicate as R, Shard as S
    t = ("int", 7, (6,))
    t3 = ("int", 7, (2, 3))
    return {
        "ce_mean": (lambda x, t: F.cross_entropy(x, t), [(6, 7), t], [[S(1), R()]]),
        "ce_sum_weight": (lambda x, t, w: F.cross_entropy(x, t, w, reduction="sum"), [(6, 7), t, (7,)],
                          [[S(1), R(), R()]]),
        "ce_none_3d_ignore": (lambda x, t: F.cross_entropy(x, t, reduction="none", ignore_index=2),
                              [(2, 7, 3), t3], [[S(1), R()]]),
        "log_softmax_nll": (lambda x, t: F.nll_loss(F.log_softmax(x, 1), t), [(6, 7), t], [[S(1), R()]]),
    }


def _inputs(torch, specs, seed):
    g = np.random.default_rng(seed)
    out = []
    for s in specs:
        if s[0] == "int":
            out.append(torch.tensor(g.integers(0, s[1], s[2])))
        else:
            out.append(torch.tensor(g.standard_normal(s)))
    return out


def _reference(name, fn_of, seed, loss_parallel=False):
    import tinytorch as torch
    fn, specs, _ = fn_of(torch)[name]
    xs = _inputs(torch, specs, seed)
    for x in xs:
        if x.dtype.is_floating_point:
            x.requires_grad_(True)
    out = fn(*xs)
    gout = torch.tensor(np.random.default_rng(seed + 1).standard_normal(tuple(out.shape)))
    (out * gout).sum().backward()
    return out.detach().numpy(), [x.grad.numpy() if x.grad is not None else None for x in xs]


def _ops_worker(rank, world, port, which, mesh_shape):
    import tinytorch as torch
    import tinytorch.distributed as dist
    from tinytorch.distributed.tensor import Replicate, distribute_tensor
    from tinytorch.distributed.tensor.parallel import loss_parallel
    _init(rank, world, port)
    mesh = dist.init_device_mesh("cpu", mesh_shape, mesh_dim_names=("dp", "tp")[-len(mesh_shape):])
    cases = (_cases if which == "ops" else _loss_parallel_cases)(torch)
    results = {}
    for seed, (name, (fn, specs, layouts)) in enumerate(sorted(cases.items())):
        for li, layout in enumerate(layouts):
            xs = _inputs(torch, specs, seed)
            dts = []
            for x, p in zip(xs, layout):
                # on a 2-d mesh the batch-like dim 0 is sharded over "dp" too unless the case shards dim 0 on "tp"
                pl = [p] if len(mesh_shape) == 1 else [Replicate() if p.is_shard(0) else _dp(x), p]
                d = distribute_tensor(x, mesh, pl)
                if x.dtype.is_floating_point:
                    d.requires_grad_(True)
                dts.append(d)
            if which == "loss":
                with loss_parallel():
                    out = fn(*dts)
                    full = out.full_tensor()
                    gout = torch.tensor(np.random.default_rng(seed + 1).standard_normal(tuple(full.shape)))
                    (full * gout).sum().backward()
            else:
                out = fn(*dts)
                full = out.full_tensor()
                gout = torch.tensor(np.random.default_rng(seed + 1).standard_normal(tuple(full.shape)))
                (full * gout).sum().backward()
            results[(name, li)] = (full.detach().numpy(), [d.grad.full_tensor().numpy() if d.grad is not None
                                                           else None for d in dts],
                                   [tuple(map(str, d.grad.placements)) == tuple(map(str, d.placements))
                                    for d in dts if d.grad is not None])
    dist.destroy_process_group()
    return results


def _dp(x):
    from tinytorch.distributed.tensor import Replicate, Shard
    return Shard(0) if x.ndim and x.shape[0] % 2 == 0 else Replicate()


def _check(results, fn_of, loss_parallel=False):
    import tinytorch as torch
    cases = fn_of(torch)
    for seed, name in enumerate(sorted(cases)):
        ref_out, ref_grads = _reference(name, fn_of, seed)
        for li in range(len(cases[name][2])):
            for res in results:
                out, grads, same_layout = res[(name, li)]
                np.testing.assert_allclose(out, ref_out, rtol=1e-10, atol=1e-12, err_msg=f"{name} layout {li}")
                for g, rg in zip(grads, ref_grads):
                    if rg is not None:
                        np.testing.assert_allclose(g, rg, rtol=1e-10, atol=1e-12, err_msg=f"{name} layout {li} grad")
                assert all(same_layout), f"{name} layout {li}: a gradient is not laid out like its parameter"


@pytest.mark.parametrize("mesh_shape", [(2,), (2, 2)], ids=["1d_2ranks", "2d_4ranks"])
def test_sharding_rules_match_one_process(mesh_shape):
    world = int(np.prod(mesh_shape))
    res = run_ranks(_ops_worker, world, "ops", mesh_shape, timeout=300)
    _check(res, _cases)


def test_loss_parallel_matches_one_process():
    res = run_ranks(_ops_worker, 2, "loss", (2,), timeout=180)
    _check(res, _loss_parallel_cases)
