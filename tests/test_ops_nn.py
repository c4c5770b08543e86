"""nn ops: values against NumPy references and PyTorch (same inputs), gradcheck/gradgradcheck in float64,
PyTorch's error messages, and the functional API's signatures."""
import math

import numpy as np
import pytest

import tinytorch
import tinytorch.nn.functional as F
from tinytorch._ops.nn import erf, erf_array
from tinytorch.autograd import gradcheck, gradgradcheck


def _np(t):
    return np.asarray(t.detach().cpu())


def _leaf(shape, device, seed=0, low=None):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) if low is None else rng.uniform(low, 1 - low, shape)
    return tinytorch.tensor(a, dtype=tinytorch.float64, device=device, requires_grad=True)


def _long(values, device):
    return tinytorch.tensor(values, dtype=tinytorch.int64, device=device)


def _torch(t):
    torch = pytest.importorskip("torch")
    return torch.tensor(_np(t), requires_grad=t.requires_grad) if t.dtype.is_floating_point else \
        torch.tensor(_np(t))


# ------------------------------------------------------------------ erf


def test_erf_accuracy_float64():
    xs = np.concatenate([np.linspace(-7, 7, 20001), np.geomspace(1e-300, 6, 500), [0.0, -0.0, 30.0, -30.0]])
    ref = np.array([math.erf(v) for v in xs])
    got = erf_array(xs)
    rel = np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300)
    assert rel.max() < 1e-15
    assert np.isnan(erf_array(np.array([np.nan])))[0]
    np.testing.assert_array_equal(erf_array(np.array([np.inf, -np.inf])), [1.0, -1.0])


def test_erf_float32_and_gradient():
    xs = np.linspace(-5, 5, 1001).astype(np.float32)
    got = erf_array(xs)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [math.erf(v) for v in xs.astype(np.float64)], atol=5e-7)
    x = _leaf((6,), "cpu")
    assert gradcheck(erf, (x,))
    assert gradgradcheck(erf, (x,))


# ------------------------------------------------------------------ softmax family


def _ref_softmax(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_log_softmax(dim, device):
    x = _leaf((2, 3, 4), device)
    np.testing.assert_allclose(_np(F.softmax(x, dim)), _ref_softmax(_np(x), dim), rtol=1e-12)
    np.testing.assert_allclose(_np(F.log_softmax(x, dim)), np.log(_ref_softmax(_np(x), dim)), rtol=1e-12)
    np.testing.assert_allclose(_np(x.softmax(dim)), _np(tinytorch.softmax(x, dim)))
    for fn in (F.softmax, F.log_softmax, F.softmin):
        assert gradcheck(lambda a: fn(a, dim), (x,))
        assert gradgradcheck(lambda a: fn(a, dim), (x,))


def test_softmax_is_stable_and_keeps_dtype(device):
    x = tinytorch.tensor([[1000.0, 1000.0], [-1000.0, 0.0]], device=device)
    y = F.softmax(x, dim=1)
    assert y.dtype == tinytorch.float32
    np.testing.assert_allclose(_np(y), [[0.5, 0.5], [0.0, 1.0]])
    np.testing.assert_allclose(_np(F.log_softmax(x, 1)), [[-math.log(2), -math.log(2)], [-1000.0, 0.0]])
    assert F.softmax(x, 1, dtype=tinytorch.float64).dtype == tinytorch.float64
    half = F.softmax(x.to(tinytorch.float16), 1)
    assert half.dtype == tinytorch.float16


def test_softmax_implicit_dim_warns():
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        F.softmax(tinytorch.ones(2, 3))


def test_softmax_integer_input_errors():
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        F.softmax(tinytorch.tensor([1, 2]), 0)


def test_softmax_matches_torch():
    torch = pytest.importorskip("torch")
    x = _leaf((3, 5), "cpu")
    g = np.random.default_rng(1).standard_normal((3, 5))
    tx = _torch(x)
    for ours, theirs in ((F.softmax, torch.softmax), (F.log_softmax, torch.log_softmax)):
        x.grad = None
        tx.grad = None
        ours(x, 1).backward(tinytorch.tensor(g))
        theirs(tx, 1).backward(torch.tensor(g))
        np.testing.assert_allclose(_np(x.grad), tx.grad.numpy(), rtol=1e-10, atol=1e-14)


# ------------------------------------------------------------------ cross_entropy / nll_loss

CE_KWARGS = [{}, {"weight": True}, {"label_smoothing": 0.2}, {"weight": True, "label_smoothing": 0.3},
             {"ignore_index": 0}, {"ignore_index": 0, "label_smoothing": 0.1},
             {"ignore_index": 0, "weight": True, "label_smoothing": 0.1}]


def _kw(kw, device):
    out = dict(kw)
    if out.get("weight"):
        out["weight"] = tinytorch.tensor([0.5, 1.0, 2.0, 0.3, 1.5], dtype=tinytorch.float64, device=device)
    return out


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("kw", CE_KWARGS)
def test_cross_entropy_gradcheck(reduction, kw, device):
    x = _leaf((3, 5), device)
    t = _long([1, 0, 4], device)
    kwargs = _kw(kw, device)

    def f(a):
        return F.cross_entropy(a, t, reduction=reduction, **kwargs)
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("kw", CE_KWARGS)
def test_cross_entropy_and_nll_match_torch(reduction, kw):
    torch = pytest.importorskip("torch")
    x = _leaf((4, 5), "cpu")
    t = _long([1, 0, 4, 0], "cpu")
    kwargs = _kw(kw, "cpu")
    tkw = {k: (_torch(v) if isinstance(v, tinytorch.Tensor) else v) for k, v in kwargs.items()}
    tx = _torch(x)
    ours = F.cross_entropy(x, t, reduction=reduction, **kwargs)
    theirs = torch.nn.functional.cross_entropy(tx, _torch(t), reduction=reduction, **tkw)
    np.testing.assert_allclose(_np(ours), theirs.detach().numpy(), rtol=1e-12)
    ours.sum().backward()
    theirs.sum().backward()
    np.testing.assert_allclose(_np(x.grad), tx.grad.numpy(), rtol=1e-10, atol=1e-14)
    nkw = {k: v for k, v in kwargs.items() if k != "label_smoothing"}
    tnkw = {k: v for k, v in tkw.items() if k != "label_smoothing"}
    np.testing.assert_allclose(_np(F.nll_loss(x, t, reduction=reduction, **nkw)),
                               torch.nn.functional.nll_loss(tx, _torch(t), reduction=reduction, **tnkw)
                               .detach().numpy(), rtol=1e-12)


def test_cross_entropy_spatial_and_unbatched(device):
    torch = pytest.importorskip("torch")
    x = _leaf((2, 3, 4), device)
    t = _long([[0, 1, 2, 1], [2, 2, 0, 1]], device)
    for red in ("mean", "none"):
        f = lambda a: F.cross_entropy(a, t, reduction=red, label_smoothing=0.1)  # noqa: E731
        assert gradcheck(f, (x,))
        assert gradgradcheck(f, (x,))
        ref = torch.nn.functional.cross_entropy(_torch(x), _torch(t), reduction=red, label_smoothing=0.1)
        np.testing.assert_allclose(_np(f(x)), ref.detach().numpy(), rtol=1e-12)
    v = _leaf((5,), device)
    t0 = _long(3, device)
    assert gradcheck(lambda a: F.cross_entropy(a, t0), (v,))
    ref = torch.nn.functional.cross_entropy(_torch(v), _torch(t0))
    np.testing.assert_allclose(_np(F.cross_entropy(v, t0)), ref.detach().numpy(), rtol=1e-12)
    assert gradcheck(lambda a: F.nll_loss(a, t, reduction="none"), (x,))


def test_cross_entropy_probability_targets(device):
    torch = pytest.importorskip("torch")
    x = _leaf((3, 5), device)
    p = F.softmax(_leaf((3, 5), device, seed=1), 1).detach().requires_grad_()
    w = tinytorch.tensor([0.5, 1.0, 2.0, 0.3, 1.5], dtype=tinytorch.float64, device=device)
    for red in ("mean", "sum", "none"):
        for kw in ({}, {"weight": w, "label_smoothing": 0.1}):
            f = lambda a, b: F.cross_entropy(a, b, reduction=red, **kw)  # noqa: E731
            assert gradcheck(f, (x, p))
            tkw = {k: (_torch(v) if isinstance(v, tinytorch.Tensor) else v) for k, v in kw.items()}
            ref = torch.nn.functional.cross_entropy(_torch(x), _torch(p), reduction=red, **tkw)
            np.testing.assert_allclose(_np(f(x, p)), ref.detach().numpy(), rtol=1e-12)


def test_cross_entropy_all_ignored_mean_is_nan():
    x = tinytorch.randn(2, 3)
    assert math.isnan(float(F.cross_entropy(x, tinytorch.tensor([-100, -100]))))


def test_cross_entropy_errors():
    x = tinytorch.randn(3, 5)
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target batch_size \(2\)\."):
        F.cross_entropy(x, tinytorch.tensor([1, 2]))
    with pytest.raises(IndexError, match="Target 7 is out of bounds."):
        F.cross_entropy(x, tinytorch.tensor([1, 7, 2]))
    with pytest.raises(RuntimeError, match="^expected target dtype to be Long or Byte, but got Float$"):
        F.cross_entropy(x, tinytorch.tensor([1.0, 2.0, 0.0]))
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 5 classes or no classes"):
        F.cross_entropy(x, tinytorch.tensor([1, 2, 0]), weight=tinytorch.ones(3))
    with pytest.raises(RuntimeError, match=r"Expected target size \[2, 4\], got \[2, 3\]"):
        F.cross_entropy(tinytorch.randn(2, 5, 4), tinytorch.zeros(2, 3, dtype=tinytorch.int64))
    with pytest.raises(ValueError, match="bogus is not a valid value for reduction"):
        F.cross_entropy(x, tinytorch.tensor([1, 2, 0]), reduction="bogus")


# ------------------------------------------------------------------ layer_norm, linear


def test_layer_norm(device):
    x = _leaf((2, 3, 4), device)
    w = _leaf((3, 4), device, seed=1)
    b = _leaf((3, 4), device, seed=2)
    a = _np(x)
    mu = a.mean(axis=(1, 2), keepdims=True)
    ref = (a - mu) / np.sqrt(a.var(axis=(1, 2), keepdims=True) + 1e-5) * _np(w) + _np(b)
    np.testing.assert_allclose(_np(F.layer_norm(x, (3, 4), w, b)), ref, rtol=1e-10, atol=1e-12)
    for args in ((x, w, b), (x, w, None), (x, None, b), (x, None, None)):
        f = lambda a, ww, bb: F.layer_norm(a, (3, 4), ww, bb, eps=1e-3)  # noqa: E731
        assert gradcheck(f, args)
        assert gradgradcheck(f, args)
    v = _leaf((3, 4), device, seed=3)
    assert gradcheck(lambda a: F.layer_norm(a, 4), (v,))


def test_layer_norm_matches_torch_and_errors():
    torch = pytest.importorskip("torch")
    x, w, b = _leaf((5, 6), "cpu"), _leaf((6,), "cpu", 1), _leaf((6,), "cpu", 2)
    tx, tw, tb = _torch(x), _torch(w), _torch(b)
    F.layer_norm(x, (6,), w, b).pow(2).sum().backward()
    torch.nn.functional.layer_norm(tx, (6,), tw, tb).pow(2).sum().backward()
    for ours, theirs in ((x, tx), (w, tw), (b, tb)):
        np.testing.assert_allclose(_np(ours.grad), theirs.grad.numpy(), rtol=1e-9, atol=1e-12)
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[4\], expected input with shape \[\*, 4\], "
                                           r"but got input of size\[2, 3\]"):
        F.layer_norm(tinytorch.randn(2, 3), (4,))


def test_linear(device):
    x = _leaf((2, 3, 5), device)
    w = _leaf((4, 5), device, seed=1)
    b = _leaf((4,), device, seed=2)
    np.testing.assert_allclose(_np(F.linear(x, w, b)), _np(x) @ _np(w).T + _np(b), rtol=1e-12)
    assert gradcheck(F.linear, (x, w, b))
    assert gradgradcheck(F.linear, (x, w, b))
    assert gradcheck(lambda a, ww: F.linear(a, ww), (x, w))
    v = _leaf((5,), device, seed=3)
    assert gradcheck(F.linear, (v, w, b))
    assert F.linear(v, w).shape == (4,)
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(6x5 and 3x4\)"):
        F.linear(x, tinytorch.randn(4, 3, dtype=tinytorch.float64))
    # PyTorch's wording: mm's (after the shapes) without a bias, addmm's (before them) with one
    with pytest.raises(RuntimeError, match="^expected m1 and m2 to have the same dtype, but got: double != float$"):
        F.linear(x, tinytorch.randn(4, 5))
    with pytest.raises(RuntimeError, match="^mat1 and mat2 must have the same dtype, but got Double and Float$"):
        F.linear(x, tinytorch.randn(4, 5), tinytorch.randn(4))
    with pytest.raises(RuntimeError, match="^self and mat2 must have the same dtype, but got Float and Double$"):
        F.linear(x, w, tinytorch.randn(4))


# ------------------------------------------------------------------ activations


def test_gelu(device):
    x = tinytorch.tensor(np.linspace(-6, 6, 13), dtype=tinytorch.float64, device=device, requires_grad=True)
    a = _np(x)
    exact = 0.5 * a * (1 + np.array([math.erf(v / math.sqrt(2)) for v in a]))
    np.testing.assert_allclose(_np(F.gelu(x)), exact, rtol=1e-14, atol=1e-300)
    approx = 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))
    np.testing.assert_allclose(_np(F.gelu(x, approximate="tanh")), approx, rtol=1e-14, atol=1e-15)
    for ap in ("none", "tanh"):
        assert gradcheck(lambda t: F.gelu(t, approximate=ap), (x,))
        assert gradgradcheck(lambda t: F.gelu(t, approximate=ap), (x,))
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh."):
        F.gelu(x, approximate="fast")


ACTIVATIONS = [
    ("silu", lambda F_: F_.silu), ("leaky_relu", lambda F_: lambda t: F_.leaky_relu(t, 0.1)),
    ("elu", lambda F_: lambda t: F_.elu(t, 0.7)), ("softplus", lambda F_: lambda t: F_.softplus(t, 2.0, 1.0)),
    ("logsigmoid", lambda F_: F_.logsigmoid), ("relu", lambda F_: F_.relu), ("tanh", lambda F_: F_.tanh),
    ("sigmoid", lambda F_: F_.sigmoid), ("relu6", lambda F_: F_.relu6),
    ("hardtanh", lambda F_: lambda t: F_.hardtanh(t, -0.5, 0.5)),
]


@pytest.mark.parametrize("name,get", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activations(name, get, device):
    torch = pytest.importorskip("torch")
    x = _leaf((3, 4), device) * 3
    x = x.detach().requires_grad_()
    fn = get(F)
    ref = get(torch.nn.functional)(_torch(x))
    np.testing.assert_allclose(_np(fn(x)), ref.detach().numpy(), rtol=1e-12, atol=1e-15)
    assert gradcheck(fn, (x,))
    if name not in ("relu", "relu6", "hardtanh"):
        assert gradgradcheck(fn, (x,))


def test_inplace_activations(device):
    x = tinytorch.tensor([-1.0, 2.0], device=device)
    F.leaky_relu(x, 0.5, inplace=True)
    assert x.tolist() == [-0.5, 2.0]
    F.relu(x, inplace=True)
    assert x.tolist() == [0.0, 2.0]
    assert x._version == 2


# ------------------------------------------------------------------ dropout


def test_dropout(device):
    x = tinytorch.ones(20000, device=device)
    y = F.dropout(x, 0.25)
    kept = _np(y) != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(_np(y)[kept], 1 / 0.75)
    assert F.dropout(x, 0.5, training=False) is x
    assert float(F.dropout(x, 1.0).sum()) == 0.0
    tinytorch.manual_seed(3)
    a = F.dropout(x, 0.5)
    tinytorch.manual_seed(3)
    b = F.dropout(x, 0.5)
    np.testing.assert_array_equal(_np(a), _np(b))
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        F.dropout(x, 1.5)


def test_dropout_gradient_uses_the_same_mask(device):
    x = _leaf((50,), device)
    y = F.dropout(x, 0.4)
    y.sum().backward()
    mask = (_np(y) != 0) / 0.6
    np.testing.assert_allclose(_np(x.grad), mask)
    z = tinytorch.ones(10, device=device)
    F.dropout(z, 0.5, inplace=True)
    assert z._version == 1


# ------------------------------------------------------------------ regression and binary losses


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(reduction, device):
    torch = pytest.importorskip("torch")
    x, y = _leaf((3, 4), device), _leaf((3, 4), device, seed=1)
    for name, kw in (("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {"beta": 0.5}),
                     ("smooth_l1_loss", {"beta": 0.0}), ("huber_loss", {"delta": 0.7})):
        fn = getattr(F, name)
        f = lambda a, b: fn(a, b, reduction=reduction, **kw)  # noqa: E731
        ref = getattr(torch.nn.functional, name)(_torch(x), _torch(y), reduction=reduction, **kw)
        np.testing.assert_allclose(_np(f(x, y)), ref.detach().numpy(), rtol=1e-12)
        assert gradcheck(f, (x, y))
    assert gradgradcheck(lambda a, b: F.mse_loss(a, b, reduction=reduction), (x, y))


def test_binary_cross_entropy(device):
    torch = pytest.importorskip("torch")
    p = _leaf((3, 4), device, low=0.05)
    t = _leaf((3, 4), device, seed=1, low=0.0)
    w = tinytorch.rand(4, dtype=tinytorch.float64, device=device)
    for red in ("mean", "sum", "none"):
        f = lambda a, b: F.binary_cross_entropy(a, b, weight=w, reduction=red)  # noqa: E731
        ref = torch.nn.functional.binary_cross_entropy(_torch(p), _torch(t), weight=_torch(w), reduction=red)
        np.testing.assert_allclose(_np(f(p, t)), ref.detach().numpy(), rtol=1e-12)
        assert gradcheck(f, (p, t))
    zero_one = tinytorch.tensor([0.0, 1.0])
    assert float(F.binary_cross_entropy(zero_one, tinytorch.tensor([1.0, 0.0]))) == 100.0
    with pytest.raises(ValueError, match="Using a target size"):
        F.binary_cross_entropy(p, t[0])
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(tinytorch.tensor([1.5]), tinytorch.tensor([1.0]))


def test_binary_cross_entropy_with_logits(device):
    torch = pytest.importorskip("torch")
    x = _leaf((3, 4), device) * 10
    x = x.detach().requires_grad_()
    t = _leaf((3, 4), device, seed=1, low=0.0)
    pw = tinytorch.tensor([0.5, 1.0, 2.0, 3.0], dtype=tinytorch.float64, device=device)
    for red in ("mean", "none"):
        for kw in ({}, {"pos_weight": pw}, {"weight": pw}):
            f = lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=red, **kw)  # noqa: E731
            tkw = {k: _torch(v) for k, v in kw.items()}
            ref = torch.nn.functional.binary_cross_entropy_with_logits(_torch(x), _torch(t), reduction=red, **tkw)
            np.testing.assert_allclose(_np(f(x, t)), ref.detach().numpy(), rtol=1e-12)
            assert gradcheck(f, (x, t))
            assert gradgradcheck(f, (x, t))
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy_with_logits(x, t[0])


# ------------------------------------------------------------------ normalize, pad


def test_normalize(device):
    x = _leaf((3, 4), device)
    a = _np(x)
    np.testing.assert_allclose(_np(F.normalize(x)), a / np.linalg.norm(a, axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(_np(F.normalize(x, p=1.0, dim=0)), a / np.abs(a).sum(0, keepdims=True), rtol=1e-12)
    assert gradcheck(F.normalize, (x,))
    assert gradgradcheck(F.normalize, (x,))
    assert float(F.normalize(tinytorch.zeros(1, 3)).abs().sum()) == 0.0


def test_pad(device):
    torch = pytest.importorskip("torch")
    x = _leaf((2, 3, 4), device)
    for pads, mode, value in (((1, 2), "constant", 0.0), ((1, -2, 2, 1), "constant", 3.0),
                              ((2, 1, 1, 0), "reflect", None), ((2, 3), "replicate", None),
                              ((1, 2, 2, 1), "circular", None), ((0, 0, 0, 0, 1, 1), "constant", -1.0)):
        kw = {} if value is None else {"value": value}
        ref = torch.nn.functional.pad(_torch(x), pads, mode=mode, **kw)
        np.testing.assert_array_equal(_np(F.pad(x, pads, mode=mode, **kw)), ref.detach().numpy())
        assert gradcheck(lambda a: F.pad(a, pads, mode=mode, **kw), (x,))
    assert gradgradcheck(lambda a: F.pad(a, (1, -1)), (x,))
    with pytest.raises(RuntimeError, match="Padding length must be divisible by 2"):
        F.pad(x, (1,))


# ------------------------------------------------------------------ attention


ATTN_CASES = [{}, {"is_causal": True}, {"mask": "bool"}, {"mask": "float"}, {"scale": 0.3}]


@pytest.mark.parametrize("case", ATTN_CASES, ids=["plain", "causal", "bool_mask", "float_mask", "scale"])
def test_scaled_dot_product_attention(case, device):
    torch = pytest.importorskip("torch")
    q, k, v = _leaf((1, 2, 3, 4), device), _leaf((1, 2, 5, 4), device, 1), _leaf((1, 2, 5, 3), device, 2)
    kw = dict(case)
    mask = kw.pop("mask", None)
    rng = np.random.default_rng(5)
    if mask == "bool":
        m = rng.random((3, 5)) > 0.3
        m[:, 0] = True
        kw["attn_mask"] = tinytorch.tensor(m, device=device)
    elif mask == "float":
        kw["attn_mask"] = tinytorch.tensor(rng.standard_normal((3, 5)), device=device)
    f = lambda a, b, c: F.scaled_dot_product_attention(a, b, c, **kw)  # noqa: E731
    tkw = {kk: (_torch(vv) if isinstance(vv, tinytorch.Tensor) else vv) for kk, vv in kw.items()}
    ref = torch.nn.functional.scaled_dot_product_attention(_torch(q), _torch(k), _torch(v), **tkw)
    np.testing.assert_allclose(_np(f(q, k, v)), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert gradcheck(f, (q, k, v))
    assert gradgradcheck(f, (q, k, v))


def test_attention_fully_masked_rows_are_zero_and_errors():
    q = tinytorch.randn(1, 2, 4)
    mask = tinytorch.tensor([[False, False], [True, True]])
    out = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    assert np.all(_np(out)[0, 0] == 0.0)
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when is_causal=True"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask, is_causal=True)


def test_attention_dropout_changes_output():
    q = tinytorch.randn(1, 4, 8)
    a = F.scaled_dot_product_attention(q, q, q)
    b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert a.shape == b.shape and not np.allclose(_np(a), _np(b))


# ------------------------------------------------------------------ functional API surface


def test_functional_surface():
    import inspect
    torch = pytest.importorskip("torch")
    for name in ("cross_entropy", "nll_loss", "layer_norm", "scaled_dot_product_attention", "linear", "gelu",
                 "dropout", "embedding", "one_hot", "mse_loss", "pad", "softmax", "log_softmax", "normalize",
                 "binary_cross_entropy_with_logits", "leaky_relu", "elu", "softplus", "silu", "smooth_l1_loss"):
        ours = list(inspect.signature(getattr(F, name)).parameters)
        theirs = getattr(torch.nn.functional, name)
        try:
            ref = list(inspect.signature(theirs).parameters)
        except (TypeError, ValueError):
            continue  # a C builtin without a Python signature
        assert ours[:len(ref)] == ref[:len(ours)], name


@pytest.mark.parametrize("dtype", [tinytorch.float16, tinytorch.bfloat16])
def test_half_precision_inputs_compute_in_float32(dtype):
    a = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    x = tinytorch.tensor(a).to(dtype).requires_grad_()
    ref = x.detach().to(tinytorch.float32)
    loss = F.cross_entropy(x, tinytorch.tensor([0, 1, 2, 3]), label_smoothing=0.1)
    loss.backward()
    assert loss.dtype == dtype and x.grad.dtype == dtype
    np.testing.assert_allclose(float(loss), float(F.cross_entropy(ref, tinytorch.tensor([0, 1, 2, 3]),
                                                                  label_smoothing=0.1)), rtol=1e-2)
    for out in (F.layer_norm(x, (6,)), F.gelu(x), F.softmax(x, -1), F.log_softmax(x, 0), F.silu(x)):
        assert out.dtype == dtype
    np.testing.assert_allclose(np.asarray(F.softmax(x, -1).detach().to(tinytorch.float32)),
                               np.asarray(F.softmax(ref, -1)), atol=1e-2)
