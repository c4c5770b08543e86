"""Convolution, pooling, normalisation, resampling, fold and channel-dropout layers: values against direct NumPy
references, gradcheck in float64, PyTorch's argument errors and reprs, and (when torch is importable) parity with
PyTorch's modules on identical weights in train and eval mode, through a few optimizer steps."""
import math

import numpy as np
import pytest

import tinytorch
import tinytorch.nn as nn
import tinytorch.nn.functional as F
from tinytorch.autograd import gradcheck

RNG = np.random.default_rng(0)


def _leaf(*shape, seed=None):
    rng = RNG if seed is None else np.random.default_rng(seed)
    return tinytorch.tensor(rng.standard_normal(shape), requires_grad=True)


def _np(t):
    return np.asarray(t.detach().numpy())


# ------------------------------------------------------------------ NumPy references (direct loops)


def _ref_conv2d(x, w, b, s, p, d, g):
    N, C, H, W = x.shape
    O, Cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh = (H + 2 * p[0] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (W + 2 * p[1] - d[1] * (kw - 1) - 1) // s[1] + 1
    out = np.zeros((N, O, oh, ow))
    Og = O // g
    for o in range(O):
        gi = o // Og
        for y in range(oh):
            for x_ in range(ow):
                patch = xp[:, gi * Cg:(gi + 1) * Cg, y * s[0]:y * s[0] + d[0] * (kh - 1) + 1:d[0],
                           x_ * s[1]:x_ * s[1] + d[1] * (kw - 1) + 1:d[1]]
                out[:, o, y, x_] = (patch * w[o]).sum((1, 2, 3))
    return out if b is None else out + b[None, :, None, None]


def _ref_conv_transpose2d(x, w, b, s, p, op, g, d):
    """Scatter every input pixel times its kernel into the output (the definition)."""
    N, Cin, H, W = x.shape
    _, Cog, kh, kw = w.shape
    Hf = (H - 1) * s[0] + d[0] * (kh - 1) + 1 + op[0]
    Wf = (W - 1) * s[1] + d[1] * (kw - 1) + 1 + op[1]
    full = np.zeros((N, Cog * g, Hf, Wf))
    Cig = Cin // g
    for c in range(Cin):
        gi = c // Cig
        for y in range(H):
            for x_ in range(W):
                for i in range(kh):
                    for j in range(kw):
                        full[:, gi * Cog:(gi + 1) * Cog, y * s[0] + i * d[0], x_ * s[1] + j * d[1]] += \
                            x[:, c, y, x_, None] * w[c, :, i, j]
    out = full[:, :, p[0]:Hf - p[0], p[1]:Wf - p[1]]
    return out if b is None else out + b[None, :, None, None]


CONV_CASES = [  # stride, padding, dilation, groups, kernel
    ((1, 1), (1, 1), (1, 1), 1, (3, 3)),
    ((2, 2), (1, 0), (1, 1), 1, (3, 3)),
    ((1, 1), (0, 2), (2, 1), 2, (3, 2)),
    ((2, 1), (0, 0), (1, 1), 1, (1, 1)),
    ((1, 2), (1, 1), (2, 2), 4, (2, 3)),
    ((1, 1), (0, 0), (1, 1), 2, (1, 1)),
]


@pytest.mark.parametrize("s,p,d,g,k", CONV_CASES)
def test_conv2d_values_and_gradcheck(s, p, d, g, k):
    x, w, b = _leaf(2, 4, 7, 8), _leaf(8, 4 // g, *k), _leaf(8)
    out = F.conv2d(x, w, b, s, p, d, g)
    np.testing.assert_allclose(_np(out), _ref_conv2d(_np(x), _np(w), _np(b), s, p, d, g), atol=1e-10)
    assert gradcheck(lambda a, ww, bb: F.conv2d(a, ww, bb, s, p, d, g), (x, w, b))


@pytest.mark.parametrize("s,p,d,g,k", CONV_CASES)
def test_conv_transpose2d_values_and_gradcheck(s, p, d, g, k):
    x, w, b = _leaf(2, 4, 3, 4), _leaf(4, 6 // (2 if g == 4 else g) if g != 4 else 2, *k), _leaf(6 if g != 4 else 8)
    ops = [(0, 0), (s[0] - 1, s[1] - 1)] if max(s) > 1 else [(0, 0)]
    for op in ops:
        out = F.conv_transpose2d(x, w, b, s, p, op, g, d)
        np.testing.assert_allclose(_np(out), _ref_conv_transpose2d(_np(x), _np(w), _np(b), s, p, op, g, d), atol=1e-10)
        assert gradcheck(lambda a, ww, bb: F.conv_transpose2d(a, ww, bb, s, p, op, g, d), (x, w, b))


def test_conv1d_and_transpose1d_match_2d_of_height_one():
    x, w, b = _leaf(2, 3, 9), _leaf(4, 3, 3), _leaf(4)
    out = F.conv1d(x, w, b, 2, 1, 2)
    ref = _ref_conv2d(_np(x)[:, :, None], _np(w)[:, :, None], _np(b), (1, 2), (0, 1), (1, 2), 1)[:, :, 0]
    np.testing.assert_allclose(_np(out), ref, atol=1e-10)
    assert gradcheck(lambda a, ww, bb: F.conv1d(a, ww, bb, 2, 1, 2), (x, w, b))
    assert gradcheck(lambda a, ww: F.conv1d(a, ww, None, 1, "same", 2), (x, w))
    wt = _leaf(3, 2, 3)
    out = F.conv_transpose1d(x, wt, None, 2, 1, 1, 1, 1)
    ref = _ref_conv_transpose2d(_np(x)[:, :, None], _np(wt)[:, :, None], None, (1, 2), (0, 1), (0, 1), 1, (1, 1))
    np.testing.assert_allclose(_np(out), ref[:, :, 0], atol=1e-10)
    assert gradcheck(lambda a, ww: F.conv_transpose1d(a, ww, None, 2, 1, 1), (x, wt))


def test_conv_unbatched_and_same_padding_even_kernel():
    x, w = _leaf(3, 6, 5), _leaf(2, 3, 2, 4)
    out = F.conv2d(x, w, padding="same")
    assert out.shape == (2, 6, 5)
    # PyTorch pads 'same' asymmetrically: the extra row/col goes to the bottom/right.
    ref = _ref_conv2d(np.pad(_np(x)[None], ((0, 0), (0, 0), (0, 1), (1, 2))), _np(w), None, (1, 1), (0, 0), (1, 1), 1)
    np.testing.assert_allclose(_np(out), ref[0], atol=1e-10)
    assert gradcheck(lambda a, ww: F.conv2d(a, ww, padding="same"), (x, w))
    assert F.conv2d(x, w, padding="valid").shape == (2, 5, 2)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv2d_padding_modes(mode):
    m = nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode=mode).double()
    x = _leaf(1, 2, 5, 6)
    ref = F.conv2d(F.pad(x, (2, 2, 1, 1), mode=mode), m.weight, m.bias)
    np.testing.assert_array_equal(_np(m(x)), _np(ref))
    assert m(x).shape == (1, 3, 5, 8)
    assert gradcheck(lambda a: m(a), (x,))
    assert "padding_mode=" + mode in repr(m)


def test_conv_errors_and_module_arguments():
    with pytest.raises(RuntimeError, match=r"Given groups=1, weight of size \[4, 3, 3, 3\], expected "
                                           r"input\[1, 2, 5, 5\] to have 3 channels, but got 2 channels instead"):
        F.conv2d(tinytorch.randn(1, 2, 5, 5), tinytorch.randn(4, 3, 3, 3))
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D \\(batched\\) input to conv2d"):
        F.conv2d(tinytorch.randn(5, 5), tinytorch.randn(4, 3, 3, 3))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        F.conv2d(tinytorch.randn(1, 3, 2, 2), tinytorch.randn(4, 3, 3, 3))
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided convolutions"):
        F.conv2d(tinytorch.randn(1, 3, 5, 5), tinytorch.randn(4, 3, 3, 3), stride=2, padding="same")
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="out_channels must be divisible by groups"):
        nn.Conv2d(4, 3, 3, groups=2)
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        nn.Conv2d(4, 4, 3, padding="full")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(4, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
        nn.ConvTranspose2d(4, 4, 3, padding_mode="reflect")
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride or dilation"):
        F.conv_transpose2d(tinytorch.randn(1, 2, 3, 3), tinytorch.randn(2, 2, 3, 3), output_padding=1)
    c = nn.Conv2d(4, 8, (3, 5), stride=2, padding=1, dilation=(1, 2), groups=2, bias=False)
    assert repr(c) == "Conv2d(4, 8, kernel_size=(3, 5), stride=(2, 2), padding=(1, 1), dilation=(1, 2), groups=2, " \
                      "bias=False)"
    assert c.weight.shape == (8, 2, 3, 5) and c.bias is None
    bound = 1 / math.sqrt(2 * 3 * 5)
    assert np.abs(_np(c.weight)).max() <= bound + 1e-7  # kaiming_uniform(a=sqrt(5)) == U(-1/sqrt(fan_in), ...)
    assert repr(nn.Conv1d(2, 3, 3)) == "Conv1d(2, 3, kernel_size=(3,), stride=(1,))"
    t = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    assert t.weight.shape == (4, 3, 3, 3)
    assert repr(t) == "ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), " \
                      "output_padding=(1, 1), groups=2)"
    x = tinytorch.randn(1, 4, 5, 5)
    assert t(x).shape == (1, 6, 10, 10)
    assert t(x, output_size=[9, 9]).shape == (1, 6, 9, 9)
    with pytest.raises(ValueError, match="requested an output size of"):
        t(x, output_size=[12, 12])
    c.reset_parameters()
    assert nn.Conv1d(2, 4, 3)(tinytorch.randn(2, 7)).shape == (4, 5)


# ------------------------------------------------------------------ pooling


def _ref_pool(x, k, s, p, d, ceil_mode, op, count_include_pad=True, divisor=None):
    N, C, H, W = x.shape

    def osize(n, kk, ss, pp, dd):
        num = n + 2 * pp - dd * (kk - 1) - 1
        o = (math.ceil(num / ss) if ceil_mode else num // ss) + 1
        if ceil_mode and (o - 1) * ss >= n + pp:
            o -= 1
        return o
    oh, ow = osize(H, k[0], s[0], p[0], d[0]), osize(W, k[1], s[1], p[1], d[1])
    out = np.zeros((N, C, oh, ow))
    idx = np.zeros((N, C, oh, ow), np.int64)
    for y in range(oh):
        for x_ in range(ow):
            rows = [y * s[0] - p[0] + i * d[0] for i in range(k[0])]
            cols = [x_ * s[1] - p[1] + j * d[1] for j in range(k[1])]
            if op == "max":
                best = np.full((N, C), -np.inf)
                for r in rows:
                    for c in cols:
                        if 0 <= r < H and 0 <= c < W:
                            better = x[:, :, r, c] > best
                            best = np.where(better, x[:, :, r, c], best)
                            idx[:, :, y, x_] = np.where(better, r * W + c, idx[:, :, y, x_])
                out[:, :, y, x_] = best
            else:
                hs, ws = rows[0], cols[0]
                he, we = min(hs + k[0], H + p[0]), min(ws + k[1], W + p[1])
                size = (he - hs) * (we - ws)
                hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, H), min(we, W)
                tot = x[:, :, hs:he, ws:we].sum((2, 3))
                div = divisor or (size if count_include_pad else (he - hs) * (we - ws))
                out[:, :, y, x_] = tot / div
    return out, idx


MAX_CASES = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
             dict(kernel_size=3, stride=2, ceil_mode=True),
             dict(kernel_size=(2, 3), stride=(1, 1), dilation=2, padding=1),
             dict(kernel_size=2, stride=2, ceil_mode=True)]


@pytest.mark.parametrize("kw", MAX_CASES)
def test_max_pool2d(kw):
    x = _leaf(2, 3, 7, 6)
    out, idx = F.max_pool2d(x, return_indices=True, **kw)
    k = kw["kernel_size"] if isinstance(kw["kernel_size"], tuple) else (kw["kernel_size"],) * 2
    s = kw.get("stride", k)
    s = s if isinstance(s, tuple) else (s, s)
    ref, ridx = _ref_pool(_np(x), k, s, (kw.get("padding", 0),) * 2, (kw.get("dilation", 1),) * 2,
                          kw.get("ceil_mode", False), "max")
    np.testing.assert_array_equal(_np(out), ref)
    np.testing.assert_array_equal(idx.numpy(), ridx)
    assert idx.dtype == tinytorch.int64
    assert gradcheck(lambda a: F.max_pool2d(a, **kw), (x,))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
                                dict(kernel_size=3, stride=2, ceil_mode=True, padding=1),
                                dict(kernel_size=3, stride=2, ceil_mode=True, padding=1, count_include_pad=False),
                                dict(kernel_size=3, divisor_override=5)])
def test_avg_pool2d(kw):
    x = _leaf(2, 3, 7, 6)
    out = F.avg_pool2d(x, **kw)
    k = (kw["kernel_size"],) * 2
    s = (kw.get("stride", kw["kernel_size"]),) * 2
    ref, _ = _ref_pool(_np(x), k, s, (kw.get("padding", 0),) * 2, (1, 1), kw.get("ceil_mode", False), "avg",
                       kw.get("count_include_pad", True), kw.get("divisor_override"))
    np.testing.assert_allclose(_np(out), ref, atol=1e-12)
    assert gradcheck(lambda a: F.avg_pool2d(a, **kw), (x,))


def test_pool1d_adaptive_and_modules():
    x1 = _leaf(2, 3, 9)
    out, idx = F.max_pool1d(x1, 3, 2, 1, return_indices=True)
    ref, ridx = _ref_pool(_np(x1)[:, :, None], (1, 3), (1, 2), (0, 1), (1, 1), False, "max")
    np.testing.assert_array_equal(_np(out), ref[:, :, 0])
    np.testing.assert_array_equal(idx.numpy(), ridx[:, :, 0])
    ref, _ = _ref_pool(_np(x1)[:, :, None], (1, 3), (1, 2), (0, 1), (1, 1), True, "avg")
    np.testing.assert_allclose(_np(F.avg_pool1d(x1, 3, 2, 1, ceil_mode=True)), ref[:, :, 0], atol=1e-12)
    for f in (lambda a: F.max_pool1d(a, 3, 2, 1), lambda a: F.avg_pool1d(a, 3, 2, 1),
              lambda a: F.adaptive_avg_pool1d(a, 4), lambda a: F.adaptive_max_pool1d(a, 4)):
        assert gradcheck(f, (x1,))
    x = _leaf(2, 3, 7, 6)
    a = F.adaptive_avg_pool2d(x, (3, 4))
    xn = _np(x)
    for i in range(3):
        for j in range(4):
            h0, h1 = (i * 7) // 3, -((-(i + 1) * 7) // 3)
            w0, w1 = (j * 6) // 4, -((-(j + 1) * 6) // 4)
            np.testing.assert_allclose(_np(a)[:, :, i, j], xn[:, :, h0:h1, w0:w1].mean((2, 3)), atol=1e-12)
            m = xn[:, :, h0:h1, w0:w1].reshape(2, 3, -1)
            np.testing.assert_array_equal(_np(F.adaptive_max_pool2d(x, (3, 4)))[:, :, i, j], m.max(-1))
    o, idx = F.adaptive_max_pool2d(x, (3, None), return_indices=True)
    assert o.shape == (2, 3, 3, 6) and idx.dtype == tinytorch.int64
    np.testing.assert_array_equal(np.take_along_axis(xn.reshape(2, 3, -1), idx.numpy().reshape(2, 3, -1), -1),
                                  _np(o).reshape(2, 3, -1))
    assert gradcheck(lambda t: F.adaptive_avg_pool2d(t, (3, 4)), (x,))
    assert gradcheck(lambda t: F.adaptive_max_pool2d(t, (3, 4)), (x,))
    np.testing.assert_allclose(_np(nn.AdaptiveAvgPool2d(1)(x)), xn.mean((2, 3), keepdims=True), atol=1e-12)
    assert repr(nn.MaxPool2d(3, 2, 1)) == "MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=False)"
    assert repr(nn.AvgPool2d(2)) == "AvgPool2d(kernel_size=2, stride=2, padding=0)"
    assert repr(nn.AvgPool1d(2)) == "AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))"
    assert repr(nn.AdaptiveAvgPool2d((1, 1))) == "AdaptiveAvgPool2d(output_size=(1, 1))"
    assert nn.MaxPool2d(2, return_indices=True)(x)[1].shape == (2, 3, 3, 3)
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel size"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="3D or 4D \\(batch mode\\) tensor"):
        F.max_pool2d(tinytorch.randn(3, 3), 2)


# ------------------------------------------------------------------ batch norm


def test_batch_norm_training_eval_and_running_stats():
    x, w, b = _leaf(4, 3, 5, 2), _leaf(3), _leaf(3)
    bn = nn.BatchNorm2d(3).double()
    with tinytorch.no_grad():
        bn.weight.copy_(w)
        bn.bias.copy_(b)
    xn = _np(x)
    mean, var = xn.mean((0, 2, 3)), xn.var((0, 2, 3))
    y = bn(x)
    ref = (xn - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5) * _np(w)[:, None, None] + \
        _np(b)[:, None, None]
    np.testing.assert_allclose(_np(y), ref, atol=1e-10)
    n = xn.size / 3
    np.testing.assert_allclose(_np(bn.running_mean), 0.1 * mean, atol=1e-12)
    np.testing.assert_allclose(_np(bn.running_var), 0.9 + 0.1 * var * n / (n - 1), atol=1e-12)
    assert int(bn.num_batches_tracked) == 1 and bn.num_batches_tracked.dtype == tinytorch.int64
    bn.eval()
    rm, rv = _np(bn.running_mean), _np(bn.running_var)
    ref = (xn - rm[:, None, None]) / np.sqrt(rv[:, None, None] + 1e-5) * _np(w)[:, None, None] + _np(b)[:, None, None]
    np.testing.assert_allclose(_np(bn(x)), ref, atol=1e-10)
    assert int(bn.num_batches_tracked) == 1
    rm_t, rv_t = tinytorch.tensor(rm), tinytorch.tensor(rv)
    assert gradcheck(lambda a, ww, bb: F.batch_norm(a, None, None, ww, bb, True), (x, w, b))
    assert gradcheck(lambda a, ww, bb: F.batch_norm(a, rm_t, rv_t, ww, bb, False), (x, w, b))
    assert gradcheck(lambda a: F.batch_norm(a, None, None, training=True), (x,))
    assert repr(bn) == "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)"


def test_batch_norm_cumulative_average_and_no_running_stats():
    bn = nn.BatchNorm1d(2, momentum=None).double()
    xs = [RNG.standard_normal((5, 2)) for _ in range(3)]
    for x in xs:
        bn(tinytorch.tensor(x))
    np.testing.assert_allclose(_np(bn.running_mean), np.mean([x.mean(0) for x in xs], 0), atol=1e-12)
    np.testing.assert_allclose(_np(bn.running_var), np.mean([x.var(0, ddof=1) for x in xs], 0), atol=1e-12)
    bn2 = nn.BatchNorm1d(2, affine=False, track_running_stats=False).double()
    assert bn2.running_mean is None and bn2.weight is None and list(bn2.state_dict()) == []
    bn2.eval()  # no running stats: eval mode still normalises by batch statistics
    x = tinytorch.tensor(xs[0])
    np.testing.assert_allclose(_np(bn2(x)), (xs[0] - xs[0].mean(0)) / np.sqrt(xs[0].var(0) + 1e-5), atol=1e-10)
    x3 = tinytorch.tensor(RNG.standard_normal((2, 2, 4)))
    assert bn(x3).shape == (2, 2, 4)
    with pytest.raises(ValueError, match="expected 2D or 3D input \\(got 4D input\\)"):
        bn(tinytorch.randn(2, 2, 2, 2).double())
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        bn(tinytorch.randn(1, 2).double())
    with pytest.raises(ValueError, match="expected 4D input \\(got 3D input\\)"):
        nn.BatchNorm2d(2)(tinytorch.randn(2, 2, 2))
    sd = nn.BatchNorm2d(2).state_dict()
    assert list(sd) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]


def test_sync_batchnorm_single_process_and_conversion():
    model = nn.Sequential(nn.Conv2d(2, 2, 1), nn.BatchNorm2d(2), nn.Sequential(nn.BatchNorm1d(2)))
    w = model[1].weight
    conv = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert type(conv[1]) is nn.SyncBatchNorm and type(conv[2][0]) is nn.SyncBatchNorm
    assert conv[1].weight is w
    x = tinytorch.randn(4, 2, 3, 3)
    # Without a process group SyncBatchNorm is BatchNorm.
    ref = nn.BatchNorm2d(2)
    np.testing.assert_allclose(_np(conv[1](x)), _np(ref(x)), atol=1e-6)
    np.testing.assert_allclose(_np(conv[1].running_var), _np(ref.running_var), atol=1e-6)
    with pytest.raises(ValueError, match="expected at least 2D input \\(got 1D input\\)"):
        conv[1](tinytorch.randn(3))


# ------------------------------------------------------------------ group / instance / rms / local response norm


def test_group_instance_rms_and_local_response_norm():
    x, w, b = _leaf(2, 4, 3, 5), _leaf(4), _leaf(4)
    xn = _np(x)
    g = xn.reshape(2, 2, -1)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(xn.shape)
    np.testing.assert_allclose(_np(F.group_norm(x, 2, w, b)), ref * _np(w)[:, None, None] + _np(b)[:, None, None],
                               atol=1e-10)
    assert gradcheck(lambda a, ww, bb: F.group_norm(a, 2, ww, bb), (x, w, b))
    gn = nn.GroupNorm(2, 4)
    assert repr(gn) == "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)"
    with pytest.raises(ValueError, match=r"num_channels \(4\) must be divisible by num_groups \(3\)"):
        nn.GroupNorm(3, 4)
    with pytest.raises(RuntimeError, match="Expected number of channels in input to be divisible by num_groups"):
        F.group_norm(x, 3)
    inst = xn.reshape(2, 4, -1)
    iref = ((inst - inst.mean(-1, keepdims=True)) / np.sqrt(inst.var(-1, keepdims=True) + 1e-5)).reshape(xn.shape)
    np.testing.assert_allclose(_np(F.instance_norm(x)), iref, atol=1e-10)
    assert gradcheck(lambda a, ww, bb: F.instance_norm(a, None, None, ww, bb), (x, w, b))
    m = nn.InstanceNorm2d(4, track_running_stats=True).double()
    m(x)
    np.testing.assert_allclose(_np(m.running_mean), 0.1 * inst.mean(-1).mean(0), atol=1e-12)
    np.testing.assert_allclose(_np(m.running_var), 0.9 + 0.1 * inst.var(-1, ddof=1).mean(0), atol=1e-12)
    m.eval()
    rm, rv = _np(m.running_mean), _np(m.running_var)
    np.testing.assert_allclose(_np(m(x)), (xn - rm[:, None, None]) / np.sqrt(rv[:, None, None] + 1e-5), atol=1e-10)
    assert nn.InstanceNorm1d(4)(tinytorch.randn(4, 6)).shape == (4, 6)
    assert repr(nn.InstanceNorm1d(3)) == \
        "InstanceNorm1d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=False)"
    with pytest.raises(ValueError, match="expected 3D or 4D input \\(got 2D input\\)"):
        nn.InstanceNorm2d(4)(tinytorch.randn(4, 6))
    rw = _leaf(5)
    ms = (xn * xn).mean(-1, keepdims=True)
    np.testing.assert_allclose(_np(F.rms_norm(x, (5,), rw)), xn / np.sqrt(ms + np.finfo(np.float64).eps) * _np(rw),
                               atol=1e-10)
    x32 = tinytorch.randn(3, 4)
    r = nn.RMSNorm(4)(x32)
    xa = x32.numpy()
    np.testing.assert_allclose(r.detach().numpy(), xa / np.sqrt((xa * xa).mean(-1, keepdims=True) +
                                                                 np.finfo(np.float32).eps), rtol=1e-5)
    assert gradcheck(lambda a, ww: F.rms_norm(a, (3, 5), ww, 1e-3), (x, _leaf(3, 5)))
    assert repr(nn.RMSNorm(4)) == "RMSNorm((4,), eps=None, elementwise_affine=True)"
    lrn = F.local_response_norm(x, 3, alpha=0.1, beta=0.5, k=2.0)
    sq = np.pad(xn * xn, ((0, 0), (1, 1), (0, 0), (0, 0)))
    div = (2.0 + 0.1 * (sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:]) / 3) ** 0.5
    np.testing.assert_allclose(_np(lrn), xn / div, atol=1e-10)
    assert gradcheck(lambda a: F.local_response_norm(a, 2), (x,))
    assert gradcheck(lambda a: F.local_response_norm(a, 3), (_leaf(2, 4, 5),))
    assert repr(nn.LocalResponseNorm(2)) == "LocalResponseNorm(2, alpha=0.0001, beta=0.75, k=1.0)"


# ------------------------------------------------------------------ dropout, resampling, pixel shuffle, fold


def test_channel_dropout():
    tinytorch.manual_seed(0)
    x = tinytorch.ones(8, 16, 3, 3)
    y = F.dropout2d(x, 0.5).numpy()
    per_channel = y.reshape(8, 16, -1)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))  # whole maps kept (x2) or zeroed
    assert 0.2 < (per_channel[..., 0] == 0).mean() < 0.8
    y1 = F.dropout1d(tinytorch.ones(4, 16, 5), 0.5).numpy()
    assert np.all((y1 == 0).all(-1) | (y1 == 2).all(-1))
    assert F.dropout2d(x, 0.5, training=False) is x
    m = nn.Dropout2d(0.3)
    assert repr(m) == "Dropout2d(p=0.3, inplace=False)"
    m.eval()
    assert m(x) is x
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        nn.Dropout1d(1.5)
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
        F.dropout1d(tinytorch.ones(2, 2, 2, 2))
    xg = _leaf(2, 3, 4)
    tinytorch.manual_seed(1)
    out = F.dropout1d(xg, 0.5)
    out.sum().backward()
    np.testing.assert_array_equal(xg.grad.numpy(), (_np(out) != 0) * 2.0)
    a = F.alpha_dropout(tinytorch.randn(20000), 0.2, training=True).numpy()
    assert abs(a.mean()) < 0.05 and abs(a.std() - 1) < 0.05
    assert nn.Dropout3d(0.5)(tinytorch.ones(2, 3, 2, 2, 2)).shape == (2, 3, 2, 2, 2)


def test_interpolate():
    x = _leaf(2, 3, 4, 5)
    xn = _np(x)
    np.testing.assert_array_equal(_np(F.interpolate(x, scale_factor=2)), xn.repeat(2, 2).repeat(2, 3))
    ramp = tinytorch.tensor(np.arange(4.0).reshape(1, 1, 1, 4))
    np.testing.assert_allclose(_np(F.interpolate(ramp, size=(1, 7), mode="bilinear", align_corners=True))[0, 0, 0],
                               np.linspace(0, 3, 7), atol=1e-12)
    # align_corners=False: source = (dst + 0.5) / 2 - 0.5, clamped at 0.
    np.testing.assert_allclose(_np(F.interpolate(ramp[0], scale_factor=2, mode="linear"))[0, 0],
                               [0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3], atol=1e-12)
    np.testing.assert_array_equal(_np(F.interpolate(ramp, size=(1, 3), mode="nearest"))[0, 0, 0], [0, 1, 2])
    np.testing.assert_array_equal(_np(F.interpolate(ramp, size=(1, 3), mode="nearest-exact"))[0, 0, 0], [0, 2, 3])
    np.testing.assert_allclose(_np(F.interpolate(x, size=(2, 1), mode="area")),
                               xn.reshape(2, 3, 2, 2, 1, 5).mean((3, 5)), atol=1e-12)
    for mode, ac in [("nearest", None), ("bilinear", True), ("bilinear", False), ("bicubic", False), ("bicubic", True),
                     ("nearest-exact", None)]:
        assert gradcheck(lambda a: F.interpolate(a, scale_factor=1.7, mode=mode, align_corners=ac), (x,)), mode
    assert gradcheck(lambda a: F.interpolate(a, size=7, mode="linear", align_corners=True), (_leaf(2, 2, 5),))
    up = nn.Upsample(scale_factor=2, mode="bilinear")
    assert repr(up) == "Upsample(scale_factor=2.0, mode='bilinear')"
    assert up(x).shape == (2, 3, 8, 10)
    assert repr(nn.Upsample(size=(3, 3))) == "Upsample(size=(3, 3), mode='nearest')"
    np.testing.assert_allclose(_np(nn.UpsamplingBilinear2d(scale_factor=2)(x)),
                               _np(F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)))
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        F.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor should be defined"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners option can only be set with the interpolating modes"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(NotImplementedError, match="Got 4D input, but linear mode needs 3D input"):
        F.interpolate(x, scale_factor=2, mode="linear")


def test_pixel_shuffle_fold_unfold():
    x = _leaf(2, 8, 3, 4)
    y = F.pixel_shuffle(x, 2)
    xn = _np(x)
    assert y.shape == (2, 2, 6, 8)
    assert _np(y)[1, 1, 3, 5] == xn[1, 1 * 4 + 1 * 2 + 1, 1, 2]  # out[c, h*r+i, w*r+j] = in[c*r*r + i*r + j, h, w]
    np.testing.assert_array_equal(_np(F.pixel_unshuffle(y, 2)), xn)
    assert gradcheck(lambda a: F.pixel_shuffle(a, 2), (x,))
    assert repr(nn.PixelShuffle(2)) == "PixelShuffle(upscale_factor=2)"
    assert nn.PixelUnshuffle(2)(y).shape == (2, 8, 3, 4)
    with pytest.raises(RuntimeError, match="pixel_shuffle expects its input's 'channel' dimension to be divisible"):
        F.pixel_shuffle(tinytorch.randn(1, 3, 2, 2), 2)
    img = _leaf(2, 3, 5, 6)
    cols = F.unfold(img, (2, 3), padding=1, stride=(2, 1))
    assert cols.shape == (2, 3 * 6, 3 * 6)
    # unfold + matmul == conv2d
    w = _leaf(4, 3, 2, 3)
    conv = (w.reshape(4, -1) @ cols).reshape(2, 4, 3, 6)
    np.testing.assert_allclose(_np(conv), _np(F.conv2d(img, w, padding=1, stride=(2, 1))), atol=1e-10)
    assert gradcheck(lambda a: F.unfold(a, (2, 3), padding=1, stride=(2, 1)), (img,))
    c = _leaf(2, 12, 12)
    assert gradcheck(lambda a: F.fold(a, (5, 6), 2, stride=(1, 2)), (c,))
    # fold(unfold(x)) multiplies each pixel by how many blocks cover it.
    ones = tinytorch.ones(1, 1, 4, 4, dtype=tinytorch.float64)
    cover = F.fold(F.unfold(ones, 2, stride=2), (4, 4), 2, stride=2).numpy()  # no overlap
    np.testing.assert_array_equal(cover, np.ones((1, 1, 4, 4)))
    cover = F.fold(F.unfold(ones, 3, padding=1), (4, 4), 3, padding=1).numpy()[0, 0]
    np.testing.assert_array_equal(cover[0], [4, 6, 6, 4])
    assert repr(nn.Unfold(2)) == "Unfold(kernel_size=2, dilation=1, padding=0, stride=1)"
    assert nn.Fold((5, 6), 2, stride=(1, 2))(c).shape == (2, 3, 5, 6)
    with pytest.raises(RuntimeError, match="expected size of input's dimension 2 to match the calculated number"):
        F.fold(c, (5, 5), 2)


# ------------------------------------------------------------------ double backward (create_graph)


def test_double_backward_conv_pool_batch_norm():
    from tinytorch.autograd import gradgradcheck
    x, w, b = _leaf(2, 4, 5, 6), _leaf(6, 2, 3, 2), _leaf(6)
    assert gradgradcheck(lambda a, ww, bb: F.conv2d(a, ww, bb, (2, 1), (1, 0), (1, 2), 2), (x, w, b))
    assert gradgradcheck(lambda a, ww: F.conv2d(a, ww, None, 1, "same", (2, 1), 2), (x, w))
    x1, w1 = _leaf(2, 3, 7), _leaf(3, 2, 3)
    assert gradgradcheck(lambda a, ww: F.conv1d(a, ww.transpose(0, 1), None, 2, 1), (x1, w1))
    assert gradgradcheck(lambda a, ww, bb: F.conv_transpose2d(a, ww, bb, (2, 1), (1, 0), (1, 0), 2, (1, 2)),
                         (_leaf(2, 4, 3, 4), _leaf(4, 3, 3, 2), _leaf(6)))
    assert gradgradcheck(lambda a, ww: F.conv_transpose1d(a, ww, None, 2, 1, 1), (x1, w1))
    xp = _leaf(2, 3, 7, 6)
    for f in [lambda a: F.max_pool2d(a, 3, 2, 1), lambda a: F.avg_pool2d(a, 3, 2, 1, ceil_mode=True),
              lambda a: F.avg_pool2d(a, 3, 2, 1, count_include_pad=False), lambda a: F.adaptive_avg_pool2d(a, (3, 4)),
              lambda a: F.adaptive_max_pool2d(a, (3, 4)), lambda a: F.avg_pool1d(a.reshape(2, 3, 42), 3, 2)]:
        assert gradgradcheck(f, (xp,))
    wb, bb_ = _leaf(3), _leaf(3)
    rm, rv = tinytorch.zeros(3, dtype=tinytorch.float64), tinytorch.ones(3, dtype=tinytorch.float64) * 2
    assert gradgradcheck(lambda a, ww, bb: F.batch_norm(a, None, None, ww, bb, True), (xp, wb, bb_))
    assert gradgradcheck(lambda a, ww, bb: F.batch_norm(a, rm, rv, ww, bb, False), (xp, wb, bb_))


def test_input_gradients_under_create_graph_are_contiguous():
    # WGAN-GP's gradient penalty: grad(D(x).sum(), x, create_graph=True)[0].view(B, -1) needs a contiguous
    # gradient, as PyTorch's is, also through padded convolutions and average pooling.
    F = tinytorch.nn.functional
    def w(*shape):
        return tinytorch.randn(*shape, requires_grad=True)

    makers = [lambda x: F.conv2d(x, w(4, 3, 3, 3), padding=1),
              lambda x: F.conv2d(x, w(4, 3, 4, 4), stride=2, padding=1),
              lambda x: F.conv1d(x.flatten(2), w(4, 3, 3), padding=1),
              lambda x: F.conv3d(x.unsqueeze(2), w(4, 3, 1, 3, 3), padding=(0, 1, 1)),
              lambda x: F.conv_transpose2d(x, w(3, 4, 3, 3), padding=1),
              lambda x: F.avg_pool2d(x, 3, 1, 1) * w(1)]
    for make in makers:
        x = tinytorch.randn(2, 3, 8, 8, requires_grad=True)
        g, = tinytorch.autograd.grad(make(x).sum(), x, create_graph=True)
        assert g.is_contiguous()
        penalty = ((g.view(2, -1).norm(2, dim=1) - 1) ** 2).mean()
        assert penalty.requires_grad
        penalty.backward()
