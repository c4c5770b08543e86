"""The one-pass activations and elementwise losses (csrc/kernels/activation.cpp), pow's special exponents and the
edge paddings: values against float64 NumPy references, gradients against analytic ones, gradcheck and
gradgradcheck through the kernels (MIN_SIZE lowered so that the full Jacobian stays small), and PyTorch's node
names and figures when torch is importable."""
import importlib.util

import numpy as np
import pytest

import tinytorch
from tinytorch._ops import _cpu

F = tinytorch.nn.functional
HAS_TORCH = importlib.util.find_spec("torch") is not None
TOL = {np.float32: 2e-6, np.float64: 1e-13}


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


# name, call, forward reference, derivative reference (float64)
ACTIVATIONS = [
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), lambda v: np.where(v > 0, v, 0.2 * v),
     lambda v: np.where(v > 0, 1.0, 0.2)),
    ("elu", lambda x: F.elu(x, 1.3), lambda v: np.where(v > 0, v, 1.3 * np.expm1(np.minimum(v, 0))),
     lambda v: np.where(v > 0, 1.0, 1.3 * np.exp(np.minimum(v, 0)))),
    ("softplus", lambda x: F.softplus(x, 2.0, 15.0),
     lambda v: np.where(2 * v > 15, v, np.logaddexp(0, 2 * v) / 2), lambda v: np.where(2 * v > 15, 1.0, _sigmoid(2 * v))),
    ("logsigmoid", F.logsigmoid, lambda v: -np.logaddexp(0, -v), lambda v: _sigmoid(-v)),
]
NODES = {"leaky_relu": "LeakyReluBackward0", "elu": "EluBackward0", "softplus": "SoftplusBackward0",
         "logsigmoid": "LogSigmoidBackward0"}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, call, ref, dref", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activations_in_one_pass_match_float64(dtype, name, call, ref, dref):
    rng = np.random.default_rng(0)
    v = (rng.standard_normal(300_000) * 8).astype(dtype)
    v[:4] = [0.0, -0.0, 30.0, -30.0]
    x = tinytorch.from_numpy(v.copy()).requires_grad_()
    y = call(x)
    assert y.grad_fn.name() == NODES[name] and y.dtype == x.dtype
    v64 = v.astype(np.float64)
    np.testing.assert_allclose(y.detach().numpy(), ref(v64).astype(dtype), rtol=4 * TOL[dtype], atol=4 * TOL[dtype])
    g = rng.standard_normal(v.shape).astype(dtype)
    y.backward(tinytorch.from_numpy(g))
    np.testing.assert_allclose(x.grad.numpy(), (g * dref(v64)).astype(dtype), rtol=4 * TOL[dtype], atol=4 * TOL[dtype])


def test_kernel_activations_gradcheck_and_double_backward(monkeypatch):
    monkeypatch.setattr(_cpu, "MIN_SIZE", 1)
    x = tinytorch.tensor(np.random.default_rng(1).standard_normal((5, 6)) * 3, requires_grad=True)
    for name, call, _, _ in ACTIVATIONS:
        assert call(x).grad_fn.name() == NODES[name]
        assert tinytorch.autograd.gradcheck(call, (x,)), name
        assert tinytorch.autograd.gradgradcheck(call, (x,)), name
    y = x.detach().clone()
    F.leaky_relu(y, 0.1, inplace=True)
    np.testing.assert_array_equal(y.numpy(), np.where(x.detach().numpy() > 0, x.detach().numpy(),
                                                      0.1 * x.detach().numpy()))


LOSSES = [
    ("binary_cross_entropy_with_logits", {}, "BinaryCrossEntropyWithLogitsBackward0",
     lambda v, t: np.maximum(v, 0) - v * t + np.log1p(np.exp(-np.abs(v))), lambda v, t: _sigmoid(v) - t, lambda v, t: -v),
    ("smooth_l1_loss", {"beta": 0.5}, "SmoothL1LossBackward0",
     lambda v, t: np.where(np.abs(v - t) < 0.5, (v - t) ** 2, np.abs(v - t) - 0.25),
     lambda v, t: np.clip((v - t) / 0.5, -1, 1), lambda v, t: -np.clip((v - t) / 0.5, -1, 1)),
    ("huber_loss", {"delta": 0.7}, "HuberLossBackward0",
     lambda v, t: np.where(np.abs(v - t) < 0.7, 0.5 * (v - t) ** 2, 0.7 * (np.abs(v - t) - 0.35)),
     lambda v, t: np.clip(v - t, -0.7, 0.7), lambda v, t: -np.clip(v - t, -0.7, 0.7)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("name, kw, node, ref, dx, dt", LOSSES, ids=[a[0] for a in LOSSES])
def test_elementwise_losses_in_one_pass(dtype, reduction, name, kw, node, ref, dx, dt):
    rng = np.random.default_rng(2)
    v = (rng.standard_normal((300, 400)) * 3).astype(dtype)
    t = rng.random((300, 400)).astype(dtype)
    X, T = tinytorch.from_numpy(v.copy()).requires_grad_(), tinytorch.from_numpy(t.copy()).requires_grad_()
    loss = getattr(F, name)(X, T, reduction=reduction, **kw)
    assert loss.grad_fn.name() == node
    v64, t64 = v.astype(np.float64), t.astype(np.float64)
    want = ref(v64, t64).mean() if reduction == "mean" else ref(v64, t64).sum()
    np.testing.assert_allclose(loss.item(), want, rtol=4 * TOL[dtype])
    (loss * 3).backward()
    scale = 3 / (v.size if reduction == "mean" else 1)
    np.testing.assert_allclose(X.grad.numpy(), (scale * dx(v64, t64)).astype(dtype), rtol=4 * TOL[dtype],
                               atol=4 * TOL[dtype])
    np.testing.assert_allclose(T.grad.numpy(), (scale * dt(v64, t64)).astype(dtype), rtol=4 * TOL[dtype],
                               atol=4 * TOL[dtype])


def test_fused_losses_gradcheck_double_backward_and_the_paths_they_leave_alone(monkeypatch):
    monkeypatch.setattr(_cpu, "MIN_SIZE", 1)
    rng = np.random.default_rng(3)
    x = tinytorch.tensor(rng.standard_normal((4, 5)) * 2, requires_grad=True)
    t = tinytorch.tensor(rng.random((4, 5)), requires_grad=True)
    for name, kw, node, *_ in LOSSES:
        f = lambda a, b: getattr(F, name)(a, b, **kw)  # noqa: E731
        assert f(x, t).grad_fn.name() == node
        assert tinytorch.autograd.gradcheck(f, (x, t)), name
        assert tinytorch.autograd.gradgradcheck(f, (x, t)), name
    # weights, pos_weight and reduction='none' keep the composite
    assert F.binary_cross_entropy_with_logits(x, t, pos_weight=tinytorch.ones(5)).grad_fn.name() != LOSSES[0][2]
    assert F.smooth_l1_loss(x, t, reduction="none").shape == (4, 5)


@pytest.mark.parametrize("e", [3, 3.0, -1, -2, -0.5])
def test_pow_special_exponents_are_products_and_reciprocals(e):
    v = np.random.default_rng(4).standard_normal(70_000).astype(np.float32)  # past MIN_SIZE: the unary kernels
    v[:3] = [0.0, -2.0, np.inf]
    with np.errstate(all="ignore"):
        want = v.astype(np.float64) ** e
    got = tinytorch.from_numpy(v).pow(e).numpy()
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=4e-7, equal_nan=True)
    x = tinytorch.tensor(np.abs(v[3:8]).astype(np.float64) + 0.5, requires_grad=True)
    assert tinytorch.autograd.gradcheck(lambda a: a.pow(e), (x,))


def _fold_reference(g, shape, pads, mode):
    """The pad's adjoint by its definition: every output position adds its gradient to the input position it
    copies."""
    gx = np.zeros(shape)
    nd = len(shape)
    pos = []
    for d in range(nd):
        i = nd - 1 - d
        lo, hi = (pads[2 * i], pads[2 * i + 1]) if 2 * i < len(pads) else (0, 0)
        n, p = shape[d], np.arange(-lo, shape[d] + hi)
        if mode == "replicate":
            pos.append(np.clip(p, 0, n - 1))
        else:
            period = max(2 * (n - 1), 1)
            m = np.mod(p, period)
            pos.append(np.where(m < n, m, period - m))
    np.add.at(gx, np.ix_(*pos), g)
    return gx


@pytest.mark.parametrize("on_pool", [False, True])
@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("shape, pads", [((2, 3, 9), (2, 5)), ((2, 3, 7, 9), (3, 2, 0, 4)),
                                         ((1, 2, 4, 5, 6), (1, 2, 2, 1, 3, 0)), ((2, 3, 5), (0, 4))])
def test_edge_padding_and_its_folded_backward(monkeypatch, mode, shape, pads, on_pool):
    if on_pool:  # the interior copies on the pool's copy kernel, borders filled (and folded back) around them
        monkeypatch.setattr(_cpu, "MIN_SIZE", 1)
    rng = np.random.default_rng(5)
    a = rng.standard_normal(shape)
    x = tinytorch.tensor(a, requires_grad=True)
    y = F.pad(x, pads, mode=mode)
    assert y.grad_fn.name() == f"{'Reflection' if mode == 'reflect' else 'Replication'}Pad{len(pads) // 2}DBackward0"
    width = [(0, 0)] * (len(shape) - len(pads) // 2) + [(pads[2 * i], pads[2 * i + 1])
                                                         for i in reversed(range(len(pads) // 2))]
    np.testing.assert_array_equal(y.detach().numpy(), np.pad(a, width, mode="reflect" if mode == "reflect" else "edge"))
    g = rng.standard_normal(y.shape)
    y.backward(tinytorch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), _fold_reference(g, shape, pads, mode), rtol=1e-13, atol=1e-13)
    small = tinytorch.tensor(rng.standard_normal(shape), requires_grad=True)
    assert tinytorch.autograd.gradgradcheck(lambda t: F.pad(t, pads, mode=mode), (small,))


@pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")
def test_fused_paths_match_pytorch():
    import torch
    rng = np.random.default_rng(6)
    v, t = (rng.standard_normal((200, 500)) * 4).astype(np.float32), rng.random((200, 500)).astype(np.float32)
    cases = [lambda L, x, y: L.nn.functional.leaky_relu(x, 0.3), lambda L, x, y: L.nn.functional.elu(x),
             lambda L, x, y: L.nn.functional.softplus(x, 0.5), lambda L, x, y: L.nn.functional.logsigmoid(x),
             lambda L, x, y: L.nn.functional.binary_cross_entropy_with_logits(x, y),
             lambda L, x, y: L.nn.functional.smooth_l1_loss(x, y, beta=2.0),
             lambda L, x, y: L.nn.functional.huber_loss(x, y, reduction="sum"),
             lambda L, x, y: L.nn.functional.pad(x.reshape(2, 4, 125, 100), (3, 3, 2, 2), mode="reflect"),
             lambda L, x, y: L.nn.functional.pad(x.reshape(2, 4, 125, 100), (3, 1, 0, 2), mode="replicate")]
    for case in cases:
        outs = []
        for L in (tinytorch, torch):
            x, y = L.tensor(v, requires_grad=True), L.tensor(t, requires_grad=True)
            out = case(L, x, y)
            out.backward(L.ones_like(out))
            outs.append((out.detach().numpy(), x.grad.numpy(), None if y.grad is None else y.grad.numpy(),
                         out.grad_fn.name()))
        (a, ga, ta, na), (b, gb, tb, nb) = outs
        assert na == nb
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-6)
        np.testing.assert_allclose(ga, gb, rtol=2e-6, atol=2e-6)
        if tb is not None:
            np.testing.assert_allclose(ta, tb, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape, dim", [((4, 300, 70), 1), ((6, 5, 7), 0), ((2, 3, 4, 5), 2)])
def test_softmax_along_a_middle_dimension_by_blocks_of_columns(log, shape, dim):
    rng = np.random.default_rng(7)
    a = rng.standard_normal(shape) * 4
    col = [0] * len(shape)
    a[tuple(col)] = np.nan  # one column holds a NaN, another is all -inf: both come out NaN, as in PyTorch
    col[-1] = 1
    sl = list(col)
    sl[dim] = slice(None)
    a[tuple(sl)] = -np.inf
    x = tinytorch.tensor(a, requires_grad=True)
    y = (F.log_softmax if log else F.softmax)(x, dim)
    m = np.max(a, axis=dim, keepdims=True)
    with np.errstate(invalid="ignore"):
        z = a - m
        want = z - np.log(np.exp(z).sum(axis=dim, keepdims=True)) if log else np.exp(z) / np.exp(z).sum(dim, keepdims=True)
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-12, atol=1e-12, equal_nan=True)
    clean = tinytorch.tensor(rng.standard_normal(shape) if np.prod(shape) < 200 else rng.standard_normal((2, 3, 4)),
                             requires_grad=True)
    d = dim if np.prod(shape) < 200 else 1
    f = lambda t: (F.log_softmax if log else F.softmax)(t, d)  # noqa: E731
    assert tinytorch.autograd.gradcheck(f, (clean,)) and tinytorch.autograd.gradgradcheck(f, (clean,))


@pytest.mark.parametrize("big", [False, True])
def test_hardswish_hardsigmoid_mish_take_the_kernel_on_large_arrays_with_pytorchs_ends(big):
    v = np.array([-4.0, -3.0, -2.5, 0.0, 2.9, 3.0, 3.5, 25.0, -30.0])
    if big:  # past MIN_SIZE: one C++ pass each way
        v = np.concatenate([v, np.random.default_rng(8).standard_normal(70_000) * 5])
    x = tinytorch.tensor(v, requires_grad=True)
    F.hardswish(x).backward(tinytorch.ones_like(x))
    want = np.where(v <= -3, 0.0, np.where(v < 3, v / 3 + 0.5, 1.0))  # 0 at -3 and 1 at 3, as PyTorch 2.x
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(F.hardsigmoid(x).detach().numpy(), np.clip(v + 3, 0, 6) / 6, rtol=1e-15)
    sp = np.logaddexp(0, v)
    np.testing.assert_allclose(F.mish(x).detach().numpy(), v * np.tanh(sp), rtol=1e-13, atol=1e-300)
