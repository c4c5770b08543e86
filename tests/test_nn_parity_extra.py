"""Parity of the rarer nn pieces with PyTorch: pooling edge cases (padded -inf windows, empty batches, zero-size
outputs, integer average pooling, PyTorch's argument checks), fractional_max_pool3d, hardtanh's gradient at its
bounds, in-place activations' node names, and, where torch is installed, differential checks against it."""
import math

import numpy as np
import pytest

import tinytorch
import tinytorch.nn as nn
import tinytorch.nn.functional as F
from tinytorch.autograd import gradcheck

RNG = np.random.default_rng(7)


def _t(a, grad=False):
    return tinytorch.tensor(np.asarray(a), requires_grad=grad)


# ------------------------------------------------------------------ max pooling over padded windows


def test_max_pool_index_never_points_into_padding():
    # All -inf windows tie with the -inf padding: the index must still be the first position inside the input.
    x2 = np.full((1, 1, 3, 3), -np.inf, np.float16)
    out, idx = F.max_pool2d(_t(x2), 3, 1, 1, return_indices=True)
    assert idx.numpy().tolist() == [[[[0, 0, 1], [0, 0, 1], [3, 3, 4]]]]
    assert np.isneginf(out.numpy()).all()
    x3 = _t(np.full((1, 1, 2, 2, 2), -np.inf), True)
    out, idx = F.max_pool3d(x3, 3, 1, 1, return_indices=True)
    assert idx.numpy().min() == 0 and idx.numpy().max() <= 7
    assert idx.numpy()[0, 0, 1, 1, 1] == 0
    out.sum().backward()
    assert x3.grad.numpy().sum() == 8  # every output's gradient lands inside the input


def test_max_pool_integer_minimum_with_ceil_mode():
    x = np.full((1, 1, 3, 5), np.iinfo(np.int32).min, np.int32)
    out, idx = F.max_pool2d(_t(x), 2, 2, 1, ceil_mode=True, return_indices=True)
    rows, cols = np.divmod(idx.numpy(), 5)
    assert (rows < 3).all() and (cols < 5).all()
    assert out.dtype == tinytorch.int32


def test_pools_with_empty_batch_and_zero_outputs():
    x = _t(np.zeros((0, 3, 4, 4, 4)), True)
    for fn in (lambda a: F.max_pool3d(a, 2), lambda a: F.adaptive_max_pool3d(a, 2),
               lambda a: F.fractional_max_pool3d(a, 2, 2)):
        y = fn(x)
        assert y.shape == (0, 3, 2, 2, 2)
        y.sum().backward()
        assert x.grad.shape == x.shape
        x.grad = None
    assert F.fractional_max_pool2d(_t(np.zeros((0, 2, 5, 5))), 2, 2).shape == (0, 2, 2, 2)
    assert F.adaptive_max_pool2d(_t(RNG.standard_normal((2, 3, 4, 4))), 0).shape == (2, 3, 0, 0)
    y, i = F.adaptive_max_pool3d(_t(RNG.standard_normal((2, 3, 4, 4, 4))), (0, 2, 2), True)
    assert y.shape == i.shape == (2, 3, 0, 2, 2)


def test_integer_average_pooling_truncates_toward_zero():
    x = np.array([[[[-7, 2, 5], [3, -1, 4], [9, 8, -6]]]])
    assert F.avg_pool2d(_t(x), 2, 1).numpy().tolist() == [[[[0, 2], [4, 1]]]]
    y = F.avg_pool2d(_t(x), 2, 1, 1)
    assert y.dtype == tinytorch.int64
    assert y.numpy().tolist() == [[[[-1, -1, 1, 1], [-1, 0, 2, 2], [3, 4, 1, 0], [2, 4, 0, -1]]]]
    assert F.avg_pool2d(_t(x), 2, 1, 1, count_include_pad=False).numpy()[0, 0, 0].tolist() == [-7, -2, 3, 5]
    assert F.avg_pool2d(_t(x), 2, 1, divisor_override=3).numpy().tolist() == [[[[-1, 3], [6, 1]]]]
    assert F.avg_pool1d(_t(x[0]), 2, 1).numpy().tolist() == [[[-2, 3], [1, 1], [8, 1]]]


@pytest.mark.parametrize("call, err, msg", [
    (lambda: F.max_pool1d(_t(np.zeros(7)), 2), RuntimeError,
     "max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, but got:[7]"),
    (lambda: F.max_pool1d(_t(np.zeros((2, 7))), 0), RuntimeError,
     "max_pool1d() kernel_size must be greater than zero, but got 0"),
    (lambda: F.max_pool1d(_t(np.zeros((2, 7))), 2, 1, 2), RuntimeError,
     "max_pool1d() padding should be at most half of kernel size, but got padding=2 and kernel_size=2"),
    (lambda: F.max_pool1d(_t(np.zeros((2, 7))), 9), RuntimeError, "max_pool1d() Invalid computed output size: 0"),
    (lambda: F.max_pool1d(_t(np.zeros((2, 7))), (2, 2)), RuntimeError,
     "max_pool1d() kernel_size must be an int, list of ints or tuple of ints of size 1 but got size 2"),
    (lambda: F.max_pool1d(_t(np.zeros(7)), 2, return_indices=True), RuntimeError,
     "Expected 2 to 3 dimensions, but got 1-dimensional tensor for argument #1 'self' (while checking arguments "
     "for max_pool1d)"),
    (lambda: F.max_pool2d(_t(np.zeros((3, 3))), 2), RuntimeError,
     "non-empty 3D or 4D (batch mode) tensor expected for input"),
    (lambda: F.max_pool2d(_t(np.zeros((2, 0, 4, 4))), 2), RuntimeError,
     "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:[2, 0, 4, 4]"),
    (lambda: F.max_pool2d(_t(np.zeros((1, 4, 4))), 0), RuntimeError, "stride should not be zero"),
    (lambda: F.max_pool2d(_t(np.zeros((1, 4, 4))), 0, 1), RuntimeError,
     "kernel size should be greater than zero, but got kH: 0 kW: 0"),
    (lambda: F.max_pool2d(_t(np.zeros((1, 4, 4))), 2, 1, -1), RuntimeError,
     "pad must be non-negative, but got pad: -1"),
    (lambda: F.max_pool2d(_t(np.zeros((1, 4, 4))), 2, 1, 0, 0), RuntimeError,
     "dilation should be greater than zero, but got dilationH: 0 dilationW: 0"),
    (lambda: F.max_pool2d(_t(np.zeros((1, 4, 4))), (2, 2, 2)), RuntimeError,
     "max_pool2d: kernel_size must either be a single int, or a tuple of two ints"),
    (lambda: F.max_pool2d(_t(np.zeros((1, 4, 4), bool)), 2), NotImplementedError,
     "\"max_pool2d\" not implemented for 'Bool'"),
    (lambda: F.max_pool3d(_t(np.zeros((1, 4, 4, 4), bool)), 2), NotImplementedError,
     "\"max_pool3d\" not implemented for 'Bool'"),
    (lambda: F.avg_pool1d(_t(np.zeros((1, 2, 3, 7))), 2), RuntimeError,
     "Expected 2 to 3 dimensions, but got 4-dimensional tensor for argument #1 'self' (while checking arguments "
     "for avg_pool1d)"),
    (lambda: F.avg_pool1d(_t(np.zeros((2, 7))), (2, 2)), RuntimeError,
     "avg_pool1d() argument 'kernel_size' should contain one int (got 2)"),
    (lambda: F.avg_pool1d(_t(np.zeros((2, 7))), 9), RuntimeError,
     "Given input size: (2x1x7). Calculated output size: (2x1x0). Output size is too small"),
    (lambda: F.avg_pool2d(_t(np.zeros((3, 3))), 2), IndexError,
     "Dimension out of range (expected to be in range of [-2, 1], but got -3)"),
    (lambda: F.adaptive_avg_pool1d(_t(np.zeros((2, 7))), (1, 2)), RuntimeError,
     "adaptive_avg_pool1d() argument 'output_size' should contain one int (got 2)"),
    (lambda: F.adaptive_avg_pool2d(_t(np.zeros((6, 7))), 2), RuntimeError,
     "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got [6, 7]"),
    (lambda: F.adaptive_max_pool2d(_t(np.zeros((6, 7))), 2), RuntimeError,
     "adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: [6, 7]"),
    (lambda: F.adaptive_avg_pool2d(_t(np.zeros((2, 3, 0, 7))), 2), RuntimeError,
     "but input has sizes [2, 3, 0, 7] with dimension 2 being empty"),
    (lambda: F.adaptive_max_pool2d(_t(np.zeros((2, 0, 6, 7))), 2), RuntimeError,
     "but input has sizes [2, 0, 6, 7] with dimension 1 being empty"),
    (lambda: F.adaptive_avg_pool2d(_t(np.zeros((2, 3, 6, 7))), -1), RuntimeError,
     "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received {-1, -1}"),
    (lambda: F.adaptive_avg_pool2d(_t(np.zeros((2, 3, 6, 7))), (1, 2, 3, 4)), ValueError,
     "Input dimension should be at least 5"),
    (lambda: F.adaptive_max_pool2d(_t(np.zeros((2, 3, 6, 7), np.int64)), 2), NotImplementedError,
     "\"adaptive_max_pool2d\" not implemented for 'Long'"),
    (lambda: F.fractional_max_pool3d(_t(np.zeros((2, 3, 6, 6, 6))), 2, (5, 5, 5)), RuntimeError,
     "fractional_max_pool3d_out(): pool time 2 too large relative to input time 6"),
    (lambda: F.fractional_max_pool3d(_t(np.zeros((2, 3, 6, 6, 6))), 2, 2, _random_samples=_t(np.zeros((2, 3, 2)))),
     RuntimeError, "Expect _random_samples.size(2) equals to 3; got 2."),
    (lambda: F.fractional_max_pool2d(_t(np.zeros((2, 3, 6, 6))), 2, 2,
                                     _random_samples=_t(np.zeros((2, 3, 2), np.float32))),
     RuntimeError, "Expect _random_samples to have the same dtype as input"),
    (lambda: F.fractional_max_pool2d(_t(np.zeros((2, 0, 6, 6))), 2, 2), RuntimeError,
     "fractional_max_pool2d(): Expected input to have non-zero size for non-batch dimensions, but got[2, 0, 6, 6] "
     "with dimension 1 being empty."),
    (lambda: F.fractional_max_pool3d(_t(np.zeros((2, 3, 6, 6, 6))), (2, 2), 2), RuntimeError,
     "fractional_max_pool3d: kernel_size must either be a single Int or tuple of three Ints"),
    (lambda: nn.FractionalMaxPool3d(2), ValueError,
     "FractionalMaxPool3d requires specifying either an output size, or a pooling ratio"),
    (lambda: nn.FractionalMaxPool3d(2, output_ratio=1.5), ValueError, "output_ratio must be between 0 and 1 (got 1.5)"),
])
def test_pooling_errors_use_pytorch_words(call, err, msg):
    with pytest.raises(err) as info:
        call()
    assert msg in str(info.value)


# ------------------------------------------------------------------ fractional_max_pool3d


def _fractional_starts_ref(u: float, n: int, o: int, k: int) -> list:
    if o == 1:
        return [n - k]
    alpha = (n - k) / (o - 1)
    return [int((i + u) * alpha) - int(u * alpha) for i in range(o - 1)] + [n - k]


def _fractional3d_ref(x, k, o, samples):
    N, C = x.shape[:2]
    S = x.shape[2:]
    out = np.empty((N, C) + o)
    idx = np.empty((N, C) + o, np.int64)
    for n in range(N):
        for c in range(C):
            st = [_fractional_starts_ref(samples[n, c, a], S[a], o[a], k[a]) for a in range(3)]
            for pos in np.ndindex(*o):
                best, arg = -np.inf, -1
                for off in np.ndindex(*k):
                    q = [st[a][pos[a]] + off[a] for a in range(3)]
                    v = x[n, c, q[0], q[1], q[2]]
                    if arg < 0 or v > best or np.isnan(v):
                        best, arg = v, (q[0] * S[1] + q[1]) * S[2] + q[2]
                out[(n, c) + pos], idx[(n, c) + pos] = best, arg
    return out, idx


@pytest.mark.parametrize("k, o", [((2, 2, 2), (3, 3, 3)), ((1, 2, 3), (4, 2, 3)), ((2, 1, 1), (1, 5, 6))])
def test_fractional_max_pool3d_matches_reference(k, o):
    x = RNG.standard_normal((2, 3, 5, 6, 7))
    u = RNG.random((2, 3, 3))
    out, idx = F.fractional_max_pool3d(_t(x), k, o, return_indices=True, _random_samples=_t(u))
    ref, ridx = _fractional3d_ref(x, k, o, u)
    np.testing.assert_allclose(out.numpy(), ref)
    np.testing.assert_array_equal(idx.numpy(), ridx)
    unb, uidx = F.fractional_max_pool3d(_t(x[1]), k, o, return_indices=True, _random_samples=_t(u[1:]))
    np.testing.assert_allclose(unb.numpy(), ref[1])
    np.testing.assert_array_equal(uidx.numpy(), ridx[1])


def test_fractional_max_pool3d_gradients_and_module():
    x = _t(RNG.standard_normal((1, 2, 5, 5, 5)), True)
    u = _t(RNG.random((1, 2, 3)))
    y = F.fractional_max_pool3d(x, 2, output_ratio=0.5, _random_samples=u)
    assert y.shape == (1, 2, 2, 2, 2) and y.grad_fn.name() == "FractionalMaxPool3DBackward0"
    assert gradcheck(lambda a: F.fractional_max_pool3d(a, 2, (2, 3, 3), _random_samples=u), (x,))
    m = nn.FractionalMaxPool3d(2, output_size=3, return_indices=True, _random_samples=u)
    assert repr(m) == "FractionalMaxPool3d()"
    assert m.kernel_size == (2, 2, 2) and m.output_size == (3, 3, 3) and m.output_ratio is None
    assert list(m.state_dict()) == ["_random_samples"]
    out, idx = m(x)
    ref, ridx = F.fractional_max_pool3d(x, 2, 3, return_indices=True, _random_samples=u)
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    np.testing.assert_array_equal(idx.numpy(), ridx.numpy())
    assert nn.FractionalMaxPool3d((1, 2, 3), output_ratio=(0.5, 0.25, 0.75)).output_ratio == (0.5, 0.25, 0.75)
    assert nn.FractionalMaxPool3d(2, output_ratio=0.5)(x).shape == (1, 2, 2, 2, 2)


# ------------------------------------------------------------------ activations


def test_hardtanh_gradient_stops_at_the_bounds():
    x = _t(np.array([np.nan, -2.0, -1.0, 0.0, 1.0, 2.0]), True)
    for layer in (nn.Hardtanh(), nn.Hardtanh(inplace=True)):
        y = layer(x * 1)
        assert y.grad_fn.name() == "HardtanhBackward0"
        (g,) = tinytorch.autograd.grad(y.sum(), x)
        np.testing.assert_array_equal(g.numpy(), [1, 0, 0, 1, 0, 0])  # NaN passes, the bounds do not
        np.testing.assert_array_equal(y.detach().numpy()[1:], [-1, -1, 0, 1, 1])
    x6 = _t(np.array([-1.0, 0.0, 3.0, 6.0, 7.0]), True)
    nn.ReLU6()(x6).sum().backward()
    np.testing.assert_array_equal(x6.grad.numpy(), [0, 0, 1, 0, 0])
    z = _t(RNG.uniform(-2, 2, (3, 4)), True)
    assert gradcheck(lambda a: F.hardtanh_(a * 1, -0.5, 0.5), (z,))


def test_hardtanh_in_place_dtypes_and_errors():
    assert F.hardtanh_(_t(np.array([5, -5, 0])), -1.5, 2.5).numpy().tolist() == [2, -1, 0]
    assert F.hardtanh_(_t(np.array([0.5, 2.0])), 1.0, -1.0).numpy().tolist() == [-1.0, -1.0]
    with pytest.raises(RuntimeError, match="Bool inputs not supported for hardtanh"):
        F.hardtanh_(_t(np.array([True])))
    m = nn.Hardtanh()
    m.min_val = 2.0  # past the constructor's check: F.hardtanh's own
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        m(_t(np.zeros(2)))
    with pytest.raises(AssertionError, match=r"max_val \(1.0\) must be greater than min_val \(2.0\)"):
        nn.Hardtanh(2.0, 1.0)


@pytest.mark.parametrize("call, node", [
    (lambda a: F.selu(a, inplace=True), "EluBackward1"),
    (lambda a: tinytorch.selu_(a), "EluBackward1"),
    (lambda a: F.celu_(a, 0.5), "CeluBackward1"),
    (lambda a: F.threshold_(a, 0.1, 2.0), "ThresholdBackward1"),
    (lambda a: F.threshold(a, 0.1, 2.0, True), "ThresholdBackward1"),
    (lambda a: F.rrelu_(a), "RreluWithNoiseBackward1"),
    (lambda a: F.rrelu(a, training=True, inplace=True), "RreluWithNoiseBackward1"),
    (lambda a: F.selu(a), "EluBackward0"),
    (lambda a: F.threshold(a, 0.1, 2.0), "ThresholdBackward0"),
    (lambda a: F.softsign(a), "DivBackward0"),
    (lambda a: F.tanhshrink(a), "SubBackward0"),
])
def test_activation_node_names(call, node):
    x = _t(RNG.standard_normal((2, 3)), True)
    assert call(x * 1).grad_fn.name() == node


# ------------------------------------------------------------------ differential checks against PyTorch


def _both(fn, *arrays, grad=True):
    """fn's outputs (and input gradients for a fixed output gradient) under PyTorch and tinytorch."""
    torch = pytest.importorskip("torch")
    res = []
    for lib in (torch, tinytorch):
        ts = [lib.tensor(a) for a in arrays]
        if grad:
            ts[0].requires_grad_(True)
        try:
            y = fn(lib, *ts)
        except Exception as e:  # noqa: BLE001 - the error itself is compared
            res.append((type(e).__name__, str(e)))
            continue
        ys = y if isinstance(y, tuple) else (y,)
        vals = [np.asarray(v.detach().numpy()) for v in ys]
        g = None
        if grad and ys[0].requires_grad:
            w = np.random.default_rng(3).standard_normal(ys[0].shape)
            (g,) = lib.autograd.grad(ys[0], [ts[0]], lib.tensor(w, dtype=ys[0].dtype))
            g = g.numpy()
        res.append((vals, g))
    return res


def _assert_same(res):
    a, b = res
    if isinstance(a[0], str) or isinstance(b[0], str):
        assert a == b
        return
    for x, y in zip(a[0], b[0]):
        assert x.shape == y.shape
        np.testing.assert_allclose(y, x, rtol=1e-6, atol=1e-9, equal_nan=True)
    if a[1] is not None:
        np.testing.assert_allclose(b[1], a[1], rtol=1e-6, atol=1e-9, equal_nan=True)


_X5 = RNG.standard_normal((2, 3, 5, 6, 7))


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("k, s, p, d, ceil", [(2, None, 0, 1, False), (3, 2, 1, 1, True), (2, 2, 1, 2, True),
                                              (4, 2, 2, 1, True), (3, 3, 1, 1, True)])
def test_max_and_avg_pool_match_torch(nd, k, s, p, d, ceil):
    x = _X5[(slice(None), slice(None)) + (0,) * (3 - nd)]
    for arr in (x, x[0]):
        _assert_same(_both(lambda L, t: getattr(L.nn.functional, f"max_pool{nd}d")(
            t, k, s, p, d, ceil_mode=ceil, return_indices=True), arr))
        for cip in (True, False):
            _assert_same(_both(lambda L, t: getattr(L.nn.functional, f"avg_pool{nd}d")(t, k, s, p, ceil, cip), arr))


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
def test_adaptive_pools_match_torch(nd, size):
    x = _X5[(slice(None), slice(None)) + (0,) * (3 - nd)]
    for arr in (x, x[0]):
        _assert_same(_both(lambda L, t: getattr(L.nn.functional, f"adaptive_avg_pool{nd}d")(t, size), arr))
        _assert_same(_both(lambda L, t: getattr(L.nn.functional, f"adaptive_max_pool{nd}d")(t, size, True), arr))


@pytest.mark.parametrize("p", [1, 2, 3.0, float("inf")])
def test_lp_pools_match_torch(p):
    for nd in (1, 2, 3):
        x = np.abs(_X5[(slice(None), slice(None)) + (0,) * (3 - nd)])
        _assert_same(_both(lambda L, t: getattr(L.nn.functional, f"lp_pool{nd}d")(t, p, 2, None, True), x))


def test_pool_errors_match_torch():
    bad = [lambda L, t: L.nn.functional.max_pool2d(t[0, 0], 2), lambda L, t: L.nn.functional.max_pool2d(t, 0),
           lambda L, t: L.nn.functional.max_pool2d(t, 2, 1, 2), lambda L, t: L.nn.functional.max_pool2d(t, 8),
           lambda L, t: L.nn.functional.avg_pool1d(t, (2, 2)), lambda L, t: L.nn.functional.max_pool1d(t[0, 0, 0], 2),
           lambda L, t: L.nn.functional.adaptive_max_pool1d(t[0, 0, 0], 2),
           lambda L, t: L.nn.functional.avg_pool2d(t, 0),
           lambda L, t: L.nn.functional.adaptive_avg_pool2d(t, (None, 2, 3)),
           lambda L, t: L.nn.functional.max_pool2d(t.bool(), 2)]
    for fn in bad:
        res = _both(fn, _X5[:, :, 0], grad=False)
        assert isinstance(res[0][0], str)
        _assert_same(res)


@pytest.mark.parametrize("k, o", [(2, (3, 3, 3)), ((1, 2, 3), (4, 2, 3))])
def test_fractional_max_pool3d_matches_torch(k, o):
    u = RNG.random((2, 3, 3))
    _assert_same(_both(lambda L, t, s: L.nn.functional.fractional_max_pool3d(t, k, o, return_indices=True,
                                                                             _random_samples=s), _X5, u))


_REPRS = ["Hardtanh(-2, 2, True)", "ReLU6(True)", "Softshrink(1)", "Threshold(0.1, 20, True)", "PReLU(3, 0.1)",
          "RReLU(0.1, 0.3, True)", "MaxPool2d(3, 2, 1, 1, True, True)", "AvgPool1d(3, 2, 1, True, False)",
          "AvgPool3d((1, 2, 3))", "AdaptiveMaxPool2d((None, 3))", "MaxUnpool3d(3, 2, 1)", "LPPool2d(2.0, 3, 2, True)",
          "FractionalMaxPool2d(3, output_ratio=0.5)", "FractionalMaxPool3d(2, output_size=3)",
          "ZeroPad2d((1, 2, 3, 4))",
          "ConstantPad3d(1, -1.0)", "CircularPad1d(2)", "LazyLinear(3)", "LazyConvTranspose2d(4, 3, stride=2)",
          "LazyBatchNorm2d(affine=False)"]


@pytest.mark.parametrize("ctor", _REPRS)
def test_module_repr_matches_torch(ctor):
    torch = pytest.importorskip("torch")
    assert repr(eval("nn." + ctor)) == repr(eval("nn." + ctor, {"nn": torch.nn}))


def test_containers_and_lazy_match_torch():
    torch = pytest.importorskip("torch")

    def trace(lib):
        out = []
        pl = lib.nn.ParameterList([lib.nn.Parameter(lib.zeros(2, 3)), lib.zeros(3)])
        pl.append(lib.zeros(1)).extend([4, "s"])
        out += [repr(pl), list(pl.state_dict()), len(pl[1:4]), list(pl[::2].state_dict())]
        pd = lib.nn.ParameterDict({"b": lib.zeros(2), "a": lib.zeros(3), "c": 3})
        pd.update([("z", lib.zeros(1))])
        out += [repr(pd), list(pd.keys()), list(pd.state_dict()), "a" in pd, pd.popitem()[0],
                list((pd | lib.nn.ParameterDict({"q": lib.zeros(1)})).keys())]
        m = lib.nn.Sequential(lib.nn.LazyLinear(4), lib.nn.ReLU(), lib.nn.LazyConv1d(2, 1))
        out += [repr(m), [type(v).__name__ for v in m.state_dict().values()]]
        m(lib.ones(3, 7))
        out += [repr(m), [(k, tuple(v.shape)) for k, v in m.state_dict().items()]]
        bn = lib.nn.LazyBatchNorm1d()
        bn(lib.ones(4, 3))
        out += [type(bn).__name__, bn.num_features, list(bn.state_dict())]
        return [str(v).replace("tinytorch.", "torch.") for v in out]
    assert trace(tinytorch) == trace(torch)


def test_lp_pool_size_is_the_kernel_volume():
    x = np.abs(RNG.standard_normal((1, 1, 4, 4, 4)))
    y = F.lp_pool3d(_t(x), 2, (1, 2, 2))
    ref = np.sqrt((x ** 2).reshape(1, 1, 4, 2, 2, 2, 2).sum(axis=(4, 6)))
    np.testing.assert_allclose(y.numpy(), ref)
    assert math.isclose(float(F.lp_pool1d(_t(np.array([[[3.0, 4.0]]])), 2, 2)), 5.0)
