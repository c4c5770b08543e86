"""torch.* names added in _ops/toplevel.py: in-place forms, aten-order aliases, integration, utilities."""
import importlib.util
import math
import warnings

import numpy as np
import pytest

import tinytorch
from tinytorch.autograd import gradcheck, gradgradcheck

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")


def f64(a, grad=False):
    return tinytorch.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


# ------------------------------------------------------------------ in-place forms

@pytest.mark.parametrize("name,np_fn", [("sqrt_", np.sqrt), ("exp_", np.exp), ("neg_", np.negative),
                                        ("floor_", np.floor), ("sigmoid_", lambda a: 1 / (1 + np.exp(-a))),
                                        ("arctan_", np.arctan), ("square_", np.square), ("trunc_", np.trunc)])
def test_inplace_forms_write_input(name, np_fn):
    a = np.array([0.25, 1.5, 2.75])
    x = f64(a)
    r = getattr(tinytorch, name)(x)
    assert r is x
    np.testing.assert_allclose(x.numpy(), np_fn(a))


def test_inplace_forms_with_arguments():
    x = f64([-1.0, 0.5, 3.0])
    tinytorch.clamp_(x, min=0.0, max=1.0)
    np.testing.assert_allclose(x.numpy(), [0.0, 0.5, 1.0])
    y = f64([0.0, 2.0])
    tinytorch.xlogy_(y, f64([3.0, math.e]))
    np.testing.assert_allclose(y.numpy(), [0.0, 2.0])
    z = tinytorch.zeros(3)
    tinytorch.index_put_(z, (tinytorch.tensor([0, 2]),), tinytorch.tensor([5.0, 6.0]))
    np.testing.assert_allclose(z.numpy(), [5, 0, 6])
    leaf = f64([1.0], grad=True)
    with pytest.raises(RuntimeError):
        tinytorch.exp_(leaf)


# ------------------------------------------------------------------ dropout family

def test_dropout_positional_train():
    x = tinytorch.ones(1000)
    assert tinytorch.dropout(x, 0.5, False) is x
    tinytorch.manual_seed(0)
    y = tinytorch.dropout(x, 0.5, True).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 0.4 < (y == 0).mean() < 0.6
    with pytest.raises(TypeError):
        tinytorch.dropout(x, 0.5)
    z = tinytorch.ones(100)
    assert tinytorch.dropout_(z, 1.0, True) is z and not z.numpy().any()


def test_feature_dropout_zeroes_whole_channels():
    tinytorch.manual_seed(1)
    y = tinytorch.feature_dropout(tinytorch.ones(4, 50, 3), 0.5, True).numpy()
    assert (y.min(-1) == y.max(-1)).all() and set(np.unique(y)) <= {0.0, 2.0}
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        tinytorch.feature_dropout(tinytorch.ones(3), 0.5, True)
    x = tinytorch.randn(2, 3, 4)
    assert tinytorch.feature_alpha_dropout(x, 0.5, False) is x
    y = tinytorch.feature_alpha_dropout(tinytorch.randn(8, 64, 5), 0.3, True).numpy()
    assert np.isclose(y.min(-1), y.max(-1)).sum() > 0  # dropped channels hold one constant
    a = tinytorch.ones(3, 3)
    assert tinytorch.alpha_dropout_(a, 0.5, True) is a


def test_native_dropout():
    tinytorch.manual_seed(0)
    out, mask = tinytorch.native_dropout(tinytorch.ones(200), 0.25, True)
    assert mask.dtype == tinytorch.bool
    np.testing.assert_allclose(out.numpy(), mask.numpy() / 0.75, rtol=1e-6)
    out, mask = tinytorch.native_dropout(tinytorch.ones(3), 0.5, False)
    assert mask.numpy().all() and np.allclose(out.numpy(), 1)


# ------------------------------------------------------------------ aten argument orders

def test_norms_and_embedding_argument_orders():
    x = np.random.RandomState(0).randn(4, 3, 5)
    w, b = f64([1.0, 2.0, 3.0]), f64([0.0, 1.0, -1.0])
    rm, rv = tinytorch.zeros(3, dtype=tinytorch.float64), tinytorch.ones(3, dtype=tinytorch.float64)
    out = tinytorch.batch_norm(f64(x), w, b, rm, rv, True, 0.1, 1e-5, False)
    mean, var = x.mean((0, 2)), x.var((0, 2))
    ref = (x - mean[:, None]) / np.sqrt(var[:, None] + 1e-5) * w.numpy()[:, None] + b.numpy()[:, None]
    np.testing.assert_allclose(out.numpy(), ref, atol=1e-10)
    np.testing.assert_allclose(rm.numpy(), 0.1 * mean)
    o2, sm, sinv = tinytorch.native_batch_norm(f64(x), None, None, None, None, True, 0.1, 1e-5)
    np.testing.assert_allclose(sm.numpy(), mean)
    np.testing.assert_allclose(sinv.numpy(), 1 / np.sqrt(var + 1e-5))
    assert tinytorch.native_batch_norm(f64(x), None, None, rm, rv, False, 0.1, 1e-5)[1].shape == (0,)
    o, m, r = tinytorch.native_layer_norm(f64(x), [5], None, None, 1e-5)
    assert m.shape == (4, 3, 1) and r.shape == (4, 3, 1)
    np.testing.assert_allclose(o.numpy(), (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5))
    np.testing.assert_allclose(tinytorch.layer_norm(f64(x), (5,), None, None, 1e-5, True).numpy(), o.numpy())
    inorm = tinytorch.instance_norm(f64(x), None, None, None, None, True, 0.1, 1e-5, False)
    np.testing.assert_allclose(inorm.numpy(), o.numpy(), atol=1e-10)
    g = tinytorch.group_norm(f64(x), 3, None, None, 1e-5, True)
    np.testing.assert_allclose(g.numpy(), o.numpy(), atol=1e-10)
    wt = np.arange(10.0).reshape(5, 2)
    e = tinytorch.embedding(f64(wt), tinytorch.tensor([[4, 0]]))
    np.testing.assert_allclose(e.numpy(), wt[[[4, 0]]])


def test_losses_take_int_reduction():
    x, y = f64([0.2, -1.0, 3.0]), f64([1.0, 0.0, 1.0])
    per = tinytorch.binary_cross_entropy_with_logits(x, y, None, None, 0).numpy()
    xv = x.numpy()
    ref = np.maximum(xv, 0) - xv * y.numpy() + np.log1p(np.exp(-np.abs(xv)))
    np.testing.assert_allclose(per, ref)
    assert np.isclose(tinytorch.binary_cross_entropy_with_logits(x, y, reduction=1).item(), ref.mean())
    assert np.isclose(tinytorch.binary_cross_entropy_with_logits(x, y, reduction=2).item(), ref.sum())
    lp, t = f64(np.log([0.2, 0.3, 0.5])), f64([0.1, 0.6, 0.3])
    kl = t.numpy() * (np.log(t.numpy()) - lp.numpy())
    assert np.isclose(tinytorch.kl_div(lp, t, 1).item(), kl.mean())
    np.testing.assert_allclose(tinytorch.kl_div(lp, t.log(), 0, log_target=True).numpy(), kl)
    with pytest.raises(TypeError, match="argument 'reduction' must be int, not str"):
        tinytorch.kl_div(lp, t, "mean")
    with pytest.raises(TypeError, match="must be int, not bool"):
        tinytorch.kl_div(lp, t, True)
    assert tinytorch.hinge_embedding_loss(x, f64([1.0, -1.0, 1.0]), 1.0, 0).shape == (3,)
    pn = tinytorch.poisson_nll_loss(x, y, True, False, 1e-8, 2)
    assert np.isclose(pn.item(), (np.exp(xv) - y.numpy() * xv).sum())
    assert gradcheck(lambda a: tinytorch.kl_div(a, t, 2), (f64([-1.0, -2.0, -0.5], True),))


def test_losses_default_and_unknown_reduction_do_not_reduce():
    """PyTorch's parser reads the declared default `reduction=Mean` of the torch.* loss bindings as 0, and the
    kernels reduce only for 1 and 2: called without it, or with 3, these losses come back per element."""
    x, y = f64([0.2, -1.0, 3.0]), f64([1.0, 0.0, 1.0])
    lp, t = f64(np.log([0.2, 0.3, 0.5])), f64([0.1, 0.6, 0.3])
    kl = t.numpy() * (np.log(t.numpy()) - lp.numpy())
    np.testing.assert_allclose(tinytorch.kl_div(lp, t).numpy(), kl)
    np.testing.assert_allclose(tinytorch.kl_div(lp, t, 3).numpy(), kl)
    assert tinytorch.binary_cross_entropy_with_logits(x, y).shape == (3,)
    assert tinytorch.hinge_embedding_loss(x, f64([1.0, -1.0, 1.0])).shape == (3,)
    assert tinytorch.margin_ranking_loss(x, y, f64([1.0, -1.0, 1.0])).shape == (3,)
    assert tinytorch.cosine_embedding_loss(f64(np.ones((2, 3))), f64(np.ones((2, 3))), f64([1.0, -1.0])).shape == (2,)
    assert tinytorch.triplet_margin_loss(f64(np.ones((2, 3))), f64(np.zeros((2, 3))), f64(np.ones((2, 3)))).shape == \
        (2,)


@needs_torch
def test_losses_default_reduction_matches_torch():
    import torch
    a, b = [-1.0, -2.0], [0.3, 0.7]
    for r in ((), (0,), (1,), (2,), (3,)):
        np.testing.assert_allclose(tinytorch.kl_div(tinytorch.tensor(a), tinytorch.tensor(b), *r).numpy(),
                                   torch.kl_div(torch.tensor(a), torch.tensor(b), *r).numpy(), rtol=1e-6)


def test_cells_match_reference():
    rs = np.random.RandomState(0)
    x, h, c = rs.randn(2, 3), rs.randn(2, 4), rs.randn(2, 4)
    wi, wh, bi, bh = rs.randn(16, 3), rs.randn(16, 4), rs.randn(16), rs.randn(16)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    gates = x @ wi.T + bi + h @ wh.T + bh
    i, f, g, o = np.split(gates, 4, -1)
    c2 = sig(f) * c + sig(i) * np.tanh(g)
    h2, cc = tinytorch.lstm_cell(f64(x), (f64(h), f64(c)), f64(wi), f64(wh), f64(bi), f64(bh))
    np.testing.assert_allclose(cc.numpy(), c2)
    np.testing.assert_allclose(h2.numpy(), sig(o) * np.tanh(c2))
    wi3, wh3 = rs.randn(12, 3), rs.randn(12, 4)
    gi, gh = np.split(x @ wi3.T, 3, -1), np.split(h @ wh3.T, 3, -1)
    r, z = sig(gi[0] + gh[0]), sig(gi[1] + gh[1])
    n = np.tanh(gi[2] + r * gh[2])
    np.testing.assert_allclose(tinytorch.gru_cell(f64(x), f64(h), f64(wi3), f64(wh3)).numpy(), (1 - z) * n + z * h)
    w4 = rs.randn(4, 3)
    wh4 = rs.randn(4, 4)
    np.testing.assert_allclose(tinytorch.rnn_relu_cell(f64(x), f64(h), f64(w4), f64(wh4)).numpy(),
                               np.maximum(x @ w4.T + h @ wh4.T, 0))
    assert gradcheck(lambda a, hh: tinytorch.gru_cell(a, hh, f64(wi3), f64(wh3)),
                     (f64(x[:1], True), f64(h[:1], True)))


# ------------------------------------------------------------------ integration and differentiation

def test_trapezoid_values_and_edges():
    y = np.array([[1.0, 2.0, 4.0], [0.0, 1.0, 3.0]])
    xs = np.array([0.0, 1.0, 3.0])
    np.testing.assert_allclose(tinytorch.trapezoid(f64(y)).numpy(), [4.5, 2.5])
    np.testing.assert_allclose(tinytorch.trapezoid(f64(y), f64(xs)).numpy(), [7.5, 4.5])
    np.testing.assert_allclose(tinytorch.trapezoid(f64(y), dx=2.0, dim=0).numpy(), (y[0] + y[1]))
    np.testing.assert_allclose(tinytorch.trapz(f64(y), f64(xs)).numpy(), [7.5, 4.5])
    np.testing.assert_allclose(tinytorch.cumulative_trapezoid(f64(y), f64(xs)).numpy(), [[1.5, 7.5], [0.5, 4.5]])
    assert tinytorch.trapezoid(tinytorch.tensor([1, 2, 4])).dtype == tinytorch.float32
    assert tinytorch.trapezoid(tinytorch.zeros(2, 0)).numpy().tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError, match="one `x` value for each sample"):
        tinytorch.trapezoid(f64(y), f64([0.0, 1.0]))
    yy, xx = f64(y, True), f64(np.tile(xs, (2, 1)), True)
    assert gradcheck(lambda a, b: tinytorch.trapezoid(a, b), (yy, xx))
    assert gradgradcheck(lambda a: tinytorch.cumulative_trapezoid(a, dx=0.5, dim=0), (yy,))


def test_gradient_matches_numpy():
    rs = np.random.RandomState(0)
    a = rs.randn(4, 5)
    for eo in (1, 2):
        for got, ref in zip(tinytorch.gradient(f64(a), spacing=2.0, edge_order=eo), np.gradient(a, 2.0, edge_order=eo)):
            np.testing.assert_allclose(got.numpy(), ref, atol=1e-12)
        cx = np.array([0.0, 0.5, 2.0, 2.5, 4.0])
        (got,) = tinytorch.gradient(f64(a), spacing=[f64(cx)], dim=-1, edge_order=eo)
        np.testing.assert_allclose(got.numpy(), np.gradient(a, cx, axis=-1, edge_order=eo), atol=1e-12)
    assert isinstance(tinytorch.gradient(f64(a), dim=0), tuple)
    with pytest.raises(RuntimeError, match="at least edge_order\\+1"):
        tinytorch.gradient(f64([1.0, 2.0]), edge_order=2)
    assert gradcheck(lambda t: tinytorch.gradient(t, spacing=[0.5, 2.0], edge_order=2), (f64(a[:3, :4], True),))


# ------------------------------------------------------------------ utilities

def test_unravel_scalar_range():
    r = tinytorch.unravel_index(tinytorch.tensor([7, -1, 4]), (2, 3))
    assert [t.numpy().tolist() for t in r] == [[0, 1, 1], [1, 2, 1]] and r[0].dtype == tinytorch.int64
    with pytest.raises(TypeError, match="integer dtype"):
        tinytorch.unravel_index(tinytorch.tensor(1.0), (2, 3))
    s = tinytorch.scalar_tensor(3)
    assert s.shape == () and s.dtype == tinytorch.float32 and s.item() == 3.0
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        r = tinytorch.range(1, 2, 0.5)
    assert r.numpy().tolist() == [1.0, 1.5, 2.0] and r.dtype == tinytorch.float32


def test_threads_predicates_typename():
    tinytorch.set_num_interop_threads(3)
    assert tinytorch.get_num_interop_threads() == 3
    with pytest.raises(RuntimeError, match="positive integer"):
        tinytorch.set_num_interop_threads(0)
    assert tinytorch.is_nonzero(tinytorch.tensor([2]))
    with pytest.raises(RuntimeError, match="more than one value"):
        tinytorch.is_nonzero(tinytorch.ones(2))
    assert tinytorch.is_same_size(tinytorch.ones(2, 3), tinytorch.zeros(2, 3))
    assert tinytorch.is_signed(tinytorch.ones(1)) and not tinytorch.is_signed(tinytorch.ones(1, dtype=tinytorch.uint8))
    assert not tinytorch.is_inference(tinytorch.ones(1))
    assert tinytorch.typename(1) == "int" and tinytorch.typename(np.ndarray) == "numpy.ndarray"
    x = tinytorch.ones(2, requires_grad=True) * 2
    assert not tinytorch.detach(x).requires_grad
    with pytest.raises(RuntimeError, match="deprecated since version 1.9"):
        tinytorch.matrix_rank(tinytorch.eye(3))


def test_buffers_and_dlpack_share_memory():
    buf = bytearray(np.arange(4, dtype=np.float32).tobytes())
    t = tinytorch.frombuffer(buf, dtype=tinytorch.float32, count=2, offset=4)
    assert t.numpy().tolist() == [1.0, 2.0]
    buf[4:8] = np.float32(9).tobytes()
    assert t.numpy()[0] == 9.0
    with pytest.raises(ValueError, match="must not be 0"):
        tinytorch.frombuffer(b"", dtype=tinytorch.float32)
    a = tinytorch.arange(3.0)
    b = tinytorch.from_dlpack(tinytorch.to_dlpack(a))
    assert np.shares_memory(a.numpy(), b.numpy()) and b.numpy().tolist() == [0.0, 1.0, 2.0]
    assert tinytorch.from_dlpack(np.arange(2.0)).numpy().tolist() == [0.0, 1.0]


def test_poisson_binomial_seeded():
    tinytorch.manual_seed(0)
    p = tinytorch.poisson(tinytorch.full((2000,), 4.0))
    tinytorch.manual_seed(0)
    assert np.array_equal(p.numpy(), tinytorch.poisson(tinytorch.full((2000,), 4.0)).numpy())
    assert p.dtype == tinytorch.float32 and abs(p.numpy().mean() - 4.0) < 0.2
    b = tinytorch.binomial(tinytorch.full((2000,), 10.0), tinytorch.full((2000,), 0.3))
    assert abs(b.numpy().mean() - 3.0) < 0.15 and b.numpy().max() <= 10
    with pytest.raises(RuntimeError, match="non-negative"):
        tinytorch.poisson(tinytorch.tensor([-1.0]))


def test_set_printoptions():
    from tinytorch import _tensor_str as ts
    try:
        tinytorch.set_printoptions(precision=2)
        assert "1.23" in repr(tinytorch.tensor([1.23456])) and "1.235" not in repr(tinytorch.tensor([1.23456]))
        tinytorch.set_printoptions(threshold=5, edgeitems=1)
        assert "..." in repr(tinytorch.arange(10))
    finally:
        tinytorch.set_printoptions(profile="default")
    assert ts.get_printoptions() == {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80,
                                     "sci_mode": None}


def test_norm_aliases():
    a = np.random.RandomState(0).randn(3, 4)
    assert np.isclose(tinytorch.nuclear_norm(f64(a)).item(), np.linalg.svd(a, compute_uv=False).sum())
    assert np.isclose(tinytorch.frobenius_norm(f64(a), (0, 1)).item(), np.linalg.norm(a))
    np.testing.assert_allclose(tinytorch.ger(f64([1.0, 2.0]), f64([3.0, 4.0, 5.0])).numpy(), np.outer([1, 2], [3, 4, 5]))
    np.testing.assert_allclose(tinytorch.msort(f64(a)).numpy(), np.sort(a, 0))
    assert [p.shape[1] for p in tinytorch.split_with_sizes(f64(a), [1, 3], 1)] == [1, 3]


def test_scatters_values_grads_errors():
    rs = np.random.RandomState(0)
    a = rs.randn(3, 4)
    out = tinytorch.select_scatter(f64(a), f64([7.0, 8.0, 9.0]), 1, -1).numpy()
    ref = a.copy()
    ref[:, -1] = [7, 8, 9]
    np.testing.assert_allclose(out, ref)
    out = tinytorch.slice_scatter(f64(a), f64(np.zeros((3, 2))), 1, 0, None, 2).numpy()
    ref = a.copy()
    ref[:, ::2] = 0
    np.testing.assert_allclose(out, ref)
    out = tinytorch.diagonal_scatter(f64(a), f64([1.0, 2.0, 3.0]), 1).numpy()
    ref = a.copy()
    ref[[0, 1, 2], [1, 2, 3]] = [1, 2, 3]
    np.testing.assert_allclose(out, ref)
    with pytest.raises(RuntimeError, match="expected src to have a size equal to the slice of self"):
        tinytorch.select_scatter(f64(a), f64([1.0]), 0, 0)
    x, s3, s4 = f64(a, True), f64(rs.randn(3), True), f64(rs.randn(4), True)
    assert gradcheck(lambda x, s: tinytorch.select_scatter(x, s, 0, 1), (x, s4))
    assert gradgradcheck(lambda x, s: tinytorch.diagonal_scatter(x, s, 0, 1, 0), (x, s3))
    assert gradcheck(lambda x, s: tinytorch.slice_scatter(x, s, 0, 1, 3), (x, f64(rs.randn(2, 4), True)))


# ------------------------------------------------------------------ the same calls in PyTorch

@needs_torch
def test_against_torch():
    import torch
    rs = np.random.RandomState(0)
    a = rs.randn(3, 3, 4)
    T, t = torch.tensor(a), f64(a)
    for name in ("trapezoid", "cumulative_trapezoid"):
        np.testing.assert_allclose(getattr(tinytorch, name)(t, dim=1).numpy(), getattr(torch, name)(T, dim=1).numpy())
    for eo in (1, 2):
        for got, ref in zip(tinytorch.gradient(t, spacing=[1.0, 2.0, 0.5], edge_order=eo),
                            torch.gradient(T, spacing=[1.0, 2.0, 0.5], edge_order=eo)):
            np.testing.assert_allclose(got.numpy(), ref.numpy(), atol=1e-12)
    idx = [5, -3, 23, 30]
    for got, ref in zip(tinytorch.unravel_index(tinytorch.tensor(idx), (2, 3, 4)),
                        torch.unravel_index(torch.tensor(idx), (2, 3, 4))):
        assert got.numpy().tolist() == ref.tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert tinytorch.range(0, 1, 0.25).numpy().tolist() == torch.range(0, 1, 0.25).tolist()
    assert str(tinytorch.scalar_tensor(2).dtype).split(".")[-1] == str(torch.scalar_tensor(2).dtype).split(".")[-1]
    src = rs.randn(3, 3)
    for fn, args in (("diagonal_scatter", (0, 0, 2)), ("diagonal_scatter", (-1, 2, 1))):
        Tp, tp = torch.tensor(a), f64(a)
        s = rs.randn(*Tp.diagonal(*args).shape)
        np.testing.assert_allclose(getattr(tinytorch, fn)(tp, f64(s), *args).numpy(),
                                   getattr(torch, fn)(Tp, torch.tensor(s), *args).numpy())
    np.testing.assert_allclose(tinytorch.slice_scatter(t, f64(src[:, :, None].repeat(2, 2)), 2, 1, 4, 2).numpy(),
                               torch.slice_scatter(T, torch.tensor(src[:, :, None].repeat(2, 2)), 2, 1, 4, 2).numpy())
    lp, tg = rs.randn(5), rs.rand(5)
    for red in (0, 1, 2):
        np.testing.assert_allclose(tinytorch.kl_div(f64(lp), f64(tg), red).numpy(),
                                   torch.kl_div(torch.tensor(lp), torch.tensor(tg), red).numpy())
        np.testing.assert_allclose(
            tinytorch.margin_ranking_loss(f64(lp), f64(tg), f64(np.sign(lp)), 0.1, red).numpy(),
            torch.margin_ranking_loss(torch.tensor(lp), torch.tensor(tg), torch.tensor(np.sign(lp)), 0.1, red).numpy())
    x, h = rs.randn(2, 3), rs.randn(2, 4)
    wi, wh, bi, bh = rs.randn(16, 3), rs.randn(16, 4), rs.randn(16), rs.randn(16)
    for got, ref in zip(tinytorch.lstm_cell(f64(x), (f64(h), f64(h)), f64(wi), f64(wh), f64(bi), f64(bh)),
                        torch.lstm_cell(*map(torch.tensor, (x,)), tuple(map(torch.tensor, (h, h))),
                                        *map(torch.tensor, (wi, wh, bi, bh)))):
        np.testing.assert_allclose(got.numpy(), ref.numpy(), atol=1e-12)
    np.testing.assert_allclose(tinytorch.rnn_tanh_cell(f64(x), f64(h), f64(wi[:4]), f64(wh[:4])).numpy(),
                               torch.rnn_tanh_cell(torch.tensor(x), torch.tensor(h), torch.tensor(wi[:4]),
                                                   torch.tensor(wh[:4])).numpy(), atol=1e-12)
    np.testing.assert_allclose(tinytorch.constant_pad_nd(t, [1, -1], 2.5).numpy(),
                               torch.constant_pad_nd(T, [1, -1], 2.5).numpy())
    o, m, r = tinytorch.native_layer_norm(t, [4], None, None, 1e-5)
    O, M, R = torch.native_layer_norm(T, [4], None, None, 1e-5)
    for g, e in ((o, O), (m, M), (r, R)):
        assert g.shape == tuple(e.shape)
        np.testing.assert_allclose(g.numpy(), e.numpy(), atol=1e-10)
    assert tinytorch.typename(np.ndarray) == torch.typename(np.ndarray)
    v, i = tinytorch.adaptive_max_pool1d(t, 2)
    V, I = torch.adaptive_max_pool1d(T, 2)
    np.testing.assert_allclose(v.numpy(), V.numpy())
    assert i.numpy().tolist() == I.tolist()
    w = rs.randn(6, 2)
    ids = [[0, 5, 2]]
    np.testing.assert_allclose(tinytorch.embedding(f64(w), tinytorch.tensor(ids)).numpy(),
                               torch.embedding(torch.tensor(w), torch.tensor(ids)).numpy())


# ------------------------------------------------------------------ review fixes

def test_aten_dropout_checks_p_first_then_rank():
    x = tinytorch.ones(3)
    assert tinytorch.feature_dropout(x, 0.5, False) is x  # not training: the rank is not checked
    assert tinytorch.feature_alpha_dropout(x, 0.5, False) is x
    assert tinytorch.feature_dropout(tinytorch.ones(0), 0.5, True).shape == (0,)
    for fn in (tinytorch.feature_dropout, tinytorch.feature_alpha_dropout, tinytorch.dropout, tinytorch.alpha_dropout,
               tinytorch.dropout_, tinytorch.feature_dropout_):
        with pytest.raises(RuntimeError, match="dropout probability has to be between 0 and 1, but got 1.5"):
            fn(tinytorch.ones(2, 3), 1.5, False)
    with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions in the input"):
        tinytorch.feature_alpha_dropout(x, 0.5, True)
    np.testing.assert_array_equal(tinytorch.feature_dropout(tinytorch.ones(2, 3), 1.0, True).numpy(), np.zeros((2, 3)))


def test_native_dropout_train_none_and_grad():
    tinytorch.manual_seed(0)
    out, mask = tinytorch.native_dropout(tinytorch.ones(400), 0.5, None)  # None means training
    assert mask.dtype == tinytorch.bool and 100 < int(mask.sum()) < 300
    np.testing.assert_array_equal(out.numpy(), mask.numpy() * 2.0)
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\], but got p=-0.5"):
        tinytorch.native_dropout(tinytorch.ones(3), 1.5, True)
    x = f64([1.0, 2.0, 3.0], True)
    o, m = tinytorch.native_dropout(x, 0.5, True)
    assert o.grad_fn.name() == "NativeDropoutBackward0"
    o.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), m.numpy() * 2.0)
    e, em = tinytorch.native_dropout(x, 0.5, False)
    assert e is not x and e.grad_fn.name() == "NativeDropoutBackward0" and bool(em.all())


def test_unravel_index_shapes_and_errors():
    r = tinytorch.unravel_index(tinytorch.tensor(5), (2, 4))
    assert [t.shape for t in r] == [(), ()] and [t.item() for t in r] == [1, 1]
    r = tinytorch.unravel_index(tinytorch.tensor([[1, 7]]), (2, 4))
    assert [t.tolist() for t in r] == [[[0, 1]], [[1, 3]]] and r[0].dtype == tinytorch.int64
    assert tinytorch.unravel_index(tinytorch.tensor([3], dtype=tinytorch.int32), 4)[0].dtype == tinytorch.int64
    assert tinytorch.unravel_index(tinytorch.tensor([1]), ()) == ()
    with pytest.raises(TypeError, match="expected 'shape' sequence to only contain ints"):
        tinytorch.unravel_index(tinytorch.tensor([1]), (2.0,))
    with pytest.raises(TypeError, match="expected 'shape' to be int or sequence of ints"):
        tinytorch.unravel_index(tinytorch.tensor([1]), 2.0)
    with pytest.raises(TypeError, match="expected 'indices' to be integer dtype"):
        tinytorch.unravel_index(tinytorch.tensor([True]), (2,))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        tinytorch.unravel_index(tinytorch.tensor([1]), (2, 0))


@pytest.mark.filterwarnings("ignore:torch.range is deprecated")
def test_review_messages_and_signatures():
    with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent with step sign"):
        tinytorch.range(4, 1)
    with pytest.raises(TypeError):
        tinytorch.frobenius_norm(tinytorch.ones(2, 3))  # dim is required, as in PyTorch
    with pytest.raises(RuntimeError, match=r"expected src to have a size equal to the slice of self. src size = \[3\], "
                                           r"slice size = \[2\]"):
        tinytorch.diagonal_scatter(tinytorch.zeros(3, 3), tinytorch.ones(3), 1)
    x = tinytorch.ones(2)
    assert tinytorch.resize_as_(x, tinytorch.ones(2, 2)) is x and x.shape == (2, 2)
