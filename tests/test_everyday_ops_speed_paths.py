"""The fast paths of everyday ops (benchmarks/everyday_ops.py times them): einsum as one matrix product, interpolate by dense
matrices or gathers, topk by a partition, logsumexp on the pool, repeat as one broadcast copy, nonzero from flat
positions. Values against float64 NumPy references, gradients by gradcheck, edge cases (empty, size-1 dims, NaN,
ties), PyTorch's values, dtypes, shapes and gradients when it is importable, and a smoke run of the benchmark."""
import importlib.util
import json
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tinytorch
from tinytorch._ops import linalg as linalg_ops
from tinytorch._ops import upsampling
from tinytorch.autograd import gradcheck, gradgradcheck

F = tinytorch.nn.functional
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
rng = np.random.default_rng(0)


def _t(a, requires_grad: bool = False):
    return tinytorch.tensor(a, requires_grad=requires_grad)


# ------------------------------------------------------------------ einsum

PAIRS = [
    ("bij,bjk->bik", (3, 4, 5), (3, 5, 2)),
    ("ij,jk->ki", (4, 5), (5, 3)),
    ("bhqd,bhkd->bhqk", (2, 3, 4, 5), (2, 3, 6, 5)),
    ("ij,ij->", (3, 4), (3, 4)),
    ("i,i->", (5,), (5,)),
    ("ij,j->i", (4, 5), (5,)),
    ("ijk,jl->lik", (2, 3, 4), (3, 5)),
    ("bij,bjk->ik", (3, 4, 5), (3, 5, 2)),
    ("ab,cb->", (3, 4), (5, 4)),
    ("ab,cb->a", (3, 4), (5, 4)),
    ("ij,jk", (4, 5), (5, 3)),
    ("bij,bjk->bik", (0, 4, 5), (0, 5, 2)),
    ("bij,bjk->bik", (3, 4, 0), (3, 0, 2)),
    ("ij,jk->ik", (1, 1), (1, 1)),
]


@pytest.mark.parametrize("eq,sa,sb", PAIRS)
def test_einsum_pair_matches_numpy(eq, sa, sb):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    got = tinytorch.einsum(eq, _t(a), _t(b))
    want = np.einsum(eq, a, b)
    assert got.dtype == tinytorch.float64 and tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    got32 = tinytorch.einsum(eq, _t(a.astype(np.float32)), _t(b.astype(np.float32)))
    assert got32.dtype == tinytorch.float32
    np.testing.assert_allclose(got32.numpy(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("eq,sa,sb", PAIRS[:10])
def test_einsum_pairs_take_the_matrix_product(eq, sa, sb):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    lhs, rhs = eq.split("->")
    sub_a, sub_b = lhs.split(",")
    r = linalg_ops._contract_pair(sub_a, a, sub_b, b, rhs)
    assert r is not None and r.flags.c_contiguous
    np.testing.assert_allclose(r, np.einsum(eq, a, b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("eq,sa,sb", [("ii,ij->j", (3, 3), (3, 4)), ("ij,kl->ijkl", (2, 3), (4, 5)),
                                      ("ij,ij->ij", (2, 3), (2, 3))])
def test_einsum_other_pairs_fall_back_to_numpy(eq, sa, sb):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    lhs, rhs = eq.split("->")
    sub_a, sub_b = lhs.split(",")
    assert linalg_ops._contract_pair(sub_a, a, sub_b, b, rhs) is None
    np.testing.assert_allclose(tinytorch.einsum(eq, _t(a), _t(b)).numpy(), np.einsum(eq, a, b), rtol=1e-12)
    if eq == "ii,ij->j":
        assert linalg_ops._contract_pair("ij", a, "jk", b, "ik") is not None
        assert linalg_ops._contract_pair("ij", a.astype(np.float32), "jk", b, "ik") is None  # two dtypes


def test_einsum_broadcasting_ellipsis_integers_and_half_precision():
    a, b = rng.standard_normal((2, 1, 3, 4)), rng.standard_normal((5, 4, 2))
    np.testing.assert_allclose(tinytorch.einsum("...ij,...jk->...ik", _t(a), _t(b)).numpy(),
                               np.einsum("...ij,...jk->...ik", a, b), rtol=1e-12)
    c, d = rng.standard_normal((3, 1)), rng.standard_normal((4, 5))  # j: size 1 broadcasts against 4
    np.testing.assert_allclose(tinytorch.einsum("ij,jk->ik", _t(c), _t(d)).numpy(),
                               np.broadcast_to(c, (3, 4)) @ d, rtol=1e-12)
    ia, ib = rng.integers(-5, 5, (2, 3, 4)), rng.integers(-5, 5, (2, 4, 3))
    got = tinytorch.einsum("bij,bjk->bik", _t(ia), _t(ib))
    assert got.dtype == tinytorch.int64 and np.array_equal(got.numpy(), ia @ ib)
    for dt in (tinytorch.float16, tinytorch.bfloat16):
        h = tinytorch.einsum("bij,bjk->bik", _t(a[:, 0]).to(dt), _t(rng.standard_normal((2, 4, 2))).to(dt))
        assert h.dtype == dt
    x, y, z = rng.standard_normal((3, 4)), rng.standard_normal((4, 5)), rng.standard_normal((5, 2))
    np.testing.assert_allclose(tinytorch.einsum("ij,jk,kl->il", _t(x), _t(y), _t(z)).numpy(), x @ y @ z,
                               rtol=1e-12)


def test_einsum_equation_errors():
    with pytest.raises(RuntimeError, match=r"number of subscripts in the equation \(2\) does not match the number "
                                           r"of dimensions \(3\) for operand 0 and no ellipsis was given"):
        tinytorch.einsum("ij,jk->ik", tinytorch.ones(2, 3, 4), tinytorch.ones(3, 4))
    with pytest.raises(RuntimeError, match="output subscript i appears more than once in the output"):
        tinytorch.einsum("ij,jk->iik", tinytorch.ones(2, 3), tinytorch.ones(3, 4))
    with pytest.raises(RuntimeError, match="output subscript z does not appear in the equation for any input"):
        tinytorch.einsum("ij,jk->iz", tinytorch.ones(2, 3), tinytorch.ones(3, 4))


@pytest.mark.parametrize("eq,shapes", [("bij,bjk->bik", [(2, 3, 2), (2, 2, 3)]), ("ij,jk->ki", [(2, 3), (3, 2)]),
                                       ("ab,cb->a", [(2, 3), (2, 3)]), ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)])])
def test_einsum_gradcheck(eq, shapes):
    ts = [_t(rng.standard_normal(s), True) for s in shapes]
    assert gradcheck(lambda *xs: tinytorch.einsum(eq, *xs), ts)
    assert gradgradcheck(lambda *xs: tinytorch.einsum(eq, *xs), ts)


@needs_torch
@pytest.mark.parametrize("eq,sa,sb", PAIRS[:11])
def test_einsum_matches_torch(eq, sa, sb):
    import torch
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    res = []
    for lib in (tinytorch, torch):
        x, y = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        out = lib.einsum(eq, x, y)
        out.backward(lib.ones_like(out))
        res.append((out.detach().numpy(), x.grad.numpy(), y.grad.numpy(), str(out.dtype).split(".")[-1]))
    for u, v in zip(res[0][:3], res[1][:3]):
        assert u.shape == v.shape
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-5)
    assert res[0][3] == res[1][3]


# ------------------------------------------------------------------ interpolate

def _linear_taps(n_in, n_out, align_corners):
    """PyTorch's linear source positions, written out per output index (float64)."""
    i0s, i1s, lams = [], [], []
    for j in range(n_out):
        if align_corners:
            src = j * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
        else:
            src = max((j + 0.5) * n_in / n_out - 0.5, 0.0)
        i0 = min(int(math.floor(src)), n_in - 1)
        i0s.append(i0)
        i1s.append(min(i0 + 1, n_in - 1))
        lams.append(src - i0)
    return i0s, i1s, lams


def _ref_resample(x, sizes, mode, align_corners=False):
    """A float64 reference: one spatial axis after another, each output index from PyTorch's formula."""
    for ax, n_out in enumerate(sizes, start=2):
        n_in = x.shape[ax]
        moved = np.moveaxis(x, ax, -1)
        out = np.empty(moved.shape[:-1] + (n_out,))
        if mode == "nearest":
            for j in range(n_out):
                out[..., j] = moved[..., min(int(math.floor(j * n_in / n_out)), n_in - 1)]
        else:
            for j, (i0, i1, lam) in enumerate(zip(*_linear_taps(n_in, n_out, align_corners))):
                out[..., j] = moved[..., i0] * (1 - lam) + moved[..., i1] * lam
        x = np.moveaxis(out, -1, ax)
    return x


def _vjp_ref(shape, sizes, mode, align_corners, g):
    """The reference's gradient: the transposed map, column by column of the identity."""
    n = int(np.prod(shape))
    cols = np.stack([_ref_resample(np.eye(n)[i].reshape(shape), sizes, mode, align_corners).ravel()
                     for i in range(n)])
    return (cols @ g.ravel()).reshape(shape)


@pytest.mark.parametrize("shape,sizes,mode,ac", [
    ((2, 3, 5), (11,), "linear", False), ((2, 3, 5), (11,), "linear", True), ((1, 2, 4, 5), (7, 3), "bilinear", False),
    ((1, 2, 4, 5), (7, 3), "bilinear", True), ((1, 2, 3, 4), (6, 8), "nearest", None),
    ((1, 1, 2, 3, 4), (3, 5, 2), "trilinear", False), ((1, 2, 6, 5), (4, 1), "bilinear", False),
    ((1, 1, 1, 4), (3, 7), "bilinear", True), ((1, 2, 3, 4), (5, 7), "nearest", None),
    ((2, 3, 5), (15,), "nearest", None)])
def test_interpolate_matches_the_reference_on_both_paths(monkeypatch, shape, sizes, mode, ac):
    x = rng.standard_normal(shape)
    want = _ref_resample(x, sizes, mode, bool(ac))
    g = rng.standard_normal(want.shape)
    want_grad = _vjp_ref(shape, sizes, mode, bool(ac), g)
    for per_tap in (1 << 20, 0):  # the matrix products, then the gathers and scatter-adds
        monkeypatch.setattr(upsampling, "_DENSE_PER_TAP", {False: per_tap, True: per_tap})
        t = _t(x, True)
        y = F.interpolate(t, size=sizes, mode=mode, align_corners=ac)
        assert y.dtype == tinytorch.float64 and tuple(y.shape) == want.shape
        np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-12, atol=1e-12)
        y.backward(_t(g))
        np.testing.assert_allclose(t.grad.numpy(), want_grad, rtol=1e-12, atol=1e-12)


def test_interpolate_nearest_repeats_are_recognised():
    assert upsampling._map_for_dim(4, 8, 4, "nearest", False, 2.0).repeat == 2
    assert upsampling._map_for_dim(5, 15, 3, "nearest", False, None).repeat == 3
    assert upsampling._map_for_dim(5, 15, 3, "nearest-exact", False, None).repeat == 3
    assert upsampling._map_for_dim(4, 7, 4, "nearest", False, None).repeat == 0
    assert upsampling._map_for_dim(4, 8, 4, "bilinear", False, None).repeat == 0


def test_interpolate_long_dims_take_the_gathers():
    x = rng.standard_normal((1, 2, 300))  # past _DENSE_PER_TAP both ways: gathers, then scatter-adds
    t = _t(x, True)
    y = F.interpolate(t, size=517, mode="linear")
    np.testing.assert_allclose(y.detach().numpy(), _ref_resample(x, (517,), "linear"), rtol=1e-12, atol=1e-12)
    y.sum().backward()
    i0, i1, lam = _linear_taps(300, 517, False)
    want = np.zeros(300)
    np.add.at(want, i0, 1 - np.array(lam))
    np.add.at(want, i1, np.array(lam))
    np.testing.assert_allclose(t.grad.numpy(), np.broadcast_to(want, (1, 2, 300)), rtol=1e-12)


def test_interpolate_nan_stays_where_its_taps_reach(monkeypatch):
    x = rng.standard_normal((1, 1, 6, 6))
    x[0, 0, 2, 3] = np.nan
    for per_tap in (1 << 20, 0):
        monkeypatch.setattr(upsampling, "_DENSE_PER_TAP", {False: per_tap, True: per_tap})
        y = F.interpolate(_t(x), scale_factor=2, mode="bilinear").numpy()
        nan_rows, nan_cols = np.nonzero(np.isnan(y[0, 0]))
        # output rows/cols whose taps use source row 2 / col 3 with a nonzero weight: 3..6 (scale 2, half-pixel)
        assert set(nan_rows) == {3, 4, 5, 6} and set(nan_cols) == {5, 6, 7, 8}
        assert np.isnan(y).sum() == 16
        ref = _ref_resample(np.nan_to_num(x), (12, 12), "bilinear")
        np.testing.assert_allclose(y[~np.isnan(y)], ref[~np.isnan(y)], rtol=1e-12)
        t = _t(np.ones((1, 1, 3, 3)), True)
        g = np.ones((1, 1, 6, 6))
        g[0, 0, 0, 0] = np.nan
        F.interpolate(t, scale_factor=2, mode="bilinear").backward(_t(g))
        # output (0, 0) reads source rows and cols 0 (weight 1) and 1 (weight 0): nan * 0 reaches all four, as in
        # PyTorch's backward
        assert np.isnan(t.grad.numpy()).sum() == 4 and np.isnan(t.grad.numpy()[0, 0, :2, :2]).all()
        t2 = _t(np.ones((1, 1, 3, 3)), True)
        F.interpolate(t2, scale_factor=2, mode="nearest").backward(_t(np.where(np.isnan(g), np.inf, g)))
        assert np.isinf(t2.grad.numpy()).sum() == 1 and (t2.grad.numpy()[np.isfinite(t2.grad.numpy())] == 4).all()


@pytest.mark.parametrize("kw", [dict(scale_factor=2, mode="bilinear"), dict(size=(3, 7), mode="bilinear",
                                                                             align_corners=True),
                                dict(scale_factor=1.7, mode="bicubic"), dict(size=(5, 2), mode="nearest"),
                                dict(scale_factor=0.6, mode="nearest-exact")])
def test_interpolate_gradcheck(kw):
    x = _t(rng.standard_normal((1, 2, 4, 5)), True)
    assert gradcheck(lambda a: F.interpolate(a, **kw), (x,))
    assert gradgradcheck(lambda a: F.interpolate(a, **kw), (x,))


def test_interpolate_dtypes_edges_and_errors():
    x = tinytorch.ones(1, 1, 4, 4, requires_grad=True)
    y = F.interpolate(x, size=(4, 4), mode="bilinear")
    assert y._data is not x._data and y.grad_fn.name() == "UpsampleBilinear2DBackward0"
    assert F.interpolate(x, scale_factor=2).grad_fn.name() == "UpsampleNearest2DBackward0"
    g, = tinytorch.autograd.grad(F.interpolate(x, scale_factor=2, mode="bilinear").pow(2).sum(), x, create_graph=True)
    assert g.grad_fn.name() == "UpsampleBilinear2DBackwardBackward0"
    assert tuple(F.interpolate(tinytorch.zeros(0, 3, 4, 4), scale_factor=2, mode="bilinear").shape) == (0, 3, 8, 8)
    assert F.interpolate(tinytorch.ones(1, 1, 2, 2, dtype=tinytorch.float16), scale_factor=2,
                         mode="bilinear").dtype == tinytorch.float16
    u8 = tinytorch.arange(16, dtype=tinytorch.uint8).reshape(1, 1, 4, 4)
    near = F.interpolate(u8, scale_factor=2)
    assert near.dtype == tinytorch.uint8 and np.array_equal(near.numpy(), u8.numpy().repeat(2, 2).repeat(2, 3))
    lin = F.interpolate(tinytorch.tensor([[[[0, 2], [6, 255]]]], dtype=tinytorch.uint8), scale_factor=2,
                        mode="bilinear")
    # 0.75/0.25 blends along W, rounded half up (0.5 -> 1, 68.25 -> 68), then along H, rounded: PyTorch's values
    assert lin.dtype == tinytorch.uint8
    assert lin.tolist() == [[[[0, 1, 2, 2], [2, 18, 50, 65], [5, 51, 145, 192], [6, 68, 193, 255]]]]
    for mode, kind, dt in (("bilinear", "linear", tinytorch.int64), ("linear", "linear", tinytorch.uint8),
                           ("bicubic", "cubic", tinytorch.int32), ("nearest", "nearest", tinytorch.int64)):
        with pytest.raises(NotImplementedError, match=f"\"compute_indices_weights_{kind}\" not implemented for"):
            F.interpolate(tinytorch.zeros(1, 1, 4, 4, dtype=dt)[..., 0] if mode == "linear" else
                          tinytorch.zeros(1, 1, 4, 4, dtype=dt), scale_factor=2, mode=mode)
    with pytest.raises(RuntimeError, match=r"sizes should be greater than 0, but got input \(H: 4, W: 4\) output "
                                           r"\(H: 0, W: 3\)"):
        F.interpolate(tinytorch.ones(1, 1, 4, 4), size=(0, 3), mode="bilinear")
    with pytest.raises(RuntimeError, match=r"but got input \(W: 0\) and output \(W: 0\)"):
        F.interpolate(tinytorch.ones(1, 1, 0), scale_factor=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # inf * 0 inside the gathers: nan, as PyTorch, with no NumPy warning
        F.interpolate(_t(np.full((1, 1, 300), np.inf)), size=400, mode="linear")
    meta = F.interpolate(tinytorch.zeros(2, 3, 8, 8, device="meta"), scale_factor=2, mode="bilinear")
    assert tuple(meta.shape) == (2, 3, 16, 16) and meta.device.type == "meta"


@needs_torch
@pytest.mark.parametrize("shape,kw", [
    ((2, 3, 8, 8), dict(scale_factor=2, mode="bilinear")), ((2, 3, 8, 8), dict(scale_factor=2, mode="nearest")),
    ((2, 3, 7, 5), dict(size=(9, 4), mode="bilinear", align_corners=True)),
    ((2, 3, 7, 5), dict(scale_factor=(1.5, 2.5), mode="bicubic")), ((2, 3, 6), dict(size=300, mode="linear")),
    ((1, 2, 4, 5, 6), dict(scale_factor=1.5, mode="trilinear")), ((1, 2, 300, 4), dict(size=(130, 9), mode="bicubic")),
    ((2, 3, 7, 5), dict(size=(3, 11), mode="nearest-exact"))])
def test_interpolate_matches_torch(shape, kw):
    import torch
    x = rng.standard_normal(shape)
    x.flat[5] = np.nan
    g = rng.standard_normal((1,))
    res = []
    for lib in (tinytorch, torch):
        for dt in ("float64", "float32"):
            t = lib.tensor(x, dtype=getattr(lib, dt), requires_grad=True)
            y = lib.nn.functional.interpolate(t, **kw)
            gy = np.cos(np.arange(y.numel()) + g).reshape(tuple(y.shape))
            gy.flat[7] = np.nan
            y.backward(lib.tensor(gy, dtype=getattr(lib, dt)))
            res.append((y.detach().numpy(), t.grad.numpy(), str(y.dtype).split(".")[-1]))
    for ours, theirs, tol in ((res[0], res[2], 1e-10), (res[1], res[3], 1e-4)):
        assert ours[2] == theirs[2]
        for u, v in zip(ours[:2], theirs[:2]):
            assert u.shape == v.shape
            np.testing.assert_allclose(u, v, rtol=tol, atol=tol, equal_nan=True)


@needs_torch
def test_interpolate_uint8_and_bfloat16_match_torch():
    import torch
    u = rng.integers(0, 256, (2, 3, 6, 9)).astype(np.uint8)
    for mode in ("bilinear", "bicubic", "nearest", "nearest-exact"):
        for kw, tol in ((dict(scale_factor=2), 0), (dict(size=(7, 13)), 1)):  # 1: PyTorch's fixed-point weights
            ours = F.interpolate(tinytorch.tensor(u), mode=mode, **kw).numpy()
            theirs = torch.nn.functional.interpolate(torch.tensor(u), mode=mode, **kw).numpy()
            assert ours.dtype == np.uint8 and ours.shape == theirs.shape
            assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= tol
    h = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    res = []
    for lib in (tinytorch, torch):
        t = lib.tensor(h).to(lib.bfloat16).requires_grad_()
        y = lib.nn.functional.interpolate(t, scale_factor=2, mode="bilinear")
        y.float().sum().backward()
        assert y.dtype == lib.bfloat16 and t.grad.dtype == lib.bfloat16
        res.append((y.detach().float().numpy(), t.grad.float().numpy()))
    for u, v in zip(*res):
        np.testing.assert_allclose(u, v, rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------------ topk

def _ref_topk(rows, k, largest):
    """Per row: NaN above every number, ties lowest index first (sorted with Python's key)."""
    idx = []
    for row in rows:
        def key(i):
            v = row[i]
            nan = bool(np.isnan(v)) if row.dtype.kind == "f" else False
            if largest:
                return (0 if nan else 1, 0 if nan else -float(v), i)
            return (1 if nan else 0, 0 if nan else float(v), i)
        idx.append(sorted(range(len(row)), key=key)[:k])
    return np.array(idx, dtype=np.int64).reshape(len(rows), k)


def _check_topk(a, k, dim, largest, ordered=True):
    got = tinytorch.tensor(a).topk(k, dim, largest, ordered)
    moved = np.moveaxis(a, dim, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    want = _ref_topk(rows, k, largest)
    gi = np.moveaxis(got.indices.numpy(), dim, -1).reshape(len(rows), k)
    if not ordered:
        want = np.sort(want, axis=1)  # sorted=False: index order
    assert got.indices.dtype == tinytorch.int64 and np.array_equal(gi, want)
    gv = np.moveaxis(got.values.numpy(), dim, -1).reshape(len(rows), k)
    np.testing.assert_array_equal(gv, np.take_along_axis(rows, want, 1))
    assert got.values.dtype == tinytorch.tensor(a).dtype


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("ordered", [True, False])
def test_topk_matches_the_reference(largest, ordered):
    a = rng.standard_normal((4, 6, 9))
    for k, dim in ((3, -1), (1, 1), (4, 0), (9, 2), (0, -1), (6, -2)):
        _check_topk(a, k, dim, largest, ordered)
    ties = rng.integers(0, 3, (20, 12))
    _check_topk(ties, 5, 1, largest, ordered)
    _check_topk(ties.astype(np.float32), 7, 0, largest, ordered)
    nan = rng.standard_normal((6, 8))
    nan[nan > 0.8] = np.nan
    nan[0, :] = np.nan
    nan[1, 2] = np.inf
    nan[2, 3] = -np.inf
    for k in (1, 3, 8):
        _check_topk(nan, k, 1, largest, ordered)
    _check_topk(rng.standard_normal((5, 7)) > 0, 3, 1, largest, ordered)


def test_topk_edges_and_errors():
    assert tuple(tinytorch.zeros(0, 5).topk(2, 1).values.shape) == (0, 2)
    assert tuple(tinytorch.zeros(3, 0).topk(0, 1).indices.shape) == (3, 0)
    v, i = tinytorch.tensor(4.0).topk(1)
    assert v.item() == 4.0 and i.item() == 0
    h = tinytorch.tensor([1.0, 3.0, 2.0, 3.0], dtype=tinytorch.bfloat16).topk(2)
    assert h.values.dtype == tinytorch.bfloat16 and h.indices.tolist() == [1, 3]
    assert tinytorch.tensor([[5.0], [1.0]]).topk(1, dim=1).indices.tolist() == [[0], [0]]
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        tinytorch.ones(3, 4).topk(5)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        tinytorch.ones(3, 4).topk(-1)
    x = _t(np.random.default_rng(1).permutation(24).reshape(2, 3, 4) / 5.0, True)
    for dim in (0, 1, -1):
        assert gradcheck(lambda t: t.topk(2, dim).values, (x,))
        assert gradgradcheck(lambda t: t.topk(2, dim, largest=False, sorted=False).values, (x,))


@needs_torch
def test_topk_matches_torch():
    import torch
    a = rng.standard_normal((5, 64, 7)).astype(np.float32)
    a[0, 3, 1] = np.nan
    a[1, :, 2] = np.nan
    for dim, k, largest in ((1, 10, True), (1, 10, False), (-1, 3, True), (0, 5, False)):
        ours = tinytorch.tensor(a, requires_grad=True)
        theirs = torch.tensor(a, requires_grad=True)
        r1, r2 = ours.topk(k, dim, largest), theirs.topk(k, dim, largest)
        np.testing.assert_array_equal(r1.values.detach().numpy(), r2.values.detach().numpy())
        assert r1.values.dtype == tinytorch.float32 and tuple(r1.indices.shape) == tuple(r2.indices.shape)
        gathered = np.take_along_axis(a, r1.indices.numpy(), dim)  # equal values where PyTorch's ties differ
        np.testing.assert_array_equal(gathered, r2.values.detach().numpy())
        g = rng.standard_normal(tuple(r2.values.shape)).astype(np.float32)
        r1.values.backward(tinytorch.tensor(g))
        r2.values.backward(torch.tensor(g))
        if not np.isnan(a).any(axis=dim).any():
            np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())
    b = rng.standard_normal((3, 50)).astype(np.float32)  # no ties or NaN: the same indices as PyTorch
    assert tinytorch.tensor(b).topk(7).indices.tolist() == torch.tensor(b).topk(7).indices.tolist()


# ------------------------------------------------------------------ logsumexp

def _ref_lse(a, axis, keepdims):
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        r = np.log(np.exp(a - m).sum(axis=axis, keepdims=True)) + m
    return r if keepdims else np.squeeze(r, axis=axis)


@pytest.mark.parametrize("shape", [(3, 4, 5), (8, 128, 96)])  # the second is large enough for the pool's kernels
def test_logsumexp_matches_the_reference(shape):
    a = rng.standard_normal(shape) * 5
    for dim in (-1, 0, 1, (0, 2), (0, 1, 2)):
        axis = dim if isinstance(dim, tuple) else (dim,)
        for keepdim in (False, True):
            np.testing.assert_allclose(_t(a).logsumexp(dim, keepdim).numpy(), _ref_lse(a, axis, keepdim),
                                       rtol=1e-12)
            got32 = _t(a.astype(np.float32)).logsumexp(dim, keepdim)
            assert got32.dtype == tinytorch.float32
            np.testing.assert_allclose(got32.numpy(), _ref_lse(a, axis, keepdim), rtol=1e-5)


def test_logsumexp_edges():
    rows = np.array([[np.inf, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf], [np.nan, 1.0, 2.0], [1000.0, 1000.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _t(rows).logsumexp(1).numpy()
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])
    np.testing.assert_allclose(got[3], 1000 + math.log(2 + math.exp(-1000)), rtol=1e-15)
    assert tinytorch.zeros(0, 3).logsumexp(0).tolist() == [-math.inf] * 3
    assert tuple(tinytorch.zeros(0, 3).logsumexp(1).shape) == (0,)
    ints = tinytorch.tensor([[1, 2], [3, 4]]).logsumexp(1)
    assert ints.dtype == tinytorch.float32
    np.testing.assert_allclose(ints.numpy(), [2 + math.log1p(math.exp(-1)), 4 + math.log1p(math.exp(-1))],
                               rtol=1e-6)
    assert tinytorch.tensor(3.0).logsumexp(0).item() == 3.0
    assert tinytorch.ones(2, 3, dtype=tinytorch.float16).logsumexp(1).dtype == tinytorch.float16
    x = _t(rng.standard_normal((3, 4)), True)
    for dim, keepdim in ((1, False), (0, True), ((0, 1), False)):
        assert gradcheck(lambda t: t.logsumexp(dim, keepdim), (x,))
        assert gradgradcheck(lambda t: t.logsumexp(dim, keepdim), (x,))


@needs_torch
def test_logsumexp_matches_torch():
    import torch
    a = (rng.standard_normal((8, 128, 96)) * 3).astype(np.float32)
    a[0, 0, :] = -np.inf
    for dim in (-1, 1, (0, 2)):
        ours, theirs = _t(a, True), torch.tensor(a, requires_grad=True)
        r1, r2 = ours.logsumexp(dim), theirs.logsumexp(dim)
        assert r1.dtype == tinytorch.float32 and tuple(r1.shape) == tuple(r2.shape)
        np.testing.assert_allclose(r1.detach().numpy(), r2.detach().numpy(), rtol=1e-5, atol=1e-5)
        r1.sum().backward()
        r2.sum().backward()
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ repeat

@pytest.mark.parametrize("shape,reps", [((2, 3), (2, 2)), ((2, 3), (3, 1, 2)), ((8, 256, 64), (2, 2, 2)),
                                        ((4,), (1, 3, 2)), ((), (2, 3)), ((), ()), ((0, 3), (2, 2)),
                                        ((2, 3), (0, 2)), ((2, 1, 3), (1, 5, 1))])
def test_repeat_matches_tile(shape, reps):
    a = rng.standard_normal(shape).astype(np.float32)
    got = _t(a).repeat(*reps)
    assert got.dtype == tinytorch.float32
    np.testing.assert_array_equal(got.numpy(), np.tile(a, reps) if reps else a)


def test_repeat_views_dtypes_errors_and_gradient():
    base = rng.standard_normal((4, 6))
    view = _t(base)[:, ::2].t()  # not contiguous
    np.testing.assert_array_equal(view.repeat(2, 3).numpy(), np.tile(base[:, ::2].T, (2, 3)))
    b = tinytorch.tensor([[1, 2]], dtype=tinytorch.bfloat16).repeat(2, 2)
    assert b.dtype == tinytorch.bfloat16 and b.float().tolist() == [[1, 2, 1, 2]] * 2
    assert tinytorch.tensor([True, False]).repeat(2).tolist() == [True, False, True, False]
    assert tuple(tinytorch.zeros(0, 3).repeat(-1, 1).shape) == (0, 3)
    with pytest.raises(RuntimeError, match=r"Trying to create tensor with negative dimension -2: \[-2, 6\]"):
        tinytorch.zeros(2, 3).repeat(-1, 2)
    with pytest.raises(RuntimeError, match="Number of dimensions of repeat dims can not be smaller"):
        tinytorch.zeros(2, 3).repeat(2)
    x = _t(rng.standard_normal((2, 3)), True)
    y = x.repeat(2, 1, 3)
    assert y.grad_fn.name() == "RepeatBackward0"
    y.backward(_t(np.arange(36.0).reshape(2, 2, 9)))
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(36.0).reshape(2, 2, 3, 3).sum(axis=(0, 2)))
    assert gradcheck(lambda t: t.repeat(2, 1, 3), (x,))
    assert gradgradcheck(lambda t: t.repeat(2, 2), (x,))


@needs_torch
def test_repeat_matches_torch():
    import torch
    a = rng.standard_normal((8, 16, 4)).astype(np.float32)
    ours, theirs = _t(a, True), torch.tensor(a, requires_grad=True)
    r1, r2 = ours.repeat(2, 1, 3, 2), theirs.repeat(2, 1, 3, 2)
    assert tuple(r1.shape) == tuple(r2.shape)
    np.testing.assert_array_equal(r1.detach().numpy(), r2.detach().numpy())
    g = rng.standard_normal(tuple(r2.shape)).astype(np.float32)
    r1.backward(tinytorch.tensor(g))
    r2.backward(torch.tensor(g))
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------ nonzero

@pytest.mark.parametrize("shape", [(64, 32, 16), (7, 9, 5), (13,), (3, 1, 4, 6), (0, 4), (2, 0, 3)])
def test_nonzero_matches_argwhere(shape):
    a = rng.standard_normal(shape)
    a[a < 0.3] = 0
    for x in (a, a != 0, a.astype(np.int32)):
        got = tinytorch.tensor(x).nonzero()
        want = np.argwhere(x)
        assert got.dtype == tinytorch.int64 and tuple(got.shape) == want.shape
        np.testing.assert_array_equal(got.numpy(), want)
        parts = tinytorch.tensor(x).nonzero(as_tuple=True)
        assert len(parts) == len(shape)
        for p, w in zip(parts, np.nonzero(x)):
            assert p.dtype == tinytorch.int64 and np.array_equal(p.numpy(), w)


def test_nonzero_edges():
    assert tuple(tinytorch.tensor(5.0).nonzero().shape) == (1, 0)
    assert tuple(tinytorch.tensor(0.0).nonzero().shape) == (0, 0)
    assert [t.tolist() for t in tinytorch.tensor(5.0).nonzero(as_tuple=True)] == [[0]]
    assert tinytorch.tensor([0.0, np.nan, -0.0, 2.0]).nonzero().tolist() == [[1], [3]]  # NaN is nonzero
    base = np.arange(60).reshape(6, 10) % 4 == 0
    view = tinytorch.tensor(base)[1:, ::3]
    np.testing.assert_array_equal(view.nonzero().numpy(), np.argwhere(base[1:, ::3]))
    assert tinytorch.argwhere(tinytorch.tensor([[0, 1], [1, 0]])).tolist() == [[0, 1], [1, 0]]


@needs_torch
def test_nonzero_matches_torch():
    import torch
    m = rng.standard_normal((6, 10, 7)) > 0.5
    ours, theirs = tinytorch.tensor(m).nonzero(), torch.tensor(m).nonzero()
    assert tuple(ours.shape) == tuple(theirs.shape) and ours.stride() == theirs.stride()
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    for u, v in zip(tinytorch.tensor(m).nonzero(as_tuple=True), torch.tensor(m).nonzero(as_tuple=True)):
        np.testing.assert_array_equal(u.numpy(), v.numpy())


# ------------------------------------------------------------------ the benchmark

def test_everyday_ops_benchmark_runs(tmp_path):
    out = tmp_path / "everyday_ops.json"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    res = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "everyday_ops.py"), "--threads", "1",
                          "--reps", "1", "--batch", "2", "--json", str(out)],
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads(out.read_text())
    rows = data["threads"]["1"]
    assert data["size"] == 2 and len(rows) == 22 and "einsum bij,bjk->bik" in rows and "relu6 fwd+bwd" in rows
    assert all(r["tinytorch_ms"] > 0 for r in rows.values())
    if HAS_TORCH:
        assert all(r["torch_ms"] > 0 for r in rows.values())
    assert "interpolate bilinear x2 fwd+bwd" in res.stdout
