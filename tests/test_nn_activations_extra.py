"""The rarer activations (hardswish, mish, selu, celu, glu, softsign, tanhshrink, the shrinks, threshold, prelu,
rrelu, gumbel_softmax, feature_alpha_dropout, channel_shuffle) and their modules: values and derivatives against
NumPy float64 formulas, gradcheck/gradgradcheck in float64, PyTorch's errors, and PyTorch's values, gradients and
module reprs when it is importable."""
import importlib.util
import math
import warnings

import numpy as np
import pytest

import tinytorch
import tinytorch.nn as nn
import tinytorch.nn.functional as F
from tinytorch.autograd import gradcheck, gradgradcheck

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4, 5)) * 3
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(0, x)


# name -> (call, value reference, derivative reference), all in NumPy float64
REFS = {
    "hardswish": (F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6,
                  lambda x: np.where(x < -3, 0, np.where(x <= 3, x / 3 + 0.5, 1))),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x + 3, 0, 6) / 6,
                    lambda x: np.where((x > -3) & (x < 3), 1 / 6, 0)),
    "mish": (F.mish, lambda x: x * np.tanh(_softplus(x)),
             lambda x: np.tanh(_softplus(x)) + x * _sigmoid(x) * (1 - np.tanh(_softplus(x)) ** 2)),
    "selu": (F.selu, lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(np.minimum(x, 0))),
             lambda x: SELU_SCALE * np.where(x > 0, 1, SELU_ALPHA * np.exp(np.minimum(x, 0)))),
    "celu": (lambda t: F.celu(t, 0.7), lambda x: np.maximum(x, 0) + np.minimum(0, 0.7 * np.expm1(x / 0.7)),
             lambda x: np.where(x > 0, 1, np.exp(np.minimum(x, 0) / 0.7))),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x)), lambda x: 1 / (1 + np.abs(x)) ** 2),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x), lambda x: np.tanh(x) ** 2),
    "softshrink": (lambda t: F.softshrink(t, 0.8), lambda x: np.where(x > 0.8, x - 0.8, np.where(x < -0.8, x + 0.8, 0)),
                   lambda x: (np.abs(x) > 0.8).astype(float)),
    "hardshrink": (lambda t: F.hardshrink(t, 0.8), lambda x: np.where(np.abs(x) > 0.8, x, 0),
                   lambda x: (np.abs(x) > 0.8).astype(float)),
    "threshold": (lambda t: F.threshold(t, 0.2, -1.5), lambda x: np.where(x > 0.2, x, -1.5),
                  lambda x: (x > 0.2).astype(float)),
    "rrelu_eval": (F.rrelu, lambda x: np.where(x > 0, x, x * (1 / 8 + 1 / 3) / 2),
                   lambda x: np.where(x > 0, 1, (1 / 8 + 1 / 3) / 2)),
    "prelu_shared": (lambda t: F.prelu(t, tinytorch.tensor([0.3], dtype=t.dtype)),
                     lambda x: np.where(x > 0, x, 0.3 * x), lambda x: np.where(x > 0, 1, 0.3)),
}
# Points away from each op's kinks (finite differences straddling a kink would disagree with either side).
KINKS = {"hardswish": (-3, 3), "hardsigmoid": (-3, 3), "selu": (0,), "celu": (0,), "softsign": (0,),
         "softshrink": (-0.8, 0.8), "hardshrink": (-0.8, 0.8), "threshold": (0.2,), "rrelu_eval": (0,),
         "prelu_shared": (0,)}
SMOOTH = [n for n in REFS if n not in ("softshrink", "hardshrink", "threshold")]


def _away_from_kinks(name, x):
    for k in KINKS.get(name, ()):
        x = np.where(np.abs(x - k) < 0.05, x + 0.1, x)
    return x


@pytest.mark.parametrize("name", list(REFS))
def test_values_and_derivatives_match_the_formulas(name):
    fn, ref, dref = REFS[name]
    a = _away_from_kinks(name, A)
    x = tinytorch.tensor(a, requires_grad=True)
    y = fn(x)
    assert y.dtype == tinytorch.float64 and y.shape == a.shape
    np.testing.assert_allclose(y.detach().numpy(), ref(a), rtol=1e-12, atol=1e-14)
    g = np.cos(np.arange(a.size)).reshape(a.shape)
    y.backward(tinytorch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), g * dref(a), rtol=1e-11, atol=1e-14)
    # under create_graph the backward is built from tensor ops instead: the same values, and a graph
    (gx,) = tinytorch.autograd.grad(fn(x), x, tinytorch.tensor(g), create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), g * dref(a), rtol=1e-11, atol=1e-14)
    y32 = fn(tinytorch.tensor(a, dtype=tinytorch.float32))
    assert y32.dtype == tinytorch.float32
    np.testing.assert_allclose(y32.numpy(), ref(a.astype(np.float32).astype(np.float64)), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("name", list(REFS))
def test_empty_zero_dim_and_half_inputs(name):
    fn, ref, _ = REFS[name]
    assert fn(tinytorch.empty(0, 3)).shape == (0, 3)
    s = fn(tinytorch.tensor(-1.25, dtype=tinytorch.float64))
    assert s.shape == () and math.isclose(s.item(), float(ref(np.array(-1.25))), rel_tol=1e-12)
    if name.startswith("prelu"):
        return  # prelu's weight must share the input's dtype: covered in test_prelu_checks_like_pytorch
    h = fn(tinytorch.tensor([-2.0, 0.5, 4.0], dtype=tinytorch.float16))
    assert h.dtype == tinytorch.float16
    np.testing.assert_allclose(h.numpy().astype(np.float64), ref(np.array([-2.0, 0.5, 4.0])), rtol=2e-3, atol=1e-3)


@pytest.mark.parametrize("name", list(REFS))
def test_gradcheck(name):
    fn = REFS[name][0]
    x = tinytorch.tensor(_away_from_kinks(name, RNG.standard_normal((2, 3, 4)) * 2.5), requires_grad=True)
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


def test_mish_is_stable_far_from_zero():
    x = tinytorch.tensor([100.0, 30.0, -30.0, -100.0], dtype=tinytorch.float32, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow in exp
        y = F.mish(x)
        y.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), [100.0, 30.0, -30 * math.exp(-30), -100 * math.exp(-100)],
                               rtol=1e-5, atol=1e-40)
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0, 0.0, 0.0], atol=1e-10)


def test_float_only_ops_reject_integers_as_pytorch_does():
    i = tinytorch.tensor([-2, 0, 3])
    for fn, kernel in ((F.hardswish, "hardswish_cpu"), (F.hardsigmoid, "hardsigmoid_cpu"), (F.mish, "mish_cpu"),
                       (F.selu, "elu_cpu"), (F.celu, "elu_cpu"), (F.hardshrink, "hardshrink_cpu"),
                       (F.softshrink, "softshrink_check"), (F.rrelu, "leaky_relu_cpu")):
        with pytest.raises(NotImplementedError, match=f'"{kernel}" not implemented for \'Long\''):
            fn(i)
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        F.mish(tinytorch.tensor([True]))
    with pytest.raises(NotImplementedError, match='"glu_cpu" not implemented'):
        F.glu(tinytorch.tensor([1, 2]))
    with pytest.raises(NotImplementedError, match="rrelu_with_noise_out_cpu"):
        F.rrelu(i, training=True)


def test_softsign_tanhshrink_promote_integers_and_reject_bools():
    i = tinytorch.tensor([-4, 0, 2])
    s, t = F.softsign(i), F.tanhshrink(i)
    assert s.dtype == tinytorch.float32 and t.dtype == tinytorch.float32
    np.testing.assert_allclose(s.numpy(), [-0.8, 0.0, 2 / 3], rtol=1e-6)
    np.testing.assert_allclose(t.numpy(), [-4 - math.tanh(-4), 0.0, 2 - math.tanh(2)], rtol=1e-6)
    with pytest.raises(NotImplementedError, match="abs_cpu"):
        F.softsign(tinytorch.tensor([True]))
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool tensor"):
        F.tanhshrink(tinytorch.tensor([True]))
    c = tinytorch.tensor([1 + 1j, -2j])
    np.testing.assert_allclose(F.softsign(c).numpy(), np.array([1 + 1j, -2j]) / (1 + np.abs([1 + 1j, -2j])))


def test_shrink_and_threshold_edges():
    nan = float("nan")
    x = tinytorch.tensor([nan, 0.2, -3.0, 3.0, 0.5, -0.5])
    np.testing.assert_array_equal(F.softshrink(x).numpy(), [nan, 0, -2.5, 2.5, 0, 0])
    np.testing.assert_array_equal(F.hardshrink(x).numpy(), [nan, 0, -3, 3, 0, 0])
    np.testing.assert_array_equal(F.threshold(x, 0.2, 9.0).numpy(), [nan, 9, 9, 3, 0.5, 9])
    np.testing.assert_array_equal(F.hardshrink(x[1:], -1.0).numpy(), x[1:].numpy())  # a negative lambd keeps all
    zeros = tinytorch.tensor([-0.3, 0.2]).hardshrink(0.5)  # Tensor.hardshrink
    assert not np.signbit(zeros.numpy()).any()  # +0.0, printed as 0., as PyTorch's
    # halves compare with the threshold in float32: bfloat16(0.2) = 0.2002 lies above 0.2
    b = F.threshold(tinytorch.tensor([0.2, 0.1], dtype=tinytorch.bfloat16), 0.2, -1.0)
    assert b.dtype == tinytorch.bfloat16
    np.testing.assert_allclose(b.float().numpy(), [0.2001953125, -1.0])
    with pytest.raises(RuntimeError, match=r"lambda must be in range \[0, 3.40282e\+38\] for input dtype Float, "
                                           r"but found -1"):
        F.softshrink(x, -1.0)
    with pytest.raises(RuntimeError, match=r"\[0, 1.79769e\+308\] for input dtype Double, but found -0.5"):
        F.softshrink(x.double(), -0.5)
    with pytest.raises(RuntimeError, match=r"\[0, 65504\] for input dtype Half"):
        F.softshrink(x.half(), -2)
    # integer input keeps its dtype; the bounds are cast to it first, as PyTorch does (-0.5 -> 0, 9.7 -> 9)
    i = tinytorch.tensor([0, 1, 2])
    r = F.threshold(i, -0.5, 9.7)
    assert r.dtype == tinytorch.int64
    np.testing.assert_array_equal(r.numpy(), [9, 1, 2])
    with pytest.raises(NotImplementedError, match="\"threshold_cpu\" not implemented for 'Bool'"):
        F.threshold(tinytorch.tensor([True]), 0, 1)


def test_inplace_variants_write_the_input_and_keep_the_graph():
    for fn, ref in ((lambda t: F.hardswish(t, inplace=True), F.hardswish),
                    (lambda t: F.hardsigmoid(t, True), F.hardsigmoid), (lambda t: F.mish(t, True), F.mish),
                    (F.selu_, F.selu), (lambda t: F.selu(t, True), F.selu), (lambda t: F.celu_(t, 0.5),
                                                                              lambda t: F.celu(t, 0.5)),
                    (lambda t: F.celu(t, 2.0, True), lambda t: F.celu(t, 2.0)),
                    (lambda t: F.threshold_(t, 0.1, 5.0), lambda t: F.threshold(t, 0.1, 5.0)),
                    (lambda t: F.threshold(t, 0.1, 5.0, True), lambda t: F.threshold(t, 0.1, 5.0)),
                    (lambda t: F.hardtanh_(t, -0.5, 0.25), lambda t: F.hardtanh(t, -0.5, 0.25)),
                    (F.rrelu_, F.rrelu), (lambda t: F.rrelu(t, inplace=True), F.rrelu)):
        t = tinytorch.tensor(A)
        v = t._version
        assert fn(t) is t and t._version > v
        np.testing.assert_allclose(t.numpy(), ref(tinytorch.tensor(A)).numpy(), rtol=1e-12)
        leaf = tinytorch.tensor(A, requires_grad=True)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            fn(leaf)
        h = leaf * 1.0
        fn(h).sum().backward()
        want = tinytorch.tensor(A, requires_grad=True)
        ref(want).sum().backward()
        np.testing.assert_allclose(leaf.grad.numpy(), want.grad.numpy(), rtol=1e-12)


def test_celu_alpha_zero_and_rrelu_bounds_are_errors():
    with pytest.raises(RuntimeError, match="alpha cannot be 0 for CELU"):
        F.celu(tinytorch.tensor(A), 0.0)
    for training in (False, True):
        with pytest.raises(RuntimeError, match="Lower bound should be less than or equal to the upper bound"):
            F.rrelu(tinytorch.tensor(A), 0.5, 0.1, training)


# ------------------------------------------------------------------ glu


@pytest.mark.parametrize("dim", [0, 1, -1, 2, -3])
def test_glu_halves_along_dim(dim):
    a = RNG.standard_normal((4, 6, 2))
    x = tinytorch.tensor(a, requires_grad=True)
    first, second = np.split(a, 2, axis=dim)
    np.testing.assert_allclose(F.glu(x, dim).detach().numpy(), first * _sigmoid(second), rtol=1e-12)
    assert gradcheck(lambda t: F.glu(t, dim), (x,))
    assert gradgradcheck(lambda t: F.glu(t, dim), (x,))


def test_glu_errors_and_shapes():
    with pytest.raises(RuntimeError, match="glu does not support scalars because halving size must be even"):
        F.glu(tinytorch.tensor(1.0))
    with pytest.raises(RuntimeError, match="Halving dimension must be even, but dimension 0 is size 3"):
        F.glu(tinytorch.randn(3))
    with pytest.raises(RuntimeError, match="Halving dimension must be even, but dimension 1 is size 5"):
        F.glu(tinytorch.randn(2, 5), -1)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 2\)"):
        F.glu(tinytorch.randn(4), dim=2)
    assert F.glu(tinytorch.randn(0, 4)).shape == (0, 2)
    assert F.glu(tinytorch.randn(2, 0)).shape == (2, 0)
    assert F.glu(tinytorch.randn(4, dtype=tinytorch.float16)).dtype == tinytorch.float16


# ------------------------------------------------------------------ prelu


def test_prelu_per_channel_values_and_gradients():
    a = RNG.standard_normal((2, 4, 3))
    w = np.array([0.1, -0.3, 0.25, 2.0])
    x, W = tinytorch.tensor(a, requires_grad=True), tinytorch.tensor(w, requires_grad=True)
    y = F.prelu(x, W)
    assert y.grad_fn.name() == "PreluKernelBackward0"
    wb = w[None, :, None]
    np.testing.assert_allclose(y.detach().numpy(), np.where(a > 0, a, wb * a), rtol=1e-12)
    g = np.cos(np.arange(a.size)).reshape(a.shape)
    y.backward(tinytorch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), np.where(a > 0, g, wb * g), rtol=1e-12)
    np.testing.assert_allclose(W.grad.numpy(), np.where(a > 0, 0, a * g).sum(axis=(0, 2)), rtol=1e-12)
    assert x.prelu(W).shape == (2, 4, 3)  # Tensor.prelu
    assert gradcheck(F.prelu, (x, W))
    assert gradgradcheck(F.prelu, (x, W))
    one = tinytorch.tensor([0.2], dtype=tinytorch.float64, requires_grad=True)
    assert gradcheck(F.prelu, (x, one)) and gradgradcheck(F.prelu, (x, one))
    # an input that needs no gradient: only the weight's is computed
    W.grad = None
    F.prelu(tinytorch.tensor(a), W).sum().backward()
    np.testing.assert_allclose(W.grad.numpy(), np.where(a > 0, 0, a).sum(axis=(0, 2)), rtol=1e-12)


def test_prelu_checks_like_pytorch():
    x = tinytorch.randn(2, 4, 6)
    for w in (tinytorch.ones(4), tinytorch.tensor(0.5), tinytorch.ones(1)):
        assert F.prelu(x, w).shape == (2, 4, 6)
    assert F.prelu(tinytorch.tensor(-2.0), tinytorch.tensor([0.5])).shape == ()
    assert F.prelu(tinytorch.randn(5), tinytorch.ones(1)).shape == (5,)
    assert F.prelu(tinytorch.randn(0, 3), tinytorch.ones(3)).shape == (0, 3)
    with pytest.raises(RuntimeError, match="Found parameter numbers = 3 and channel size = 4."):
        F.prelu(x, tinytorch.ones(3))
    with pytest.raises(RuntimeError, match="Found parameter numbers = 5 and channel size = 1."):
        F.prelu(tinytorch.randn(5), tinytorch.ones(5))
    with pytest.raises(RuntimeError, match="Not allow zero-dim input tensor."):
        F.prelu(tinytorch.tensor(1.0), tinytorch.ones(3))
    with pytest.raises(RuntimeError, match="Expected `weight` to be a scalar or 1D tensor, but got: ndim = 2"):
        F.prelu(x, tinytorch.ones(1, 4))
    with pytest.raises(RuntimeError, match="prelu: Type promoting not supported. Got Float and Double"):
        F.prelu(x, tinytorch.ones(4, dtype=tinytorch.float64))
    with pytest.raises(TypeError, match="argument 'weight' \\(position 2\\) must be Tensor, not float"):
        F.prelu(x, 0.25)
    with pytest.raises(NotImplementedError, match="\"prelu_cpu\" not implemented for 'Long'"):
        F.prelu(tinytorch.tensor([1, -2]), tinytorch.tensor([1]))


# ------------------------------------------------------------------ rrelu


def test_rrelu_training_draws_a_slope_per_negative_element():
    tinytorch.manual_seed(3)
    a = RNG.standard_normal((200, 50))
    x = tinytorch.tensor(a, requires_grad=True)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    ratio = y.detach().numpy() / a
    np.testing.assert_array_equal(ratio[a > 0], 1.0)
    neg = ratio[a < 0]
    assert neg.min() >= 0.1 and neg.max() <= 0.3 and abs(neg.mean() - 0.2) < 0.005 and neg.std() > 0.05
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), ratio, rtol=1e-12)  # the gradient is the drawn slope
    tinytorch.manual_seed(3)
    np.testing.assert_array_equal(F.rrelu(tinytorch.tensor(a), 0.1, 0.3, True).numpy(), y.detach().numpy())

    def seeded(t):  # the same draw on every call, so that finite differences see one function
        tinytorch.manual_seed(5)
        return F.rrelu(t, 0.1, 0.3, True)
    small = tinytorch.tensor(a[:2, :3], requires_grad=True)
    assert gradcheck(seeded, (small,)) and gradgradcheck(seeded, (small,))
    # equal bounds: the fixed slope, and the leaky-relu gradient
    x2 = tinytorch.tensor(a[:3], requires_grad=True)
    F.rrelu(x2, 0.2, 0.2, True).sum().backward()
    np.testing.assert_allclose(x2.grad.numpy(), np.where(a[:3] > 0, 1, 0.2), rtol=1e-12)
    f32 = F.rrelu(tinytorch.tensor(a, dtype=tinytorch.float32), training=True)
    assert f32.dtype == tinytorch.float32


# ------------------------------------------------------------------ gumbel_softmax


def test_gumbel_softmax_samples_follow_the_softmax():
    tinytorch.manual_seed(0)
    logits = np.log(np.array([0.6, 0.3, 0.1]))
    L = tinytorch.tensor(np.tile(logits, (20000, 1)))
    soft = F.gumbel_softmax(L, tau=0.5)
    np.testing.assert_allclose(soft.sum(-1).numpy(), 1.0, rtol=1e-12)
    freq = np.bincount(soft.numpy().argmax(-1), minlength=3) / 20000
    np.testing.assert_allclose(freq, [0.6, 0.3, 0.1], atol=0.015)
    hard = F.gumbel_softmax(L, hard=True, dim=1)
    assert set(np.unique(hard.numpy())) == {0.0, 1.0} and np.all(hard.numpy().sum(-1) == 1)


def test_gumbel_softmax_gradients_and_options():
    logits = tinytorch.tensor(RNG.standard_normal((4, 5)), requires_grad=True)
    tinytorch.manual_seed(1)
    y = F.gumbel_softmax(logits, tau=2.0, hard=True, dim=0)
    assert np.all(y.detach().numpy().sum(0) == 1)
    w = tinytorch.tensor(RNG.standard_normal((4, 5)))
    (y * w).sum().backward()
    tinytorch.manual_seed(1)
    logits2 = tinytorch.tensor(logits.detach().numpy(), requires_grad=True)
    (F.gumbel_softmax(logits2, tau=2.0, dim=0) * w).sum().backward()
    np.testing.assert_allclose(logits.grad.numpy(), logits2.grad.numpy(), rtol=1e-12)  # straight-through
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated and has no effect."):
        F.gumbel_softmax(logits, eps=1e-5)
    with pytest.raises(RuntimeError, match="dtype must be a floating point but you specified Long"):
        F.gumbel_softmax(tinytorch.tensor([1, 2]))


# ------------------------------------------------------------------ feature_alpha_dropout


def test_feature_alpha_dropout_drops_whole_channels_to_the_saturation_value():
    tinytorch.manual_seed(0)
    p = 0.3
    a = RNG.standard_normal((64, 32, 5, 5))
    x = tinytorch.tensor(a, requires_grad=True)
    y = F.feature_alpha_dropout(x, p, True)
    alpha = SELU_ALPHA * SELU_SCALE
    k = 1 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    out = y.detach().numpy()
    kept = np.isclose(out, a * k + alpha * k * p, rtol=1e-12).all(axis=(2, 3))
    dropped = np.isclose(out, alpha * k * (p - 1), rtol=1e-12).all(axis=(2, 3))
    assert np.all(kept ^ dropped)
    assert abs(dropped.mean() - p) < 0.03
    assert abs(out.mean()) < 0.05 and abs(out.var() - 1) < 0.05  # mean 0, variance 1 kept
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.broadcast_to(np.where(kept, k, 0.0)[:, :, None, None], a.shape))
    assert F.feature_alpha_dropout(tinytorch.tensor(a, dtype=tinytorch.float32), p, True).dtype == tinytorch.float32


def test_feature_alpha_dropout_edges():
    x = tinytorch.tensor(A)
    assert F.feature_alpha_dropout(x, 0.5, False) is x and F.feature_alpha_dropout(x) is x  # training=False default
    assert F.feature_alpha_dropout(x, 0.0, True) is x
    np.testing.assert_array_equal(F.feature_alpha_dropout(x, 1.0, True).numpy(), 0.0)
    assert F.feature_alpha_dropout(tinytorch.randn(3), 0.5, False).shape == (3,)
    with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions in the input"):
        F.feature_alpha_dropout(tinytorch.randn(3), 0.5, True)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        F.feature_alpha_dropout(x, 1.5)
    t = tinytorch.tensor(A)
    assert F.feature_alpha_dropout(t, 0.5, True, inplace=True) is t and not np.allclose(t.numpy(), A)


# ------------------------------------------------------------------ channel_shuffle


@pytest.mark.parametrize("fn", [F.channel_shuffle, F.native_channel_shuffle])
def test_channel_shuffle_interleaves_the_groups(fn):
    a = RNG.standard_normal((2, 6, 3, 2))
    x = tinytorch.tensor(a, requires_grad=True)
    y = fn(x, 3)
    want = a.reshape(2, 3, 2, 3, 2).swapaxes(1, 2).reshape(a.shape)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    assert y.is_contiguous()
    np.testing.assert_array_equal(F.channel_shuffle(y.detach(), 2).numpy(), a)  # the inverse: C / g groups
    assert gradcheck(lambda t: fn(t, 3), (x,)) and gradgradcheck(lambda t: fn(t, 3), (x,))
    ints = tinytorch.arange(12).reshape(1, 6, 2)
    np.testing.assert_array_equal(fn(ints, 3).numpy()[0, :, 0], [0, 4, 8, 2, 6, 10])
    assert fn(tinytorch.randn(0, 6, 3), 2).shape == (0, 6, 3) and fn(tinytorch.randn(2, 0, 3), 2).shape == (2, 0, 3)


def test_channel_shuffle_errors():
    with pytest.raises(RuntimeError, match=r"channel_shuffle expects input with > 2 dims, but got input with sizes "
                                           r"\[6, 2\]"):
        F.channel_shuffle(tinytorch.randn(6, 2), 3)
    with pytest.raises(RuntimeError, match="Number of groups to divide channels in must be positive. Value of "
                                           "groups:0"):
        F.channel_shuffle(tinytorch.randn(1, 6, 2), 0)
    with pytest.raises(RuntimeError, match="Number of channels must be divisible by groups. Got 6 channels and 4 "
                                           "groups."):
        F.channel_shuffle(tinytorch.randn(1, 6, 2), 4)
    with pytest.raises(TypeError, match="must be int, not float"):
        F.channel_shuffle(tinytorch.randn(1, 6, 2), 2.0)


# ------------------------------------------------------------------ modules


MODULE_REPRS = [
    (lambda m: m.Hardswish(), "Hardswish()"), (lambda m: m.Hardswish(inplace=True), "Hardswish()"),
    (lambda m: m.Hardsigmoid(), "Hardsigmoid()"), (lambda m: m.Mish(), "Mish()"),
    (lambda m: m.Mish(inplace=True), "Mish(inplace=True)"), (lambda m: m.SELU(), "SELU()"),
    (lambda m: m.SELU(True), "SELU(inplace=True)"), (lambda m: m.CELU(), "CELU(alpha=1.0)"),
    (lambda m: m.CELU(0.5, True), "CELU(alpha=0.5, inplace=True)"), (lambda m: m.GLU(), "GLU(dim=-1)"),
    (lambda m: m.GLU(1), "GLU(dim=1)"), (lambda m: m.Softsign(), "Softsign()"),
    (lambda m: m.Tanhshrink(), "Tanhshrink()"), (lambda m: m.Softshrink(), "Softshrink(0.5)"),
    (lambda m: m.Hardshrink(0.25), "Hardshrink(0.25)"),
    (lambda m: m.Threshold(0.1, 20), "Threshold(threshold=0.1, value=20)"),
    (lambda m: m.Threshold(0.1, 2.0, True), "Threshold(threshold=0.1, value=2.0, inplace=True)"),
    (lambda m: m.Hardtanh(), "Hardtanh(min_val=-1.0, max_val=1.0)"),
    (lambda m: m.Hardtanh(-2, 2, True), "Hardtanh(min_val=-2, max_val=2, inplace=True)"),
    (lambda m: m.ReLU6(), "ReLU6()"), (lambda m: m.ReLU6(True), "ReLU6(inplace=True)"),
    (lambda m: m.LogSigmoid(), "LogSigmoid()"), (lambda m: m.PReLU(), "PReLU(num_parameters=1)"),
    (lambda m: m.PReLU(3, 0.1), "PReLU(num_parameters=3)"),
    (lambda m: m.RReLU(), "RReLU(lower=0.125, upper=0.3333333333333333)"),
    (lambda m: m.RReLU(0.1, 0.2, True), "RReLU(lower=0.1, upper=0.2, inplace=True)"),
    (lambda m: m.Softmin(), "Softmin(dim=None)"), (lambda m: m.Softmin(1), "Softmin(dim=1)"),
    (lambda m: m.Softmax2d(), "Softmax2d()"), (lambda m: m.ChannelShuffle(2), "ChannelShuffle(groups=2)"),
    (lambda m: m.FeatureAlphaDropout(), "FeatureAlphaDropout(p=0.5, inplace=False)"),
    (lambda m: m.FeatureAlphaDropout(0.2, True), "FeatureAlphaDropout(p=0.2, inplace=True)"),
]


@pytest.mark.parametrize("make,text", MODULE_REPRS)
def test_module_reprs(make, text):
    assert repr(make(nn)) == text


def test_modules_apply_their_functional():
    x = tinytorch.tensor(_away_from_kinks("hardswish", A))
    x4 = tinytorch.tensor(RNG.standard_normal((2, 4, 3, 3)))
    pairs = [(nn.Hardswish(), F.hardswish(x)), (nn.Hardsigmoid(), F.hardsigmoid(x)), (nn.Mish(), F.mish(x)),
             (nn.SELU(), F.selu(x)), (nn.CELU(0.5), F.celu(x, 0.5)), (nn.GLU(1), F.glu(x, 1)),
             (nn.Softsign(), F.softsign(x)), (nn.Tanhshrink(), F.tanhshrink(x)),
             (nn.Softshrink(0.3), F.softshrink(x, 0.3)), (nn.Hardshrink(0.3), F.hardshrink(x, 0.3)),
             (nn.Threshold(0.1, 2.0), F.threshold(x, 0.1, 2.0)), (nn.Hardtanh(-2, 2), x.clamp(-2, 2)),
             (nn.ReLU6(), x.clamp(0, 6)), (nn.LogSigmoid(), F.logsigmoid(x)), (nn.Softmin(1), F.softmin(x, 1)),
             (nn.RReLU().eval(), F.rrelu(x))]
    for m, want in pairs:
        np.testing.assert_allclose(m(x).numpy(), want.numpy(), rtol=1e-12, err_msg=repr(m))
    np.testing.assert_allclose(nn.Softmax2d()(x4).numpy(), F.softmax(x4, -3).numpy(), rtol=1e-12)
    np.testing.assert_allclose(nn.Softmax2d()(x4[0]).numpy(), F.softmax(x4[0], 0).numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 2D instead"):
        nn.Softmax2d()(x4[0, 0])
    np.testing.assert_array_equal(nn.ChannelShuffle(2)(x4).numpy(), F.channel_shuffle(x4, 2).numpy())
    d = nn.FeatureAlphaDropout(0.5)
    assert d.eval()(x4) is x4
    assert not np.allclose(d.train()(x4).numpy(), x4.numpy())
    r = nn.RReLU(0.1, 0.3).train()
    ratio = r(x).numpy() / x.numpy()
    assert np.unique(ratio[x.numpy() < 0]).size > 10  # a fresh slope per element in training
    t = tinytorch.tensor(A)
    assert nn.Hardswish(inplace=True)(t) is t and nn.ReLU6(inplace=True)(t) is t


def test_prelu_module_parameter():
    m = nn.PReLU(4, init=0.1)
    assert list(m.state_dict()) == ["weight"] and m.weight.shape == (4,) and m.weight.requires_grad
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.float32(0.1))
    x = tinytorch.randn(2, 4, 3)
    m(x).sum().backward()
    np.testing.assert_allclose(m.weight.grad.numpy(), np.where(x.numpy() > 0, 0, x.numpy()).sum(axis=(0, 2)),
                               rtol=1e-5)
    assert nn.PReLU(dtype=tinytorch.float64).weight.dtype == tinytorch.float64
    assert [n for n, _ in nn.Sequential(nn.Linear(3, 4), nn.PReLU()).named_parameters()] == ["0.weight", "0.bias",
                                                                                             "1.weight"]


def test_hardtanh_module_checks_and_deprecated_names():
    with pytest.raises(AssertionError, match=r"max_val \(1.0\) must be greater than min_val \(2.0\)"):
        nn.Hardtanh(2.0, 1.0)
    with pytest.warns(FutureWarning, match="`min_value` is deprecated and renamed to `min_val`"):
        m = nn.Hardtanh(min_value=-3.0)
    assert m.min_val == -3.0
    with pytest.warns(FutureWarning, match="`max_value` is deprecated"):
        assert nn.Hardtanh(max_value=4.0).max_val == 4.0


# ------------------------------------------------------------------ PyTorch


def _torch_calls(L):
    """The same calls through tinytorch's or PyTorch's functional API."""
    Fn = L.nn.functional
    return {"hardswish": Fn.hardswish, "hardsigmoid": Fn.hardsigmoid, "mish": Fn.mish, "selu": Fn.selu,
            "celu": lambda t: Fn.celu(t, 0.7), "glu0": lambda t: Fn.glu(t, 0), "glu": Fn.glu,
            "softsign": Fn.softsign, "tanhshrink": Fn.tanhshrink, "softshrink": lambda t: Fn.softshrink(t, 0.8),
            "hardshrink": lambda t: Fn.hardshrink(t, 0.8), "threshold": lambda t: Fn.threshold(t, 0.2, -1.5),
            "rrelu": Fn.rrelu, "hardtanh_": lambda t: Fn.hardtanh_(t * 1, -0.5, 0.5),
            "prelu": lambda t: Fn.prelu(t, L.tensor([0.1, -0.2, 0.3, 0.4], dtype=t.dtype)),
            "channel_shuffle": lambda t: Fn.channel_shuffle(t, 2), "softmin": lambda t: Fn.softmin(t, 1),
            "logsigmoid": Fn.logsigmoid}


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_values_and_gradients_match_pytorch(dtype):
    import torch
    a = RNG.standard_normal((2, 4, 6)).astype(dtype) * 3
    ours, theirs = _torch_calls(tinytorch), _torch_calls(torch)
    tol = 1e-5 if dtype == "float32" else 1e-7  # PyTorch rounds some constants to float (hardsigmoid's 1/6)
    for name in ours:
        x, tx = tinytorch.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        y, ty = ours[name](x), theirs[name](tx)
        assert str(y.dtype).split(".")[-1] == str(ty.dtype).split(".")[-1] and tuple(y.shape) == tuple(ty.shape)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol, err_msg=name)
        g = np.sin(np.arange(y.numel())).reshape(tuple(y.shape)).astype(dtype)
        y.backward(tinytorch.tensor(g))
        ty.backward(torch.tensor(g))
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol, err_msg=name)


@needs_torch
def test_half_and_edge_values_match_pytorch():
    import torch
    v = [float("nan"), 0.2, -3.0, 3.0, 0.5, -0.5, 100.0, -100.0, 0.0]
    ours, theirs = _torch_calls(tinytorch), _torch_calls(torch)
    for name in ("hardswish", "hardsigmoid", "mish", "selu", "celu", "softsign", "tanhshrink", "softshrink",
                 "hardshrink", "threshold", "rrelu"):
        for dt in ("float32", "float16", "bfloat16"):
            y = ours[name](tinytorch.tensor(v, dtype=getattr(tinytorch, dt)))
            ty = theirs[name](torch.tensor(v, dtype=getattr(torch, dt)))
            assert str(y.dtype).split(".")[-1] == str(ty.dtype).split(".")[-1]
            # halves: tinytorch rounds once from float32, PyTorch's composite tanhshrink rounds tanh(x) first
            np.testing.assert_allclose(y.float().numpy(), ty.float().numpy(), rtol=1e-2 if dt != "float32" else 1e-6,
                                       atol=1e-3 if dt != "float32" else 1e-30, err_msg=f"{name} {dt}")


@needs_torch
def test_prelu_weight_gradient_and_module_reprs_match_pytorch():
    import torch
    a = RNG.standard_normal((3, 4, 2, 2)).astype(np.float32)
    m, tm = nn.PReLU(4, 0.3), torch.nn.PReLU(4, 0.3)
    x, tx = tinytorch.tensor(a), torch.tensor(a)
    np.testing.assert_allclose(m(x).detach().numpy(), tm(tx).detach().numpy(), rtol=1e-6)
    m(x).pow(2).sum().backward()
    tm(tx).pow(2).sum().backward()
    np.testing.assert_allclose(m.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-5)
    assert list(m.state_dict()) == list(tm.state_dict())
    for make, _ in MODULE_REPRS:
        assert repr(make(nn)) == repr(make(torch.nn))
    seq = lambda M: M.Sequential(M.Conv2d(3, 8, 3), M.PReLU(8), M.ChannelShuffle(2), M.Hardswish(), M.Softmax2d())
    assert repr(seq(nn)) == repr(seq(torch.nn))


@needs_torch
def test_error_messages_match_pytorch():
    import torch
    cases = [lambda L: L.nn.functional.glu(L.randn(3)), lambda L: L.nn.functional.glu(L.tensor(1.0)),
             lambda L: L.nn.functional.softshrink(L.randn(3), -1.0),
             lambda L: L.nn.functional.prelu(L.randn(2, 4), L.ones(3)),
             lambda L: L.nn.functional.prelu(L.randn(2, 4), L.ones(1, 4)),
             lambda L: L.nn.functional.prelu(L.randn(2, 4), L.ones(4, dtype=L.float64)),
             lambda L: L.nn.functional.channel_shuffle(L.randn(6, 2), 3),
             lambda L: L.nn.functional.channel_shuffle(L.randn(1, 6, 2), 4),
             lambda L: L.nn.functional.channel_shuffle(L.randn(1, 6, 2), -1),
             lambda L: L.nn.functional.rrelu(L.randn(3), 0.5, 0.1),
             lambda L: L.nn.functional.celu(L.randn(3), 0.0),
             lambda L: L.nn.functional.feature_alpha_dropout(L.randn(3), 0.5, True),
             lambda L: L.nn.functional.hardswish(L.tensor([1, 2])),
             lambda L: L.nn.functional.threshold(L.tensor([True]), 0, 1)]
    for case in cases:
        with pytest.raises(Exception) as want:
            case(torch)
        with pytest.raises(type(want.value)) as got:
            case(tinytorch)
        assert str(got.value) == str(want.value).split("\n")[0]
