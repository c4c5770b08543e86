"""3-D convolution and pooling, max unpooling, LP and fractional max pooling, grid_sample and affine_grid:
values against loop-based NumPy references in float64, gradients by gradcheck/gradgradcheck, PyTorch's errors for
bad arguments, the nn layers, and PyTorch's values, dtypes, shapes and gradients when it is importable."""
import importlib.util
import itertools
import math

import numpy as np
import pytest

import tinytorch
import tinytorch.nn.functional as F
from tinytorch.autograd import gradcheck, gradgradcheck

HAS_TORCH = importlib.util.find_spec("torch") is not None
RNG = np.random.default_rng(0)


def _t(a, grad=False):
    return tinytorch.tensor(np.asarray(a), requires_grad=grad)


def _trip(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * 3


# ------------------------------------------------------------------ NumPy references (loops, float64)


def _conv3d_ref(x, w, b, s, p, d, G):
    s, p, d = _trip(s), _trip(p), _trip(d)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(v, v) for v in p])
    N, C = x.shape[:2]
    O, Cg = w.shape[:2]
    k = w.shape[2:]
    o = [(n - dd * (kk - 1) - 1) // ss + 1 for n, kk, ss, dd in zip(xp.shape[2:], k, s, d)]
    out = np.zeros([N, O] + o)
    Og = O // G
    for oc in range(O):
        g = oc // Og
        for pos in itertools.product(*(range(v) for v in o)):
            sl = tuple(slice(q * ss, q * ss + dd * (kk - 1) + 1, dd) for q, ss, dd, kk in zip(pos, s, d, k))
            win = xp[(slice(None), slice(g * Cg, (g + 1) * Cg)) + sl]
            out[(slice(None), oc) + pos] = (win * w[oc]).sum((1, 2, 3, 4))
    return out + (0 if b is None else b.reshape(1, -1, 1, 1, 1))


def _conv_transpose3d_ref(x, w, b, s, p, op, G, d):
    s, p, op, d = _trip(s), _trip(p), _trip(op), _trip(d)
    N, Cin = x.shape[:2]
    Og, k = w.shape[1], w.shape[2:]
    Cg = Cin // G
    full = [(n - 1) * ss + dd * (kk - 1) + 1 + oo for n, ss, dd, kk, oo in zip(x.shape[2:], s, d, k, op)]
    out = np.zeros([N, Og * G] + full)
    for c in range(Cin):
        g = c // Cg
        for pos in itertools.product(*(range(v) for v in x.shape[2:])):
            for kp in itertools.product(*(range(v) for v in k)):
                at = tuple(q * ss + kk * dd for q, ss, kk, dd in zip(pos, s, kp, d))
                out[(slice(None), slice(g * Og, (g + 1) * Og)) + at] += x[(slice(None), c) + pos][:, None] * \
                    w[(c, slice(None)) + kp]
    out = out[(slice(None), slice(None)) + tuple(slice(pp, n - pp) for pp, n in zip(p, full))]
    return out + (0 if b is None else b.reshape(1, -1, 1, 1, 1))


def _out_len(n, k, s, p, d, ceil):
    num = n + 2 * p - d * (k - 1) - 1
    o = (-(-num // s) if ceil else num // s) + 1
    if ceil and (o - 1) * s >= n + p:
        o -= 1
    return o


def _max_pool3d_ref(x, k, s, p, d, ceil):
    k, s, p, d = _trip(k), _trip(s if s is not None else k), _trip(p), _trip(d)
    N, C, *S = x.shape
    o = [_out_len(n, kk, ss, pp, dd, ceil) for n, kk, ss, pp, dd in zip(S, k, s, p, d)]
    out, idx = np.zeros([N, C] + o), np.zeros([N, C] + o, np.int64)
    for n, c in itertools.product(range(N), range(C)):
        for pos in itertools.product(*(range(v) for v in o)):
            best, bi = -np.inf, -1
            for kp in itertools.product(*(range(v) for v in k)):
                q = [a * ss - pp + kk * dd for a, ss, pp, kk, dd in zip(pos, s, p, kp, d)]
                if all(0 <= v < nn for v, nn in zip(q, S)) and x[n, c, q[0], q[1], q[2]] > best:
                    best, bi = x[n, c, q[0], q[1], q[2]], (q[0] * S[1] + q[1]) * S[2] + q[2]
            out[(n, c) + pos], idx[(n, c) + pos] = best, bi
    return out, idx


def _avg_pool3d_ref(x, k, s, p, ceil, cip, div):
    k, s, p = _trip(k), _trip(s if s is not None else k), _trip(p)
    N, C, *S = x.shape
    o = [_out_len(n, kk, ss, pp, 1, ceil) for n, kk, ss, pp in zip(S, k, s, p)]
    out = np.zeros([N, C] + o)
    for pos in itertools.product(*(range(v) for v in o)):
        start = [a * ss - pp for a, ss, pp in zip(pos, s, p)]
        end = [min(st + kk, n + pp) for st, kk, n, pp in zip(start, k, S, p)]
        size = math.prod(e - st for st, e in zip(start, end))
        lo = [max(st, 0) for st in start]
        hi = [min(e, n) for e, n in zip(end, S)]
        if not cip:
            size = math.prod(h - lw for lw, h in zip(lo, hi))
        win = x[:, :, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]].sum((2, 3, 4))
        out[(slice(None), slice(None)) + pos] = win / (div if div is not None else size)
    return out


def _adaptive_ref(x, o, reduce):
    N, C, *S = x.shape
    out = np.zeros([N, C] + list(o))
    for pos in itertools.product(*(range(v) for v in o)):
        sl = tuple(slice(a * n // oo, -(-(a + 1) * n // oo)) for a, n, oo in zip(pos, S, o))
        out[(slice(None), slice(None)) + pos] = reduce(x[(slice(None), slice(None)) + sl], axis=(2, 3, 4))
    return out


def _reflect(x, lo2, hi2):
    if lo2 == hi2:
        return 0.0
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    x = abs(x - lo)
    extra, flips = math.fmod(x, span), math.floor(x / span)
    return extra + lo if flips % 2 == 0 else span - extra + lo


def _pad_coord(x, n, pad, ac):
    if pad == "border":
        return min(max(x, 0), n - 1)
    if pad == "reflection":
        x = _reflect(x, 0, 2 * (n - 1)) if ac else _reflect(x, -1, 2 * n - 1)
        return min(max(x, 0), n - 1)
    return x


def _cubic(t):
    A = -0.75

    def c1(v):
        return ((A + 2) * v - (A + 3)) * v * v + 1

    def c2(v):
        return ((A * v - 5 * A) * v + 8 * A) * v - 4 * A
    return [c2(t + 1), c1(t), c1(1 - t), c2(2 - t)]


def _grid_sample_ref(x, grid, mode, pad, ac):
    """One output point at a time, per PyTorch's documented formulas (4-D or 5-D)."""
    N, C, *S = x.shape
    nd = len(S)
    out = np.zeros([N, C] + list(grid.shape[1:-1]))
    for n in range(N):
        for pos in itertools.product(*(range(v) for v in grid.shape[1:-1])):
            # coordinate per input dim (input dim i is read by grid component nd - 1 - i)
            coords = []
            for i in range(nd):
                g, size = grid[(n,) + pos + (nd - 1 - i,)], S[i]
                coords.append((g + 1) / 2 * (size - 1) if ac else ((g + 1) * size - 1) / 2)
            if mode != "bicubic":
                coords = [_pad_coord(c, size, pad, ac) for c, size in zip(coords, S)]
            taps = []  # (weight, integer position per dim)
            if mode == "nearest":
                taps = [(1.0, [int(np.rint(c)) for c in coords])]
            elif mode == "bilinear":
                for e in itertools.product((0, 1), repeat=nd):
                    f = [math.floor(c) for c in coords]
                    w = math.prod((c - fl) if ee else (1 - (c - fl)) for c, fl, ee in zip(coords, f, e))
                    taps.append((w, [fl + ee for fl, ee in zip(f, e)]))
            else:
                f = [math.floor(c) for c in coords]
                cw = [_cubic(c - fl) for c, fl in zip(coords, f)]
                for e in itertools.product(range(4), repeat=nd):
                    q = [int(_pad_coord(fl - 1 + ee, size, pad, ac)) if pad != "zeros" else fl - 1 + ee
                         for fl, ee, size in zip(f, e, S)]
                    taps.append((math.prod(c[ee] for c, ee in zip(cw, e)), q))
            for w, q in taps:
                if all(0 <= v < size for v, size in zip(q, S)):
                    out[(n, slice(None)) + pos] += w * x[(n, slice(None)) + tuple(q)]
    return out


def _affine_grid_ref(theta, size, ac):
    N, _, *S = size
    lin = [np.linspace(-1, 1, n) * (1 if ac else (n - 1) / n) if n > 1 else np.zeros(1) for n in S]
    out = np.zeros([N] + S + [len(S)])
    for pos in itertools.product(*(range(n) for n in S)):
        base = [lin[i][pos[i]] for i in reversed(range(len(S)))] + [1.0]  # x, y(, z), 1
        out[(slice(None),) + pos] = theta @ np.array(base)
    return out


# ------------------------------------------------------------------ conv3d / conv_transpose3d


CONV_CASES = [  # (N, C, O, groups, kernel, stride, padding, dilation, size)
    (2, 2, 3, 1, (2, 3, 2), (1, 2, 1), (1, 0, 1), (1, 1, 2), (4, 5, 5)),
    (1, 4, 6, 2, 3, 2, 1, 1, (4, 4, 5)),
    (2, 3, 3, 3, 1, 1, 0, 1, (2, 3, 2)),
    (1, 2, 2, 1, 2, (2, 1, 3), 0, (2, 1, 1), (5, 3, 6)),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv3d_matches_the_loop_reference(case):
    N, C, O, G, k, s, p, d, S = case
    k = _trip(k)
    x, w, b = RNG.standard_normal((N, C) + S), RNG.standard_normal((O, C // G) + k), RNG.standard_normal(O)
    got = F.conv3d(_t(x), _t(w), _t(b), s, p, d, G)
    np.testing.assert_allclose(got.numpy(), _conv3d_ref(x, w, b, s, p, d, G), rtol=1e-10, atol=1e-12)
    got = F.conv3d(_t(x), _t(w), None, s, p, d, G)
    np.testing.assert_allclose(got.numpy(), _conv3d_ref(x, w, None, s, p, d, G), rtol=1e-10, atol=1e-12)


def test_conv3d_padding_strings_unbatched_and_dtypes():
    x, w = RNG.standard_normal((2, 4, 5, 3)), RNG.standard_normal((3, 2, 3, 2, 2))
    same = F.conv3d(_t(x[None]), _t(w), padding="same", dilation=(1, 2, 1))
    assert same.shape == (1, 3, 4, 5, 3)
    # "same" pads total d*(k-1), the smaller half first
    want = _conv3d_ref(np.pad(x[None], [(0, 0), (0, 0), (1, 1), (1, 1), (0, 1)]), w, None, 1, 0, (1, 2, 1), 1)
    np.testing.assert_allclose(same.numpy(), want, rtol=1e-10)
    assert F.conv3d(_t(x[None]), _t(w), padding="valid").shape == (1, 3, 2, 4, 2)
    unb = F.conv3d(_t(x), _t(w))  # (C, D, H, W): unbatched
    assert unb.shape == (3, 2, 4, 2)
    np.testing.assert_allclose(unb.numpy(), _conv3d_ref(x[None], w, None, 1, 0, 1, 1)[0], rtol=1e-10)
    x32 = tinytorch.tensor(x[None], dtype=tinytorch.float32)
    y32 = F.conv3d(x32, tinytorch.tensor(w, dtype=tinytorch.float32))
    assert y32.dtype == tinytorch.float32
    np.testing.assert_allclose(y32.numpy(), _conv3d_ref(x[None], w, None, 1, 0, 1, 1), rtol=1e-4, atol=1e-5)
    empty = F.conv3d(_t(np.zeros((0, 2, 4, 5, 3))), _t(w))
    assert empty.shape == (0, 3, 2, 4, 2)


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_transpose3d_matches_the_loop_reference(case):
    N, C, O, G, k, s, p, d, S = case
    k, s3, d3 = _trip(k), _trip(s), _trip(d)
    op = tuple(min(ss, dd) - 1 for ss, dd in zip(s3, d3))
    p = tuple(min(pp, kk // 2) for pp, kk in zip(_trip(p), k))
    x, w, b = RNG.standard_normal((N, C) + S), RNG.standard_normal((C, O // G) + k), RNG.standard_normal(O)
    got = F.conv_transpose3d(_t(x), _t(w), _t(b), s, p, op, G, d)
    np.testing.assert_allclose(got.numpy(), _conv_transpose3d_ref(x, w, b, s, p, op, G, d), rtol=1e-10, atol=1e-12)


def test_conv3d_gradients_and_double_backward():
    x = _t(RNG.standard_normal((1, 2, 3, 4, 3)), True)
    w = _t(RNG.standard_normal((2, 1, 2, 2, 2)), True)
    b = _t(RNG.standard_normal(2), True)
    out = F.conv3d(x, w, b, (1, 2, 1), 1, (1, 1, 2), 2)
    assert out.grad_fn.name() == "ConvolutionBackward0"
    for fn in (lambda a, c, e: F.conv3d(a, c, e, (1, 2, 1), 1, (1, 1, 2), 2),
               lambda a, c, e: F.conv_transpose3d(a, c, e, (1, 2, 1), 1, (0, 1, 0), 2, (1, 1, 2))):
        assert gradcheck(fn, (x, w, b))
        assert gradgradcheck(fn, (x, w, b))
    xu = _t(RNG.standard_normal((2, 3, 2, 3)), True)  # unbatched
    wc, wt = _t(RNG.standard_normal((1, 2, 2, 2, 2)), True), _t(RNG.standard_normal((2, 1, 1, 2, 1)), True)
    assert gradcheck(lambda a, c: F.conv3d(a, c, None, 1, (1, 0, 1)), (xu, wc))
    assert gradcheck(lambda a, c: F.conv_transpose3d(a, c, None, 2, 0, 1), (xu, wt))


def test_conv3d_errors():
    x, w = _t(RNG.standard_normal((1, 2, 3, 3, 3))), _t(RNG.standard_normal((4, 2, 2, 2, 2)))
    with pytest.raises(RuntimeError, match=r"Kernel size: \(4 x 4 x 4\). Kernel size can't be greater"):
        F.conv3d(x, _t(np.zeros((4, 2, 4, 4, 4))))
    with pytest.raises(RuntimeError, match=r"expected input\[1, 3, 3, 3, 3\] to have 2 channels, but got 3"):
        F.conv3d(_t(np.zeros((1, 3, 3, 3, 3))), w)
    with pytest.raises(RuntimeError, match="Given groups=3, expected weight to be divisible by 3 at dimension 0"):
        F.conv3d(_t(np.zeros((1, 6, 3, 3, 3))), w, groups=3)
    with pytest.raises(RuntimeError, match=r"Expected 4D \(unbatched\) or 5D \(batched\) input to conv3d"):
        F.conv3d(_t(np.zeros((1, 2, 3, 3, 3, 3))), w)
    with pytest.raises(RuntimeError, match="a list of 3 values to match the convolution dimensions, but got "
                                           r"stride=\[1, 2\]"):
        F.conv3d(x, w, stride=(1, 2))
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided convolutions"):
        F.conv3d(x, w, padding="same", stride=2)
    with pytest.raises(RuntimeError, match="Invalid padding string: 'foo'"):
        F.conv3d(x, w, padding="foo")
    with pytest.raises(RuntimeError, match="expected bias to be 1-dimensional with 4 elements"):
        F.conv3d(x, w, _t(np.zeros(3)))
    with pytest.raises(RuntimeError, match="Given transposed=1, weight of size"):
        F.conv_transpose3d(x, w)
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride or dilation"):
        F.conv_transpose3d(x, _t(np.zeros((2, 2, 2, 2, 2))), output_padding=2)
    with pytest.raises(RuntimeError, match=r"Calculated output size per channel: \(-1 x -1 x -1\)"):
        F.conv_transpose3d(_t(np.zeros((1, 2, 1, 1, 1))), _t(np.zeros((2, 2, 1, 1, 1))), padding=1)


def test_conv3d_layers():
    tinytorch.manual_seed(0)
    m = tinytorch.nn.Conv3d(4, 6, (3, 2, 2), stride=(1, 2, 1), padding=1, groups=2, padding_mode="reflect")
    assert m.weight.shape == (6, 2, 3, 2, 2) and m.bias.shape == (6,)
    x = RNG.standard_normal((2, 4, 4, 5, 4))
    xp = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1), (1, 1)], mode="reflect")
    want = _conv3d_ref(xp, m.weight.detach().numpy(), m.bias.detach().numpy(), (1, 2, 1), 0, 1, 2)
    np.testing.assert_allclose(m(tinytorch.tensor(x, dtype=tinytorch.float32)).detach().numpy(), want, rtol=1e-4,
                               atol=1e-5)
    t = tinytorch.nn.ConvTranspose3d(2, 4, 3, stride=2, groups=2, bias=False)
    assert t.weight.shape == (2, 2, 3, 3, 3) and t.bias is None
    y = t(tinytorch.randn(1, 2, 3, 3, 3), output_size=(8, 7, 8))
    assert y.shape == (1, 4, 8, 7, 8)
    with pytest.raises(ValueError, match="requested an output size of"):
        t(tinytorch.randn(1, 2, 3, 3, 3), output_size=(20, 20, 20))
    assert repr(t) == "ConvTranspose3d(2, 4, kernel_size=(3, 3, 3), stride=(2, 2, 2), groups=2, bias=False)"


# ------------------------------------------------------------------ 3-D pooling


POOL_CASES = [  # kernel, stride, padding, dilation, ceil_mode
    (2, None, 0, 1, False),
    ((2, 3, 2), (1, 2, 3), (1, 1, 0), (1, 1, 2), False),
    (3, 2, 1, 1, True),
    ((1, 2, 2), (2, 1, 2), (0, 1, 1), 1, True),
]


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool3d_values_and_indices(case):
    k, s, p, d, ceil = case
    x = RNG.standard_normal((2, 2, 5, 6, 7))
    out, idx = F.max_pool3d(_t(x), k, s, p, d, ceil, return_indices=True)
    want, wi = _max_pool3d_ref(x, k, s, p, d, ceil)
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(idx.numpy(), wi)
    assert idx.dtype == tinytorch.int64
    o2, i2 = F.max_pool3d_with_indices(_t(x[0]), k, s, p, d, ceil)  # unbatched
    np.testing.assert_array_equal(o2.numpy(), want[0])
    np.testing.assert_array_equal(i2.numpy(), wi[0])


def test_max_pool3d_integers_nan_empty_batch_and_grad():
    xi = RNG.integers(-9, 9, (1, 2, 4, 4, 4))
    got = F.max_pool3d(_t(xi), 2, 1)
    assert got.dtype == tinytorch.int64
    np.testing.assert_array_equal(got.numpy(), _max_pool3d_ref(xi, 2, 1, 0, 1, False)[0])
    x = np.zeros((1, 1, 2, 2, 2))
    x[0, 0, 1, 1, 0] = np.nan
    out, idx = F.max_pool3d(_t(x), 2, return_indices=True)
    assert np.isnan(out.detach().numpy()).all() and idx.numpy().item() == 6
    assert F.max_pool3d(_t(np.zeros((0, 2, 4, 4, 4))), 2).shape == (0, 2, 2, 2, 2)
    xg = _t(RNG.standard_normal((1, 2, 4, 5, 4)), True)
    assert F.max_pool3d(xg, 2).grad_fn.name() == "MaxPool3DWithIndicesBackward0"
    for fn in (lambda a: F.max_pool3d(a, 2, (1, 2, 1), 1, ceil_mode=True),
               lambda a: F.max_pool3d(a[0], (2, 2, 3), dilation=(1, 2, 1))):
        assert gradcheck(fn, (xg,))
        assert gradgradcheck(fn, (xg,))


@pytest.mark.parametrize("case", POOL_CASES)
def test_avg_pool3d_values(case):
    k, s, p, _, ceil = case
    x = RNG.standard_normal((2, 2, 5, 6, 7))
    for cip, div in ((True, None), (False, None), (True, 5)):
        got = F.avg_pool3d(_t(x), k, s, p, ceil, cip, div)
        np.testing.assert_allclose(got.numpy(), _avg_pool3d_ref(x, k, s, p, ceil, cip, div), rtol=1e-12)
    np.testing.assert_allclose(F.avg_pool3d(_t(x[1]), k, s, p, ceil).numpy(),
                               _avg_pool3d_ref(x[1:], k, s, p, ceil, True, None)[0], rtol=1e-12)


def test_avg_pool3d_integers_float32_and_grad():
    xi = RNG.integers(-20, 20, (1, 2, 4, 4, 4))
    got = F.avg_pool3d(_t(xi), 3, 2, 1)
    assert got.dtype == tinytorch.int64
    np.testing.assert_array_equal(got.numpy(), np.trunc(_avg_pool3d_ref(xi.astype(float), 3, 2, 1, False, True, None)))
    x32 = tinytorch.tensor(RNG.standard_normal((1, 1, 4, 4, 4)), dtype=tinytorch.float32)
    assert F.avg_pool3d(x32, 2).dtype == tinytorch.float32
    xg = _t(RNG.standard_normal((1, 2, 4, 5, 4)), True)
    assert F.avg_pool3d(xg, 2).grad_fn.name() == "AvgPool3DBackward0"
    for fn in (lambda a: F.avg_pool3d(a, 3, 2, 1, ceil_mode=True, count_include_pad=False),
               lambda a: F.avg_pool3d(a[0], (2, 3, 2), (1, 2, 1), (1, 0, 1), divisor_override=5)):
        assert gradcheck(fn, (xg,))
        assert gradgradcheck(fn, (xg,))


@pytest.mark.parametrize("osize", [2, (3, None, 4), (1, 1, 1), (5, 6, 7), (4, 5, 3)])
def test_adaptive_pool3d_values(osize):
    x = RNG.standard_normal((2, 3, 5, 6, 7))
    o = [n if v is None else v for v, n in zip(_trip(osize), x.shape[2:])]
    np.testing.assert_allclose(F.adaptive_avg_pool3d(_t(x), osize).numpy(), _adaptive_ref(x, o, np.mean),
                               rtol=1e-12)
    out, idx = F.adaptive_max_pool3d(_t(x), osize, return_indices=True)
    np.testing.assert_array_equal(out.numpy(), _adaptive_ref(x, o, np.max))
    flat = x.reshape(2, 3, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, idx.numpy().reshape(2, 3, -1), 2).reshape(out.shape),
                                  out.numpy())
    o2, i2 = F.adaptive_max_pool3d_with_indices(_t(x[0]), osize)
    np.testing.assert_array_equal(i2.numpy(), idx.numpy()[0])


def test_adaptive_pool3d_gradients():
    x = _t(RNG.standard_normal((1, 2, 4, 5, 4)), True)
    assert F.adaptive_avg_pool3d(x, 2).grad_fn.name() == "AdaptiveAvgPool3DBackward0"
    assert F.adaptive_max_pool3d(x, 2).grad_fn.name() == "AdaptiveMaxPool3DBackward0"
    for fn in (lambda a: F.adaptive_avg_pool3d(a, (3, 2, None)), lambda a: F.adaptive_max_pool3d(a[0], (3, 2, 3))):
        assert gradcheck(fn, (x,))
        assert gradgradcheck(fn, (x,))


def test_pool3d_errors():
    x = _t(RNG.standard_normal((2, 3, 4, 5, 6)))
    with pytest.raises(RuntimeError, match=r"non-empty 4D or 5D \(batch mode\) tensor expected for input"):
        F.max_pool3d(_t(np.zeros((3, 4, 5))), 2)
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel size, but got pad=2"):
        F.max_pool3d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="pad must be non-negative, but got pad: -1"):
        F.avg_pool3d(x, 2, padding=-1)
    with pytest.raises(RuntimeError, match="max_pool3d: kernel_size must either be a single int, or a tuple of three"):
        F.max_pool3d(x, (2, 2))
    with pytest.raises(RuntimeError, match="avg_pool3d: stride must be omitted, a single int, or a tuple of three"):
        F.avg_pool3d(x, 2, (1, 1))
    with pytest.raises(RuntimeError, match="kernel size should be greater than zero, but got kT: 0 kH: 0 kW: 0"):
        F.max_pool3d(x, 0, 1)
    with pytest.raises(RuntimeError, match="stride should not be zero"):
        F.avg_pool3d(x, 2, 0)
    with pytest.raises(RuntimeError, match="dilation should be greater than zero, but got dilationT: 0"):
        F.max_pool3d(x, 2, dilation=0)
    with pytest.raises(RuntimeError, match=r"Given input size: \(3x4x5x6\). Calculated output size: \(3x0x1x1\)"):
        F.max_pool3d(x, 5)
    with pytest.raises(RuntimeError, match=r"input image \(T: 4 H: 5 W: 6\) smaller than kernel size \(kT: 5"):
        F.avg_pool3d(x, 5, padding=2)
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool3d(x, 2, divisor_override=0)
    with pytest.raises(RuntimeError, match="non-batch dimension 0 has length zero"):
        F.max_pool3d(_t(np.zeros((2, 0, 4, 4, 4))), 2)
    with pytest.raises(RuntimeError, match="adaptive_avg_pool3d: output_size must be 3"):
        F.adaptive_avg_pool3d(x, (2, 2))
    with pytest.raises(RuntimeError, match=r"adaptive_max_pool3d\(\): Expected 4D or 5D tensor, but got: \[3, 4, 5\]"):
        F.adaptive_max_pool3d(_t(np.zeros((3, 4, 5))), 2)
    with pytest.raises(RuntimeError, match="with dimension 2 being empty"):
        F.adaptive_avg_pool3d(_t(np.zeros((2, 3, 0, 4, 4))), 2)
    with pytest.raises(NotImplementedError, match="\"adaptive_avg_pool3d_cpu\" not implemented for 'Long'"):
        F.adaptive_avg_pool3d(_t(np.zeros((1, 1, 2, 2, 2), np.int64)), 1)


def test_pool3d_layers():
    x = tinytorch.randn(1, 2, 4, 4, 4)
    out, idx = tinytorch.nn.MaxPool3d(2, return_indices=True)(x)
    assert out.shape == (1, 2, 2, 2, 2)
    back = tinytorch.nn.MaxUnpool3d(2)(out, idx)
    np.testing.assert_array_equal(np.sort(back.numpy()[back.numpy() != 0]), np.sort(out.numpy().reshape(-1)))
    np.testing.assert_allclose(tinytorch.nn.AvgPool3d(2, 1, 1, count_include_pad=False)(x).numpy(),
                               F.avg_pool3d(x, 2, 1, 1, count_include_pad=False).numpy())
    assert tinytorch.nn.AdaptiveAvgPool3d((1, None, 2))(x).shape == (1, 2, 1, 4, 2)
    assert tinytorch.nn.AdaptiveMaxPool3d(1, return_indices=True)(x)[1].dtype == tinytorch.int64
    assert repr(tinytorch.nn.MaxPool3d(2)) == \
        "MaxPool3d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    assert repr(tinytorch.nn.MaxUnpool1d(2)) == "MaxUnpool1d(kernel_size=(2,), stride=(2,), padding=(0,))"
    assert repr(tinytorch.nn.LPPool2d(2, 3)) == "LPPool2d(norm_type=2, kernel_size=3, stride=None, ceil_mode=False)"


def test_cpu_autocast_policies():
    x = tinytorch.randn(1, 2, 4, 4, 4, dtype=tinytorch.bfloat16)
    with tinytorch.autocast("cpu"):
        assert F.max_pool3d(x, 2).dtype == tinytorch.float32  # PyTorch's fp32 list on CPU
        assert F.avg_pool3d(x, 2).dtype == tinytorch.float32
        assert F.adaptive_max_pool3d(x, 1).dtype == tinytorch.float32
        assert F.conv3d(tinytorch.randn(1, 2, 3, 3, 3), tinytorch.randn(2, 2, 2, 2, 2)).dtype == tinytorch.bfloat16
        grid = tinytorch.zeros(1, 2, 2, 2, 3, dtype=tinytorch.bfloat16)
        assert F.grid_sample(x, grid, align_corners=False).dtype == tinytorch.float32


# ------------------------------------------------------------------ max unpooling


def test_max_unpool_scatters_to_the_indices():
    x = RNG.standard_normal((2, 3, 4, 6))
    out, idx = F.max_pool2d(_t(x), 2, return_indices=True)
    got = F.max_unpool2d(out, idx, 2)
    want = np.zeros((2, 3, 24))
    np.put_along_axis(want, idx.numpy().reshape(2, 3, -1), out.numpy().reshape(2, 3, -1), 2)
    np.testing.assert_array_equal(got.numpy(), want.reshape(2, 3, 4, 6))
    assert F.max_unpool2d(out, idx, 2, output_size=(5, 7)).shape == (2, 3, 5, 7)
    assert F.max_unpool2d(out[0], idx[0], 2, output_size=[2, 3, 5, 7]).shape == (3, 5, 7)  # unbatched, full size
    o1, i1 = F.max_pool1d(_t(x[:, :, 0]), 2, return_indices=True)
    u1 = F.max_unpool1d(o1, i1, 2, output_size=[7])
    assert u1.shape == (2, 3, 7)
    np.testing.assert_array_equal(np.take_along_axis(u1.numpy(), i1.numpy(), 2), o1.numpy())
    x3 = RNG.standard_normal((1, 2, 4, 4, 6))
    o3, i3 = F.max_pool3d(_t(x3), 2, return_indices=True)
    u3 = F.max_unpool3d(o3, i3, 2)
    assert u3.shape == (1, 2, 4, 4, 6)
    np.testing.assert_array_equal(np.take_along_axis(u3.numpy().reshape(1, 2, -1), i3.numpy().reshape(1, 2, -1), 2),
                                  o3.numpy().reshape(1, 2, -1))
    assert (u3.numpy() != 0).sum() == o3.numpy().size


def test_max_unpool_gradients_and_errors():
    x = RNG.standard_normal((1, 2, 4, 4, 4))
    o, i = F.max_pool3d(_t(x), 2, return_indices=True)
    oo = _t(o.numpy(), True)
    assert F.max_unpool3d(oo, i, 2).grad_fn.name() == "MaxUnpool3DBackward0"
    assert gradcheck(lambda a: F.max_unpool3d(a, i, 2, output_size=(5, 5, 5)), (oo,))
    assert gradgradcheck(lambda a: F.max_unpool3d(a, i, 2), (oo,))
    o2, i2 = F.max_pool2d(_t(x[0]), 2, return_indices=True)
    assert gradcheck(lambda a: F.max_unpool2d(a, i2, 2), (_t(o2.numpy(), True),))
    o1, i1 = F.max_pool1d(_t(x[0, 0]), 2, return_indices=True)
    assert gradcheck(lambda a: F.max_unpool1d(a, i1, 2), (_t(o1.numpy(), True),))
    with pytest.raises(RuntimeError, match="elements in indices should be type int64 but got: Int"):
        F.max_unpool2d(o2, i2.int(), 2)
    with pytest.raises(RuntimeError, match=r"Expected shape of indices to be same as that of the input tensor"):
        F.max_unpool2d(o2, i2[..., :1], 2)
    with pytest.raises(RuntimeError, match=r"Found an invalid max index: \d+ \(output volumes are of size 4x4\)"):
        F.max_unpool2d(o2, i2 + 100, 2)
    with pytest.raises(RuntimeError, match=r"Found an invalid max index: -\d+ \(output volumes are of size 4x4x4\)"):
        F.max_unpool3d(o, i - 100, 2)
    with pytest.raises(ValueError, match=r'invalid output_size "\(9, 9\)" \(dim 0 must be between 2 and 6\)'):
        F.max_unpool2d(o2, i2, 2, output_size=(9, 9))
    with pytest.raises(ValueError, match="output_size should be a sequence containing 2 or 4 elements"):
        F.max_unpool2d(o2, i2, 2, output_size=(1, 2, 3))
    with pytest.raises(RuntimeError, match="Input to max_unpooling3d should be a 4d or 5d Tensor, but got a tensor "
                                           "with 3 dimensions"):
        F.max_unpool3d(o[0, 0], i[0, 0], 2)


# ------------------------------------------------------------------ LP pooling


def _lp_ref(x, p, k, s, nd):
    k = (k,) * nd if isinstance(k, int) else tuple(k)
    s = k if s is None else ((s,) * nd if isinstance(s, int) else tuple(s))
    S = x.shape[2:]
    o = [(n - kk) // ss + 1 for n, kk, ss in zip(S, k, s)]
    out = np.zeros(x.shape[:2] + tuple(o))
    for pos in itertools.product(*(range(v) for v in o)):
        sl = tuple(slice(a * ss, a * ss + kk) for a, ss, kk in zip(pos, s, k))
        win = x[(slice(None), slice(None)) + sl].reshape(x.shape[0], x.shape[1], -1)
        out[(slice(None), slice(None)) + pos] = win.max(-1) if p == math.inf else (win ** p).sum(-1) ** (1 / p)
    return out


@pytest.mark.parametrize("p", [2, 3.5, 1, math.inf])
def test_lp_pool_values(p):
    x = np.abs(RNG.standard_normal((2, 2, 5, 6, 7))) + 0.1
    np.testing.assert_allclose(F.lp_pool1d(_t(x[:, :, 0, 0]), p, 3, 2).numpy(), _lp_ref(x[:, :, 0, 0], p, 3, 2, 1),
                               rtol=1e-12)
    np.testing.assert_allclose(F.lp_pool2d(_t(x[:, :, 0]), p, (2, 3)).numpy(), _lp_ref(x[:, :, 0], p, (2, 3), None, 2),
                               rtol=1e-12)
    np.testing.assert_allclose(F.lp_pool3d(_t(x), p, 2, (1, 2, 3)).numpy(), _lp_ref(x, p, 2, (1, 2, 3), 3),
                               rtol=1e-12)
    np.testing.assert_allclose(tinytorch.nn.LPPool3d(p, 2)(_t(x)).numpy(), _lp_ref(x, p, 2, None, 3), rtol=1e-12)


def test_lp_pool_gradients():
    x = _t(np.abs(RNG.standard_normal((1, 2, 4, 4, 4))) + 0.5, True)
    for fn in (lambda a: F.lp_pool3d(a, 2, 2, 1), lambda a: F.lp_pool2d(a[0], 3, (1, 2)),
               lambda a: F.lp_pool1d(a[0, 0], 1.5, 2)):
        assert gradcheck(fn, (x,))
        assert gradgradcheck(fn, (x,))


# ------------------------------------------------------------------ fractional max pooling


def _fractional_ref(x, k, o, u):
    N, C, H, W = x.shape
    out, idx = np.zeros((N, C) + o), np.zeros((N, C) + o, np.int64)

    def starts(sample, n, oo, kk):
        if oo == 1:
            return [n - kk]
        alpha = (n - kk) / (oo - 1)
        return [int((i + sample) * alpha) - int(sample * alpha) for i in range(oo - 1)] + [n - kk]
    for b, c in itertools.product(range(N), range(C)):
        rows, cols = starts(u[b, c, 1], H, o[0], k[0]), starts(u[b, c, 0], W, o[1], k[1])
        for i, r in enumerate(rows):
            for j, q in enumerate(cols):
                win = x[b, c, r:r + k[0], q:q + k[1]]
                a = np.unravel_index(win.argmax(), win.shape)
                out[b, c, i, j], idx[b, c, i, j] = win[a], (r + a[0]) * W + q + a[1]
    return out, idx


@pytest.mark.parametrize("o", [(4, 5), (7, 9), (1, 1), (8, 10)])
def test_fractional_max_pool2d_values(o):
    x, u = RNG.standard_normal((2, 3, 9, 11)), RNG.random((2, 3, 2))
    out, idx = F.fractional_max_pool2d(_t(x), 2, o, return_indices=True, _random_samples=_t(u))
    want, wi = _fractional_ref(x, (2, 2), o, u)
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(idx.numpy(), wi)
    o2, i2 = F.fractional_max_pool2d_with_indices(_t(x[0]), 2, o, _random_samples=_t(u[:1]))
    np.testing.assert_array_equal(i2.numpy(), wi[0])
    ratio = F.fractional_max_pool2d(_t(x), (3, 2), output_ratio=(0.5, 0.5), _random_samples=_t(u))
    assert ratio.shape == (2, 3, 4, 5)
    tinytorch.manual_seed(0)
    assert F.fractional_max_pool2d(_t(x), 3, output_size=4).shape == (2, 3, 4, 4)  # samples drawn when not given


def test_fractional_max_pool2d_gradients_layer_and_errors():
    x = _t(RNG.standard_normal((2, 2, 6, 7)), True)
    u = _t(RNG.random((2, 2, 2)))
    assert F.fractional_max_pool2d(x, 2, 3, _random_samples=u).grad_fn.name() == "FractionalMaxPool2DBackward0"
    fn = lambda a: F.fractional_max_pool2d(a, (2, 3), (3, 4), _random_samples=u)  # noqa: E731
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))
    m = tinytorch.nn.FractionalMaxPool2d(2, output_ratio=0.5, return_indices=True, _random_samples=u)
    assert m(x)[0].shape == (2, 2, 3, 3)
    with pytest.raises(ValueError, match="requires specifying either an output size, or a pooling ratio"):
        tinytorch.nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError, match=r"output_ratio must be between 0 and 1 \(got 1.5\)"):
        tinytorch.nn.FractionalMaxPool2d(2, output_ratio=1.5)
    with pytest.raises(ValueError, match="fractional_max_pool2d requires specifying either an output_size or an "
                                         "output_ratio"):
        F.fractional_max_pool2d(x, 2)
    with pytest.raises(RuntimeError, match="fractional_max_pool2d\\(\\): pool height 3 too large relative to input "
                                           "height 6"):
        F.fractional_max_pool2d(x, 3, (5, 2))
    with pytest.raises(RuntimeError, match="Expect _random_samples.size\\(2\\) equals to 2; got 3."):
        F.fractional_max_pool2d(x, 2, 3, _random_samples=_t(np.zeros((2, 2, 3))))


# ------------------------------------------------------------------ grid_sample / affine_grid


GS_CASES = [(nd, mode, pad, ac) for nd in (2, 3) for mode in ("bilinear", "nearest", "bicubic")
            for pad in ("zeros", "border", "reflection") for ac in (False, True) if not (nd == 3 and mode == "bicubic")]


@pytest.mark.parametrize("nd,mode,pad,ac", GS_CASES)
def test_grid_sample_matches_the_point_reference(nd, mode, pad, ac):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 2, 3, 4, 5)[:nd + 2])
    grid = rng.uniform(-1.6, 1.6, (2, 3, 2, 2)[:nd + 1] + (nd,))
    got = F.grid_sample(_t(x), _t(grid), mode, pad, ac)
    assert got.shape == (2, 2) + grid.shape[1:-1]
    np.testing.assert_allclose(got.numpy(), _grid_sample_ref(x, grid, mode, pad, ac), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("nd,mode,pad,ac", [c for c in GS_CASES if c[3] is (c[2] == "border")])
def test_grid_sample_gradients_and_double_backward(nd, mode, pad, ac):
    rng = np.random.default_rng(2)
    x = _t(rng.standard_normal((1, 2, 3, 4, 3)[:nd + 2]), True)
    grid = _t(rng.uniform(-1.2, 1.2, (1, 2, 3, 2)[:nd + 1] + (nd,)), True)
    out = F.grid_sample(x, grid, mode, pad, ac)
    assert out.grad_fn.name() == f"GridSampler{nd}DBackward0"
    fn = lambda a, g: F.grid_sample(a, g, mode, pad, ac)  # noqa: E731
    assert gradcheck(fn, (x, grid))
    assert gradgradcheck(fn, (x, grid))


def test_grid_sample_identity_warning_float32_and_empty_batch():
    x = RNG.standard_normal((1, 3, 4, 5))
    theta = _t(np.array([[[1.0, 0, 0], [0, 1, 0]]]))
    for ac in (False, True):
        grid = F.affine_grid(theta, (1, 3, 4, 5), align_corners=ac)
        np.testing.assert_allclose(F.grid_sample(_t(x), grid, align_corners=ac).numpy(), x, atol=1e-12)
    with pytest.warns(UserWarning, match="Default grid_sample and affine_grid behavior has changed"):
        F.grid_sample(_t(x), F.affine_grid(theta, (1, 3, 4, 5), align_corners=False))
    x32 = tinytorch.tensor(x, dtype=tinytorch.float32)
    g32 = tinytorch.tensor(RNG.uniform(-1, 1, (1, 2, 2, 2)), dtype=tinytorch.float32)
    y = F.grid_sample(x32, g32, align_corners=False)
    assert y.dtype == tinytorch.float32
    np.testing.assert_allclose(y.numpy(), _grid_sample_ref(x, g32.numpy().astype(np.float64), "bilinear", "zeros",
                                                           False), rtol=1e-5, atol=1e-6)
    assert F.grid_sample(_t(np.zeros((0, 2, 3, 4))), _t(np.zeros((0, 5, 6, 2))), align_corners=False).shape == \
        (0, 2, 5, 6)
    nan_grid = np.full((1, 1, 1, 2), np.nan)  # with border padding a NaN in the grid reads as -1
    np.testing.assert_allclose(F.grid_sample(_t(x), _t(nan_grid), padding_mode="border", align_corners=True).numpy(),
                               x[:, :, :1, :1])
    # 2d bilinear with zero padding: a NaN output, no gradient to the input, NaN to the grid's other coordinate
    xs, g = _t(x, True), _t(np.array([[[[np.nan, 0.3]]]]), True)
    out = F.grid_sample(xs, g, align_corners=False)
    assert np.isnan(out.detach().numpy()).all()
    out.sum().backward()
    assert not xs.grad.numpy().any()
    np.testing.assert_array_equal(np.isnan(g.grad.numpy()).ravel(), [False, True])


def test_grid_sample_errors():
    x = _t(np.zeros((1, 2, 3, 4)))
    with pytest.raises(ValueError, match="expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: 'foo'"):
        F.grid_sample(x, _t(np.zeros((1, 5, 6, 2))), mode="foo")
    with pytest.raises(ValueError, match="expected padding_mode to be 'zeros', 'border', or 'reflection'"):
        F.grid_sample(x, _t(np.zeros((1, 5, 6, 2))), padding_mode="foo")
    with pytest.raises(RuntimeError, match="expected grid and input to have same batch size"):
        F.grid_sample(x, _t(np.zeros((2, 5, 6, 2))), align_corners=False)
    with pytest.raises(RuntimeError, match="expected grid to have size 2 in last dimension"):
        F.grid_sample(x, _t(np.zeros((1, 5, 6, 3))), align_corners=False)
    with pytest.raises(RuntimeError, match="expected input to have non-empty spatial dimensions"):
        F.grid_sample(_t(np.zeros((1, 2, 0, 4))), _t(np.zeros((1, 5, 6, 2))), align_corners=False)
    with pytest.raises(RuntimeError, match="expected 4D input and grid with same number of dimensions"):
        F.grid_sample(x, _t(np.zeros((1, 5, 2))), align_corners=False)
    with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D input"):
        F.grid_sample(_t(np.zeros((1, 2, 3, 4, 5))), _t(np.zeros((1, 5, 6, 7, 3))), "bicubic", align_corners=False)
    with pytest.raises(RuntimeError, match="expected scalar type Double but found Float"):
        F.grid_sample(x, tinytorch.zeros(1, 5, 6, 2), align_corners=False)


def test_affine_grid_values_gradients_and_errors():
    theta = RNG.standard_normal((2, 2, 3))
    theta3 = RNG.standard_normal((2, 3, 4))
    for ac in (False, True):
        np.testing.assert_allclose(F.affine_grid(_t(theta), (2, 1, 3, 4), ac).numpy(),
                                   _affine_grid_ref(theta, (2, 1, 3, 4), ac), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(F.affine_grid(_t(theta3), [2, 1, 2, 3, 4], ac).numpy(),
                                   _affine_grid_ref(theta3, (2, 1, 2, 3, 4), ac), rtol=1e-12, atol=1e-14)
    t = _t(theta, True)
    assert F.affine_grid(t, (2, 1, 3, 4), False).grad_fn.name() == "AffineGridGeneratorBackward0"
    assert gradcheck(lambda a: F.affine_grid(a, (2, 1, 3, 4), False), (t,))
    assert gradgradcheck(lambda a: F.affine_grid(a, (2, 1, 3, 4), True), (t,))
    assert gradcheck(lambda a: F.affine_grid(a, (2, 1, 2, 3, 2), False), (_t(theta3, True),))
    with pytest.warns(UserWarning, match="affine_grid behavior has changed for unit-size grids"):
        assert F.affine_grid(_t(theta), (2, 1, 1, 4), align_corners=True).shape == (2, 1, 4, 2)
    with pytest.raises(ValueError, match="Expected theta to have floating point type"):
        F.affine_grid(_t(np.zeros((2, 2, 3), np.int64)), (2, 1, 4, 4), False)
    with pytest.raises(ValueError, match=r"Expected a batch of 3D affine matrices of shape Nx3x4 for size "
                                         r"\(2, 1, 4, 4, 4\)"):
        F.affine_grid(_t(theta), (2, 1, 4, 4, 4), False)
    with pytest.raises(NotImplementedError, match="affine_grid only supports 4D and 5D sizes"):
        F.affine_grid(_t(theta), (2, 1, 4), False)
    with pytest.raises(ValueError, match=r"Expected non-zero, positive output size. Got \(2, 1, 0, 4\)"):
        F.affine_grid(_t(theta), (2, 1, 0, 4), False)
    with pytest.raises(RuntimeError, match=r"batch2 tensor to be: \[3, 3\] but got: \[2, 3\]"):
        F.affine_grid(_t(theta), (3, 1, 4, 4), False)


# ------------------------------------------------------------------ PyTorch parity


@pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")
def test_against_pytorch():
    import torch

    def check(name, ours_fn, theirs_fn, arrays, grad=True):
        ts = [tinytorch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
        rs = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
        o, r = ours_fn(*ts), theirs_fn(*rs)
        o, r = (o if isinstance(o, tuple) else (o,)), (r if isinstance(r, tuple) else (r,))
        for a, b in zip(o, r):
            assert tuple(a.shape) == tuple(b.shape), name
            assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], name
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-9, atol=1e-11, err_msg=name)
        if grad:
            (o[0] * o[0]).sum().backward()
            (r[0] * r[0]).sum().backward()
            for a, b in zip(ts, rs):
                if b.grad is not None:
                    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-11, err_msg=name)

    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal((2, 4, 5, 6, 5)), rng.standard_normal((6, 2, 2, 3, 2)), rng.standard_normal(6)
    TF, PF = F, torch.nn.functional
    check("conv3d", lambda *a: TF.conv3d(*a, (1, 2, 1), (1, 0, 1), (2, 1, 1), 2),
          lambda *a: PF.conv3d(*a, (1, 2, 1), (1, 0, 1), (2, 1, 1), 2), [x, w, b])
    wt = rng.standard_normal((4, 3, 2, 3, 2))
    check("conv_transpose3d", lambda *a: TF.conv_transpose3d(*a, (2, 1, 2), 1, (1, 0, 0), 2, (1, 2, 1)),
          lambda *a: PF.conv_transpose3d(*a, (2, 1, 2), 1, (1, 0, 0), 2, (1, 2, 1)), [x, wt, b])
    for k, s, p, d, ceil in POOL_CASES:
        check("max_pool3d", lambda a: TF.max_pool3d(a, k, s, p, d, ceil, True),
              lambda a: PF.max_pool3d(a, k, s, p, d, ceil, True), [x])
        for cip, div in ((True, None), (False, None), (False, 3)):
            check("avg_pool3d", lambda a: TF.avg_pool3d(a, k, s, p, ceil, cip, div),
                  lambda a: PF.avg_pool3d(a, k, s, p, ceil, cip, div), [x])
    xi = rng.integers(-9, 9, (1, 2, 5, 5, 5))
    check("avg_pool3d int", lambda a: TF.avg_pool3d(a, 3, 2, 1), lambda a: PF.avg_pool3d(a, 3, 2, 1), [xi], False)
    check("max_pool3d int", lambda a: TF.max_pool3d(a, 3, 2, 1), lambda a: PF.max_pool3d(a, 3, 2, 1), [xi], False)
    for osz in (2, (3, None, 4), (4, 5, 3)):
        check("adaptive_avg_pool3d", lambda a: TF.adaptive_avg_pool3d(a, osz),
              lambda a: PF.adaptive_avg_pool3d(a, osz), [x])
        check("adaptive_max_pool3d", lambda a: TF.adaptive_max_pool3d(a, osz, True),
              lambda a: PF.adaptive_max_pool3d(a, osz, True), [x])
    xe = rng.standard_normal((2, 3, 4, 6, 6))
    o, i = PF.max_pool3d(torch.tensor(xe), 2, return_indices=True)
    check("max_unpool3d", lambda a, j: TF.max_unpool3d(a, j, 2, output_size=(5, 7, 7)),
          lambda a, j: PF.max_unpool3d(a, j, 2, output_size=(5, 7, 7)), [o.numpy(), i.numpy()])
    o, i = PF.max_pool1d(torch.tensor(xe[:, 0, 0]), 2, return_indices=True)
    check("max_unpool1d", lambda a, j: TF.max_unpool1d(a, j, 2), lambda a, j: PF.max_unpool1d(a, j, 2),
          [o.numpy(), i.numpy()])
    xp = np.abs(xe) + 0.1
    for nt in (2, 3.5, math.inf):
        check("lp_pool3d", lambda a: TF.lp_pool3d(a, nt, 2, (1, 2, 2)), lambda a: PF.lp_pool3d(a, nt, 2, (1, 2, 2)),
              [xp])
        check("lp_pool1d", lambda a: TF.lp_pool1d(a, nt, 3, 2), lambda a: PF.lp_pool1d(a, nt, 3, 2), [xp[:, 0, 0]])
    for dt in (np.float32, np.float64):
        x4, u = rng.standard_normal((2, 3, 9, 11)).astype(dt), rng.random((2, 3, 2)).astype(dt)
        check("fractional_max_pool2d", lambda a, v: TF.fractional_max_pool2d(a, 2, (4, 5), None, True, v),
              lambda a, v: PF.fractional_max_pool2d(a, 2, (4, 5), None, True, v), [x4, u], False)
    for nd, mode, pad, ac in GS_CASES:
        xs = rng.standard_normal((2, 3, 4, 5, 6)[:nd + 2])
        gs = rng.uniform(-1.4, 1.4, (2, 3, 4, 2)[:nd + 1] + (nd,))
        check(f"grid_sample {nd} {mode} {pad} {ac}", lambda a, g: TF.grid_sample(a, g, mode, pad, ac),
              lambda a, g: PF.grid_sample(a, g, mode, pad, ac), [xs, gs])
    for size in ((2, 1, 3, 4), (2, 1, 2, 3, 4)):
        th = rng.standard_normal((2, len(size) - 2, len(size) - 1))
        for ac in (False, True):
            check("affine_grid", lambda a: TF.affine_grid(a, size, ac), lambda a: PF.affine_grid(a, size, ac), [th])


@pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")
def test_error_types_and_messages_match_pytorch():
    import torch

    def r(lib, *s):
        return lib.tensor(np.random.default_rng(0).standard_normal(s))

    cases = [
        lambda L: L.nn.functional.max_pool3d(r(L, 2, 3, 4, 5, 6), 2, padding=2),
        lambda L: L.nn.functional.max_pool3d(r(L, 2, 3, 4, 5, 6), 2, -1),
        lambda L: L.nn.functional.avg_pool3d(r(L, 2, 3, 4, 5, 6), 5),
        lambda L: L.nn.functional.avg_pool3d(r(L, 2, 0, 4, 4, 4), 2),
        lambda L: L.nn.functional.adaptive_avg_pool3d(r(L, 2, 3, 0, 5, 6), 2),
        lambda L: L.nn.functional.conv3d(r(L, 1, 2, 3, 3, 3), r(L, 4, 2, 4, 4, 4)),
        lambda L: L.nn.functional.conv_transpose3d(r(L, 1, 2, 3, 3, 3), r(L, 2, 2, 2, 2, 2), output_padding=2),
        lambda L: L.nn.functional.max_unpool2d(r(L, 1, 1, 2, 2), r(L, 1, 1, 2, 1).long(), 2),
        lambda L: L.nn.functional.grid_sample(r(L, 1, 2, 3, 4).float(), r(L, 1, 5, 6, 2), align_corners=False),
        lambda L: L.nn.functional.grid_sample(r(L, 2, 3, 4), r(L, 2, 6, 1), align_corners=False),
        lambda L: L.nn.functional.affine_grid(r(L, 2, 2, 3), (2, 1, 0, 4), align_corners=False),
        lambda L: L.nn.functional.fractional_max_pool2d(r(L, 1, 2, 8, 9), 3, output_size=(4, 8)),
    ]
    for case in cases:
        got = []
        for lib in (torch, tinytorch):
            with pytest.raises(Exception) as info:
                case(lib)
            got.append((type(info.value).__name__, str(info.value)))
        assert got[0] == got[1]
